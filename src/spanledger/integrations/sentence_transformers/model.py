"""``sentence_transformers``: ``SentenceTransformer.encode`` (embeddings) and
``CrossEncoder.predict`` / ``rank`` (rerank), recorded as ``sentence_transformers``.

Both models turn every batch into features through ``preprocess``, whose ``attention_mask``
marks the tokens the model runs on: its sum over the call's batches is the call's usage, counted
from what the library built anyway. Arguments pass through untouched (batch size, tensors or
arrays, normalisation, prompts); the event reads the input count, the prompt or task as the
input type, ``truncate_dim`` as the requested dimensions, and the result's width or scores.

The model is named by the hub id it was loaded by; a model loaded from a local folder is named
by the folder's last part (see ``spanledger.recording.names``), never by its full path.

Nothing here imports ``sentence_transformers``: the switch waits for the library's own import.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sized
from types import ModuleType
from typing import Any

from spanledger.capture.installation import Installation
from spanledger.capture.local import (
    LOCAL_BILLING,
    Library,
    LocalSpec,
    counting,
)
from spanledger.events import ScoredDocument
from spanledger.recording.facts import (
    EmbedFacts,
    Figures,
    RerankFacts,
    passed,
    positive_int,
    text_or_none,
    texts_only,
    utf8_length,
)
from spanledger.recording.names import local_model_name
from spanledger.wire.endpoints import Vendor

__all__ = ["LIBRARY", "hook", "install"]

_PROVIDER = Vendor.SENTENCE_TRANSFORMERS.value
_ENCODE_ARGS = ("inputs", "prompt_name", "prompt", "batch_size")
_PREDICT_ARGS = ("inputs", "prompt_name", "prompt", "batch_size")
_RANK_ARGS = ("query", "documents", "top_k", "return_documents", "prompt_name", "prompt")
_ENCODE_EXTRAS = (
    "batch_size",
    "normalize_embeddings",
    "precision",
    "convert_to_tensor",
    "convert_to_numpy",
    "output_value",
)
_RERANK_EXTRAS = ("batch_size", "apply_softmax", "convert_to_tensor", "convert_to_numpy")
_names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def install(model: Any, installation: Installation) -> None:
    """Record ``model`` (a ``SentenceTransformer`` or ``CrossEncoder``) until ``uninstrument``."""
    kinds = {klass.__name__ for klass in type(model).__mro__}
    if not kinds & {"SentenceTransformer", "CrossEncoder"}:
        raise TypeError(
            "spanledger.instrument supports sentence_transformers.SentenceTransformer and "
            f"CrossEncoder, not {type(model).__qualname__}"
        )
    LIBRARY.choose(model)
    installation.on_release(LIBRARY.release, model)


def hook(adopt: Any) -> Any:
    """The process-wide switch: every model of the library records until it is undone."""
    return LIBRARY.switch_on()


def _patches(package: ModuleType) -> list[tuple[type, str, Any]]:
    from sentence_transformers.base.model import BaseModel
    from sentence_transformers.cross_encoder.model import CrossEncoder
    from sentence_transformers.sentence_transformer.model import SentenceTransformer

    return [
        (BaseModel, "preprocess", _counting_preprocess),
        (SentenceTransformer, "encode", LocalSpec(_encode_facts, _embedding_figures)),
        (CrossEncoder, "predict", LocalSpec(_predict_facts, _predict_figures)),
        (CrossEncoder, "rank", LocalSpec(_rank_facts, _rank_figures)),
    ]


LIBRARY = Library("sentence_transformers", _patches)


def _counting_preprocess(original: Any) -> Any:
    def preprocess(self: Any, *args: Any, **kwargs: Any) -> Any:
        return counting(self, lambda: original(self, *args, **kwargs), _masked)

    return preprocess


def _masked(features: Any) -> tuple[int, int] | None:
    """Rows and non-padding tokens of one batch's features (``None``: no mask to read)."""
    if not isinstance(features, Mapping):
        return None
    if not features:
        return 0, 0
    mask = features.get("attention_mask")
    shape = getattr(mask, "shape", None)
    if mask is None or shape is None or len(shape) != 2:
        return None
    return int(shape[0]), int(mask.sum())


def _name(model: Any) -> str:
    found = _names.get(model)
    if found is None:
        found = _names[model] = local_model_name(model)
    return found


