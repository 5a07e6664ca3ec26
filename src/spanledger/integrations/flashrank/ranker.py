"""FlashRank's ``Ranker.rerank``, recorded as ``flashrank``.

A ranker scores each (query, passage) pair with an ONNX cross-encoder; the pairs are tokenized
by the ranker's ``tokenizers.Tokenizer`` (padded and truncated), whose encodings carry the
attention masks the model then runs on. That tokenizer is a compiled object whose methods
cannot be patched, so a recorded ranker gets a thin stand-in in its place that hands every call
through and counts the masks of ``encode_batch``; it is put back when recording ends. The model
is named by the folder FlashRank keeps it in (``ms-marco-TinyBERT-L-2-v2``). The listwise LLM
rankers tokenize elsewhere: their usage is unknown (``None``).

Nothing here imports ``flashrank``: the switch waits for the library's own import.
"""

from __future__ import annotations

from collections.abc import Sized
from types import ModuleType
from typing import Any

from spanledger.capture.installation import Installation
from spanledger.capture.local import (
    LOCAL_BILLING,
    Library,
    LocalSpec,
    counting,
)
from spanledger.recording.facts import (
    EmbedFacts,
    Figures,
    RerankFacts,
    texts_only,
    utf8_length,
)
from spanledger.wire.endpoints import Vendor

__all__ = ["LIBRARY", "hook", "install"]

_PROVIDER = Vendor.FLASHRANK.value


def install(ranker: Any, installation: Installation) -> None:
    """Record ``ranker`` (a ``flashrank.Ranker``) until ``uninstrument``."""
    if not any(klass.__name__ == "Ranker" for klass in type(ranker).__mro__):
        raise TypeError(
            f"spanledger.instrument supports flashrank.Ranker, not {type(ranker).__qualname__}"
        )
    LIBRARY.choose(ranker)
    installation.on_release(LIBRARY.release, ranker)


def hook(adopt: Any) -> Any:
    """The process-wide switch: every ranker records until it is undone."""
    return LIBRARY.switch_on()


class CountingTokenizer:
    """Stands in for a ranker's tokenizer: ``encode_batch`` counts, the rest passes through."""

    __slots__ = ("tokenizer",)

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode_batch(self, *args: Any, **kwargs: Any) -> Any:
        inner = self.tokenizer
        return counting(None, lambda: inner.encode_batch(*args, **kwargs), _masked)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)


def _masked(encodings: Any) -> tuple[int, int]:
    rows = list(encodings)
    return len(rows), sum(sum(encoding.attention_mask) for encoding in rows)


def _patches(module: ModuleType) -> list[tuple[type, str, Any]]:
    return [(module.Ranker, "rerank", _counted_rerank)]


def _counted_rerank(original: Any) -> Any:
    recorded = LIBRARY.recorded(original, LocalSpec(_facts, _figures))

    def rerank(self: Any, *args: Any, **kwargs: Any) -> Any:
        if LIBRARY.records(self):
            _stand_in(self)
        return recorded(self, *args, **kwargs)

    return rerank


def _stand_in(ranker: Any) -> None:
    """Give ``ranker`` a counting tokenizer, once (taken back by ``_forget``)."""
    attributes = vars(ranker)
    tokenizer = attributes.get("tokenizer")
    if tokenizer is None or type(tokenizer) is CountingTokenizer:
        return
    attributes["tokenizer"] = CountingTokenizer(tokenizer)
    LIBRARY.touched.add(ranker)


def _forget(ranker: Any) -> None:
    attributes = vars(ranker)
    tokenizer = attributes.get("tokenizer")
    if type(tokenizer) is CountingTokenizer:
        attributes["tokenizer"] = tokenizer.tokenizer


LIBRARY = Library("flashrank.Ranker", _patches, forget=_forget)


def _facts(
    ranker: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[RerankFacts, int | None]:
    request = args[0] if args else kwargs.get("request")
    query = getattr(request, "query", None)
    passages = getattr(request, "passages", None)
    count = len(passages) if isinstance(passages, Sized) else None
    texts = (
        [passage.get("text") if isinstance(passage, dict) else None for passage in passages]
        if isinstance(passages, list)
        else None
    )
    text = query if isinstance(query, str) else None
    directory = getattr(ranker, "model_dir", None)
    facts = RerankFacts(
        provider=_PROVIDER,
        model=str(getattr(directory, "name", "")) or type(ranker).__name__,
        query_length=utf8_length(text) if text is not None else 0,
        document_count=count or 0,
        query=text,
        documents=texts_only(texts),
        billing=LOCAL_BILLING,
    )
    if getattr(ranker, "llm_model", None) is not None:
        return facts, -1  # listwise: no tokenizer of ours sees the passages
    return facts, count


def _figures(result: Any, facts: EmbedFacts | RerankFacts) -> Figures:
    return Figures(result_count=len(result))
