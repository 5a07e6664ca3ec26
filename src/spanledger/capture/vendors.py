"""Recognise a vendor's embedding or rerank request among plain HTTP traffic.

The vendor is taken, in order, from the caller's ``vendors`` map (a host, or a URL prefix), the
vendor's public API hosts (or Ollama's port), a route only one vendor serves (Bedrock's
``/model/{id}/invoke``, Google's ``:embedContent`` and ``:predict``, Vertex AI's regional,
global and express-mode paths alike, Azure's deployments, Ollama's ``/api/embed``), the route
itself (``/v2/embed`` is Cohere, ``/embed`` with ``texts`` is Cohere's v1 and with ``inputs``
TEI), the model's name (``voyage-…``, ``jina-…``, ``mistral-embed``), and finally the body's
shape (Voyage's ``input_type`` / ``top_k``, Cohere's rerank models and keys, Jina's ``task`` /
``top_n``; other ``/embeddings`` requests are the OpenAI-compatible wire). Where several
endpoints share a route (Bedrock's models), the body's keys choose. Which keys carry what is
each endpoint's declaration in ``spanledger.wire``; the request's facts are read by
``spanledger.recording.facts.request_facts``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx

from spanledger.wire.endpoints import (
    ALL_ENDPOINTS,
    COHERE_V1_EMBEDDINGS,
    IN_PROCESS_VENDORS,
    Endpoint,
    Vendor,
)
from spanledger.wire.request import request_model, request_path, value_at

__all__ = ["ROUTE_ENDINGS", "checked_vendors", "recognise"]

_DISTINCT = tuple(
    endpoint
    for endpoint in ALL_ENDPOINTS
    if endpoint.route_pattern is not None
    or endpoint.route.startswith("/api/")
    or endpoint.selects_by
)
"""Endpoints a route (with the body's keys) tells apart whatever the host."""
_PLAIN = tuple(endpoint for endpoint in ALL_ENDPOINTS if endpoint not in _DISTINCT)
_BY_SUFFIX = {(endpoint.vendor, endpoint.suffix): endpoint for endpoint in reversed(_PLAIN)}
_BY_PORT = {port: endpoint.vendor for endpoint in ALL_ENDPOINTS for port in endpoint.ports}
_EXACT_HOSTS = {
    host: endpoint.vendor
    for endpoint in ALL_ENDPOINTS
    for host in endpoint.hosts
    if not host.startswith(".")
}
_DOMAINS = tuple(
    (host, endpoint.vendor)
    for endpoint in ALL_ENDPOINTS
    for host in endpoint.hosts
    if host.startswith(".")
)
_MODEL_PREFIXES = tuple(
    (prefix, endpoint) for endpoint in _PLAIN for prefix in endpoint.model_prefixes
)
_HOSTING = frozenset({Vendor.AZURE})
"""Clouds whose hosts also serve other vendors' wires (Cohere's rerank on Azure AI Foundry)."""
ROUTE_ENDINGS = (
    "/embeddings",
    "/embed",
    "/rerank",
    "/invoke",
    ":embedContent",
    ":batchEmbedContents",
    ":predict",
    ":rank",
)
"""How the path of every recognised route ends: the cheap first test for plain traffic."""
_VOYAGE_EMBED_KEYS = frozenset({"input_type", "output_dimension", "output_dtype", "truncation"})
_JINA_EMBED_KEYS = frozenset({"task", "late_chunking", "embedding_type", "truncate"})
_COHERE_RERANK_KEYS = frozenset({"rank_fields", "max_chunks_per_doc", "max_tokens_per_doc"})
_COHERE_RERANK_MODEL = re.compile(r"rerank-(?:english|multilingual|v\d)", re.IGNORECASE)
"""Cohere's rerank model names (``rerank-v3.5``, ``rerank-english-v3.0``, Azure AI Foundry's
``Cohere-rerank-v3.5``); Voyage's are ``rerank-2``, ``rerank-lite-1``."""


def checked_vendors(vendors: Mapping[str, str] | None) -> dict[str, Vendor]:
    """The caller's host / URL-prefix map, refusing vendor names this module cannot read."""
    declared = dict(vendors or {})
    known = sorted(vendor.value for vendor in Vendor if vendor not in IN_PROCESS_VENDORS)
    unknown = sorted({str(name) for name in declared.values()} - set(known))
    if unknown:
        raise ValueError(f"unknown vendor names {unknown}; known: {known}")
    return {key: Vendor(name) for key, name in declared.items()}


def recognise(
    url: httpx.URL, body: dict[str, Any], vendors: Mapping[str, Vendor]
) -> Endpoint | None:
    """The vendor endpoint ``url`` + ``body`` calls, or ``None`` for any other request."""
    path = request_path(url)
    hinted = _declared(url, vendors) or _host_vendor(url)
    distinct = _distinct(path, body, hinted)
    if distinct is not None:
        return distinct
    suffix = path[path.rfind("/") :]
    vendor = hinted
    if hinted in _HOSTING and (hinted, suffix) not in _BY_SUFFIX:
        vendor = None  # another vendor's wire served from this cloud's hosts
    vendor = vendor or _guess(path, suffix, body)
    if vendor is None:
        return None
    if vendor is Vendor.COHERE and path.endswith(COHERE_V1_EMBEDDINGS.route):
        return COHERE_V1_EMBEDDINGS
    return _BY_SUFFIX.get((vendor, suffix))


def _distinct(path: str, body: dict[str, Any], hinted: Vendor | None) -> Endpoint | None:
    """The endpoint a route of its own (and the body's keys, where a route is shared) names;
    a vendor the caller or the host named must be the endpoint's."""
    for endpoint in _DISTINCT:
        if hinted is not None and endpoint.vendor is not hinted:
            continue
        pattern = endpoint.route_pattern
        matched = pattern.search(path) if pattern is not None else path.endswith(endpoint.route)
        if not matched:
            continue
        if endpoint.selects_by and not any(
            value_at(body, key) is not None for key in endpoint.selects_by
        ):
            continue
        if not _names_its_model(endpoint, path):
            continue
        return endpoint
    return None


def _names_its_model(endpoint: Endpoint, path: str) -> bool:
    """Whether the model a route names can be this endpoint's: a Bedrock id must be one of the
    endpoint's models (Titan Text's generation body also holds ``inputText``); an ARN that
    names no model is judged by the body alone."""
    if not endpoint.model_prefixes or not endpoint.model_in_route:
        return True
    named = request_model(endpoint, {}, path)
    if named is None or named.startswith("arn:"):
        return True
    return named.startswith(endpoint.model_prefixes)


def _host_vendor(url: httpx.URL) -> Vendor | None:
    host = url.host
    vendor = _EXACT_HOSTS.get(host)
    if vendor is None and host:
        for domain, owner in _DOMAINS:
            if host.endswith(domain):
                return owner
    if vendor is None and url.port is not None:
        vendor = _BY_PORT.get(url.port)
    return vendor


def _declared(url: httpx.URL, vendors: Mapping[str, Vendor]) -> Vendor | None:
    if not vendors:
        return None
    text = str(url.copy_with(query=None, fragment=None))
    for key, vendor in vendors.items():
        if key == url.host or text.startswith(key):
            return vendor
    return None


def _by_model_name(suffix: str, named: str) -> Vendor | None:
    """The vendor a model's name tells (``voyage-3.5`` is Voyage's wherever it is sent)."""
    if not named:
        return None
    for prefix, endpoint in _MODEL_PREFIXES:
        if endpoint.suffix == suffix and named.startswith(prefix):
            return endpoint.vendor
    return None


def _guess(path: str, suffix: str, body: dict[str, Any]) -> Vendor | None:
    if path.endswith(("/v2/embed", "/v2/rerank")):
        return Vendor.COHERE
    if suffix == "/embed":
        if "texts" in body or "images" in body:
            return Vendor.COHERE
        return Vendor.TEI if "inputs" in body else None
    model = body.get("model")
    named = model if type(model) is str else ""
    by_name = _by_model_name(suffix, named)
    if by_name is not None:
        return by_name
    if suffix == "/embeddings":
        if body.keys() & _VOYAGE_EMBED_KEYS:
            return Vendor.VOYAGE
        jina = body.keys() & _JINA_EMBED_KEYS
        return Vendor.JINA if jina else Vendor.OPENAI
    if suffix == "/rerank":
        if "texts" in body and "documents" not in body:
            return Vendor.TEI
        if "top_k" in body:
            return Vendor.VOYAGE
        if body.keys() & _COHERE_RERANK_KEYS or _COHERE_RERANK_MODEL.search(named):
            return Vendor.COHERE
        if "top_n" in body:
            return Vendor.JINA
        return Vendor.VOYAGE
    return None
