"""What a caller asked for, checked before anything is sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanledger.errors import ErrorCategory, ProviderError

__all__ = [
    "EmbedCall",
    "RerankCall",
    "invalid_request",
    "merge_list_extra",
    "reject_conflict",
    "with_extras",
]


def invalid_request(detail: str, error_type: str = "invalid_request") -> ProviderError:
    """A pre-send rejection; the detail names fields, never their values."""
    return ProviderError(ErrorCategory.INVALID_REQUEST, detail=detail, error_type=error_type)


def _string_list(values: object, what: str) -> list[str]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise invalid_request(f"{what} must be a list of strings", "bad_argument")
    items = list(values)
    if not all(type(item) is str for item in items):
        raise invalid_request(f"every entry of {what} must be a string", "bad_argument")
    return items


def _extras(extras: Mapping[str, Any] | None) -> dict[str, Any]:
    if extras is None:
        return {}
    if not isinstance(extras, Mapping) or not all(type(key) is str for key in extras):
        raise invalid_request("extras must be a mapping with string keys", "bad_argument")
    return dict(extras)


@dataclass(frozen=True, slots=True)
class EmbedCall:
    """An embedding call as the caller made it."""

    inputs: list[str]
    input_type: str | None = None
    dimensions: int | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def checked(
        cls,
        inputs: object,
        input_type: object,
        dimensions: object,
        extras: Mapping[str, Any] | None,
    ) -> EmbedCall:
        items = _string_list(inputs, "inputs")
        if not items:
            raise invalid_request("inputs must not be empty", "empty_input")
        if input_type is not None and (type(input_type) is not str or not input_type):
            raise invalid_request("input_type must be a non-empty string", "bad_argument")
        if dimensions is not None and (type(dimensions) is not int or dimensions <= 0):
            raise invalid_request("dimensions must be a positive integer", "bad_dimensions")
        return cls(items, input_type, dimensions, _extras(extras))

    def request_params(self) -> dict[str, Any]:
        """Only the declared options the caller actually set."""
        params: dict[str, Any] = {}
        if self.input_type is not None:
            params["input_type"] = self.input_type
        if self.dimensions is not None:
            params["dimensions"] = self.dimensions
        return params


@dataclass(frozen=True, slots=True)
class RerankCall:
    """A rerank call as the caller made it; ``return_documents=None`` means not set (False)."""

    query: str
    documents: list[str]
    top_k: int | None = None
    return_documents: bool | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def checked(
        cls,
        query: object,
        documents: object,
        top_k: object,
        return_documents: object,
        extras: Mapping[str, Any] | None,
    ) -> RerankCall:
        if type(query) is not str:
            raise invalid_request("query must be a string", "bad_argument")
        if not query:
            raise invalid_request("query must not be empty", "empty_query")
        docs = _string_list(documents, "documents")
        if not docs:
            raise invalid_request("documents must not be empty", "empty_documents")
        if top_k is not None and (type(top_k) is not int or top_k <= 0):
            raise invalid_request("top_k must be a positive integer", "bad_top_k")
        if return_documents is not None and type(return_documents) is not bool:
            raise invalid_request("return_documents must be a bool", "bad_argument")
        return cls(query, docs, top_k, return_documents, _extras(extras))

    @property
    def wants_documents(self) -> bool:
        return bool(self.return_documents)

    def request_params(self) -> dict[str, Any]:
        if self.return_documents is None:
            return {}
        return {"return_documents": self.return_documents}


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def reject_conflict(extras: Mapping[str, Any], key: str, managed: object) -> None:
    """Reject arm: an extras value equal to the managed one is a no-op; any other raises."""
    if key in extras and not _same(extras[key], managed):
        raise invalid_request(
            f"extras key {key!r} conflicts with a value this mapping manages", "extras_conflict"
        )


def with_extras(
    body: dict[str, Any], extras: Mapping[str, Any], *, handled: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Put extras at the body root. A key the mapping is producing is managed: an equal value is
    a no-op and a different one is refused before sending. ``handled`` keys were already merged.
    """
    for key, value in extras.items():
        if key in handled:
            continue
        if key in body:
            reject_conflict(extras, key, body[key])
        else:
            body[key] = value
    return body


def merge_list_extra(managed: list[Any], extra: object, element_type: type) -> list[Any]:
    """Merge arm: managed values first, then the caller's, first occurrence wins.

    A malformed caller value (not a list, or any element of the wrong type) counts as absent.
    """
    if type(extra) is not list or not all(type(item) is element_type for item in extra):
        return list(managed)
    merged: list[Any] = []
    for item in [*managed, *extra]:
        if item not in merged:
            merged.append(item)
    return merged
