"""What an in-process model is called on events and chain attempts: the name it was loaded by,
never a local path that may hold a user's or a home folder's name.

One rule for every path that names a local model: the instrumented libraries and a rerank
chain's cross-encoder step.
"""

from __future__ import annotations

from pathlib import PurePath

__all__ = ["local_model_name", "model_label"]


def model_label(given: object) -> str | None:
    """A model's name for events from what it was loaded by: a hub id (``org/name``) as is,
    a hub cache folder (``.../models--org--name/snapshots/<hash>``) as ``org/name``, and any
    other local path by its last part only, so no user or home folder reaches telemetry."""
    if not isinstance(given, str) or not given.strip():
        return None
    text = given.strip().rstrip("/\\")
    parts = PurePath(text.replace("\\", "/")).parts
    for part in reversed(parts):
        if part.startswith("models--"):
            return part.removeprefix("models--").replace("--", "/", 1)
    looks_local = text.startswith(("/", ".", "~")) or ":" in text or len(parts) > 2
    if not looks_local and len(parts) <= 2:
        return text
    return parts[-1] if parts else None


def local_model_name(model: object) -> str:
    """A loaded model's name: its model card's id or base model, else the path its tokenizer or
    config was loaded from (by ``model_label``), else its class name."""
    card = getattr(model, "model_card_data", None)
    tokenizer = getattr(model, "tokenizer", None)
    config = getattr(model, "config", None) or getattr(
        getattr(model, "model", None), "config", None
    )
    candidates = (
        getattr(card, "model_id", None),
        getattr(card, "base_model", None),
        getattr(tokenizer, "name_or_path", None),
        getattr(config, "_name_or_path", None),
    )
    return next(filter(None, map(model_label, candidates)), type(model).__name__)
