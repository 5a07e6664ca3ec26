"""spanledger logs like a library: with structlog left unconfigured, its warnings go to the
standard library's ``logging`` under ``spanledger`` and nothing is printed to standard output;
an application that configured structlog gets them through its own processors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

from structlog.testing import capture_logs

from spanledger.events import EmbeddingEvent, EmbeddingUsage
from spanledger.ledger import PriceTable
from spanledger.ledger.pricing import Ledger, _forget_warnings

TRIGGER = """
from datetime import UTC, datetime
from spanledger.events import EmbeddingEvent, EmbeddingUsage
from spanledger.ledger import PriceTable
from spanledger.ledger.pricing import Ledger

event = EmbeddingEvent(
    call_id="c1", provider="acme", model="unlisted-model",
    started_at=datetime(2026, 11, 1, tzinfo=UTC), latency_ms=1.0, input_count=1,
    usage=EmbeddingUsage(input_tokens=5),
)
listed = {"provider": "acme", "model": "listed-model", "per_request": 1}
Ledger(PriceTable.from_dict({"prices": [listed], "custom_providers": ["acme"]})).price(event)
"""


def test_warnings_go_to_stdlib_logging_and_never_to_stdout() -> None:
    script = (
        "import io, json, logging, sys\n"
        "kept = io.StringIO()\n"
        "logging.getLogger('spanledger').addHandler(logging.StreamHandler(kept))\n"
        + textwrap.dedent(TRIGGER)
        + "print('KEPT ' + json.dumps(kept.getvalue()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )

    [line] = done.stdout.splitlines()  # nothing but the script's own line
    kept = json.loads(line.removeprefix("KEPT "))
    assert kept.startswith("usage_not_priced ")
    assert "model='unlisted-model'" in kept
    assert done.stderr == ""  # the handler took it; logging's last resort printed nothing


def test_an_application_that_configured_structlog_gets_them_through_it() -> None:
    _forget_warnings()
    event = EmbeddingEvent(
        call_id="c1",
        provider="acme",
        model="another-unlisted-model",
        started_at=datetime(2026, 11, 1, tzinfo=UTC),
        latency_ms=1.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=5),
    )
    with capture_logs() as logs:
        Ledger(PriceTable.from_dict({"prices": []})).price(event)
    [record] = [log for log in logs if log["event"] == "usage_not_priced"]
    assert record["model"] == "another-unlisted-model"
    assert record["log_level"] == "warning"
