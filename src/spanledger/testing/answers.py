"""What every vendor's answers are made of: the stand-in vectors, word-overlap scores, token
counts, the usage switches a model name flips, response ids, and reading the call's model.

Each vendor module builds its answers from these, so two vendors given one text answer the
same vector and one document the same score.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import uuid
from collections.abc import Mapping
from typing import Any

from spanledger.wire.endpoints import Vendor, bedrock_model

__all__ = ["DEFAULT_DIMENSIONS", "standin_vector"]

DEFAULT_DIMENSIONS = 16
"""How many values a stand-in vector has when the request names no dimensions."""

_WORD = re.compile(r"\w+")
_Answer = tuple[int, Any, dict[str, str]]
"""A built-in endpoint's answer: status, JSON payload, extra headers."""


def standin_vector(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """The unit vector the stand-in answers for ``text``: deterministic, float32-exact, so a
    test can compare what a client decoded with ``==``."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((byte - 127.5) / 127.5 for byte in digest)
        counter += 1
    values = values[:dimensions]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    packed = struct.pack(f"<{dimensions}f", *(v / norm for v in values))
    return list(struct.unpack(f"<{dimensions}f", packed))


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


def _score(query: str, document: str) -> float:
    query_words = {w.lower() for w in _WORD.findall(query)}
    doc_words = {w.lower() for w in _WORD.findall(document)}
    overlap = len(query_words & doc_words) / (len(query_words) or 1)
    tiebreak = int.from_bytes(hashlib.sha256(document.encode()).digest()[:2], "big") / 65536e3
    return round(min(0.999, overlap * 0.9 + tiebreak), 6)


def _ranked(
    query: str, documents: list[str], index_key: str, score_key: str, limit: object
) -> list[dict[str, Any]]:
    """Results by score, best first, each naming its document's position; ``limit`` cuts."""
    ranked = sorted(
        ({index_key: i, score_key: _score(query, d)} for i, d in enumerate(documents)),
        key=lambda r: -r[score_key],
    )
    return ranked[:limit] if isinstance(limit, int) and not isinstance(limit, bool) else ranked


def _answer_id(seed: object) -> str:
    """A response id (UUID-shaped, as Bedrock's and Azure's are) that depends only on ``seed``."""
    digest = hashlib.sha256(json.dumps(seed, sort_keys=True, default=str).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


def _usage_value(model: str, figure: int) -> object:
    """The usage figure to report: garbage when the model name asks for ``usage-malformed``."""
    return "abc" if model == "usage-malformed" else figure


def _reports(model: str, report: bool) -> bool:
    """Whether the answer carries usage: the route's choice, unless the model says
    ``usage-missing``."""
    return report and model != "usage-missing"


def _as_list(value: object) -> list[Any]:
    """The inputs a body carries: one string is one input, as the vendors read it."""
    if isinstance(value, str):
        return [value]
    return list(value) if isinstance(value, list) else []


def _dimensions(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else DEFAULT_DIMENSIONS


def _document_text(document: object) -> str:
    """A rerank document as text: itself, or a Cohere v1 ``{"text": ...}`` object's text."""
    if isinstance(document, dict):
        return str(document.get("text", ""))
    return str(document)


def _data_embeddings(
    body: dict[str, Any], texts: list[str], dimensions: int, base64_ok: bool = True
) -> list[dict[str, Any]]:
    """OpenAI's ``data`` list (which Jina, Voyage and the OpenAI-compatible APIs answer too),
    base64-encoded when the body asks for it and ``base64_ok``."""
    base64_format = base64_ok and body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = standin_vector(text, dimensions)
        embedding: Any = vector
        if base64_format:
            embedding = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    data.reverse()  # out of order on purpose: clients must assemble by index
    return data


def _dig(node: object, *steps: str | int) -> object:
    """``node`` followed along object keys and list indexes; ``None`` where the path breaks."""
    for step in steps:
        if isinstance(step, int) and isinstance(node, list):
            node = node[step] if -len(node) <= step < len(node) else None
        elif isinstance(step, str) and isinstance(node, dict):
            node = node.get(step)
        else:
            return None
    return node


def _model_of(vendor: str, body: object, params: Mapping[str, str]) -> str:
    """The call's model: the one the URL names, else the body's (Bedrock ids as the base model
    they name)."""
    named: object = params.get("model", params.get("deployment"))
    if named is None and vendor == Vendor.BEDROCK:
        configuration = ("rerankingConfiguration", "bedrockRerankingConfiguration")
        named = _dig(body, *configuration, "modelConfiguration", "modelArn")
    if named is None:
        named = _dig(body, "model")
    if named is None:
        return "tei-model" if vendor == Vendor.TEI else ""
    return bedrock_model(str(named)) if vendor == Vendor.BEDROCK else str(named)
