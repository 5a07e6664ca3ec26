"""The console's columns line up for every built-in vendor, the longest name included."""

from __future__ import annotations

from spanledger.exporters.console import describe_event
from spanledger.wire.endpoints import Vendor

from .conftest import embedding_event


def test_the_model_column_starts_at_one_place_for_every_vendor() -> None:
    lines = [
        describe_event(embedding_event(provider=vendor.value, model="the-model"))
        for vendor in Vendor
    ]
    starts = {line.index(" the-model ") for line in lines}
    assert len(starts) == 1, lines
