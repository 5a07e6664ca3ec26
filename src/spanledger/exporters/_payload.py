"""Opt-in payload rendering shared by exporters: deterministic JSON and a UTF-8-safe byte cap.

Vectors are never rendered, whatever the exporter's settings.
"""

from __future__ import annotations

import json
from typing import Any

from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
)

__all__ = ["DEFAULT_PAYLOAD_CAP", "MIN_PAYLOAD_CAP", "capped", "json_text", "payload_fields"]

DEFAULT_PAYLOAD_CAP = 65_536
MIN_PAYLOAD_CAP = 256


def json_text(value: object) -> str:
    """Compact JSON with sorted keys, text kept as UTF-8; a lone surrogate (which has no UTF-8
    form) becomes its ``\\uXXXX`` JSON escape, so the result always encodes."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def capped(text: str, cap: int) -> str:
    """``text`` if it fits in ``cap`` UTF-8 bytes, else a prefix cut on a code point boundary
    followed by a marker naming the original size (the JSON is then deliberately unparseable)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return text
    marker = f"…[truncated, {len(data)} bytes total]".encode()
    keep = max(0, cap - len(marker))
    while keep > 0 and (data[keep] & 0xC0) == 0x80:
        keep -= 1
    return (data[:keep] + marker).decode("utf-8", "surrogatepass")


def payload_fields(event: Event) -> dict[str, Any]:
    """The caller content an opted-in exporter may render, by field name (absent ones left out)."""
    fields: dict[str, Any] = {}
    if isinstance(event, EmbeddingEvent | EmbeddingFailedEvent):
        if event.inputs is not None:
            fields["inputs"] = event.inputs
    else:
        if event.query is not None:
            fields["query"] = event.query
        if event.documents is not None:
            fields["documents"] = event.documents
        if isinstance(event, RerankEvent) and event.results is not None:
            fields["results"] = [result.model_dump() for result in event.results]
    if event.request_extras:
        fields["request_extras"] = event.request_extras
    return fields