def _bound(names: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    given = dict(zip(names, args, strict=False))
    return {**kwargs, **given}


def _count(model: Any, inputs: Any) -> int | None:
    """How many inputs the model will see (``None``: not known before it runs)."""
    if model.is_singular_input(inputs):
        return 1
    return len(inputs) if isinstance(inputs, Sized) else None


def _encode_facts(
    model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[EmbedFacts, int | None]:
    call = _bound(_ENCODE_ARGS, args, kwargs)
    inputs = call.get("inputs")
    count = _count(model, inputs)
    if isinstance(inputs, str):
        texts: list[Any] | None = [inputs]
    else:
        texts = inputs if type(inputs) is list else None
    kind = text_or_none(call.get("task")) or text_or_none(call.get("prompt_name"))
    params: dict[str, Any] = {"input_type": kind} if kind else {}
    width = positive_int(call.get("truncate_dim"))
    if width is not None:
        params["dimensions"] = width
    facts = EmbedFacts(
        provider=_PROVIDER,
        model=_name(model),
        input_count=count or 0,
        inputs=texts,
        input_type=kind,
        request_params=params,
        extras=passed(call, _ENCODE_EXTRAS),
        billing=LOCAL_BILLING,
    )
    return facts, count


def _embedding_figures(result: Any, facts: EmbedFacts | RerankFacts) -> Figures:
    if isinstance(result, list):
        result = result[0] if result else None
    shape = getattr(result, "shape", None)
    width = int(shape[-1]) if shape is not None and len(shape) else None
    return Figures(dimensions=width or None)


def _rerank(
    model: Any,
    query: Any,
    documents: list[Any] | None,
    count: int | None,
    call: dict[str, Any],
) -> RerankFacts:
    text = query if isinstance(query, str) else None
    return RerankFacts(
        provider=_PROVIDER,
        model=_name(model),
        query_length=utf8_length(text) if text is not None else 0,
        document_count=count or 0,
        query=text,
        documents=texts_only(documents),
        top_k=positive_int(call.get("top_k")),
        request_params={"return_documents": call["return_documents"]}
        if type(call.get("return_documents")) is bool
        else {},
        extras=passed(call, _RERANK_EXTRAS),
        billing=LOCAL_BILLING,
    )


def _predict_facts(
    model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[RerankFacts, int | None]:
    call = _bound(_PREDICT_ARGS, args, kwargs)
    inputs = call.get("inputs")
    count = _count(model, inputs)
    pairs = [inputs] if count == 1 and model.is_singular_input(inputs) else inputs
    query = None
    documents = None
    if isinstance(pairs, list | tuple) and pairs:
        firsts = {_first(pair) for pair in pairs}
        if len(firsts) == 1:  # one query against many documents: a rerank
            query = firsts.pop()
        documents = [pair[1] if isinstance(pair, list | tuple) and len(pair) > 1 else None
                     for pair in pairs]  # fmt: skip
    return _rerank(model, query, documents, count, call), count


def _first(pair: Any) -> Any:
    if isinstance(pair, list | tuple) and pair and isinstance(pair[0], str):
        return pair[0]
    return None


def _predict_figures(result: Any, facts: EmbedFacts | RerankFacts) -> Figures:
    shape = getattr(result, "shape", None)
    if (shape is not None and len(shape) == 0) or isinstance(result, float):
        return Figures(result_count=1, results=_scored([result]))
    if shape is not None and len(shape) != 1:
        return Figures(result_count=int(shape[0]))  # several labels per pair: no one score
    scores = list(result)
    return Figures(result_count=len(scores), results=_scored(scores))


def _scored(scores: list[Any]) -> list[ScoredDocument] | None:
    """The scores as results, highest first (``None`` when one is not a finite number)."""
    values = [float(score) for score in scores]
    if not all(map(math.isfinite, values)):
        return None
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    return [ScoredDocument(index=index, relevance_score=values[index]) for index in order]


def _rank_facts(
    model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[RerankFacts, int | None]:
    call = _bound(_RANK_ARGS, args, kwargs)
    documents = call.get("documents")
    count = len(documents) if isinstance(documents, Sized) else None
    listed = documents if type(documents) is list else None
    return _rerank(model, call.get("query"), listed, count, call), count


def _rank_figures(result: Any, facts: EmbedFacts | RerankFacts) -> Figures:
    ranked = list(result)
    try:
        results: list[ScoredDocument] | None = [
            ScoredDocument(index=int(item["corpus_id"]), relevance_score=float(item["score"]))
            for item in ranked
        ]
    except (KeyError, TypeError, ValueError):
        results = None
    return Figures(result_count=len(ranked), results=results)
