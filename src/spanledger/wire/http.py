"""HTTP-level rules every path shares: routes, request bodies, success bodies, servers."""

from __future__ import annotations

import functools
import json
from typing import Any

import httpx

from spanledger.errors import ErrorCategory, Fingerprint, ProviderError, error_for_status
from spanledger.wire.endpoints import Endpoint

__all__ = [
    "already_read",
    "decoded_body",
    "encode_body",
    "failure_for",
    "join_route",
    "parse_json",
    "parsed_url",
    "server_of",
    "undecodable_body",
]

_DEFAULT_PORTS = {"https": 443, "http": 80}


def join_route(base_url: str, route: str) -> str:
    """Append a versioned route to an origin, without doubling a version already given."""
    base = base_url.rstrip("/")
    version = route.split("/", 2)[1] if route.startswith("/v") else ""
    if version and base.endswith("/" + version):
        base = base[: -len(version) - 1]
    return base + route


def server_of(url: object) -> tuple[str | None, int | None]:
    """Host and port of a URL (text, an ``httpx.URL``, or any URL object with ``host``,
    ``port`` and ``scheme``, as an SDK's own httpx fork has); the scheme's default port when
    none is written. An unreadable URL, or one without a host, gives ``(None, None)``.

    A URL object is read from its attributes, never parsed again; a text is parsed once and
    its answer kept (an SDK's base URL is the same text on every call)."""
    if type(url) is str:
        return _server_of_text(url)
    try:
        host, port, scheme = url.host, url.port, url.scheme  # type: ignore[attr-defined]
    except Exception:
        return _server_of_text(str(url))
    if type(host) is not str or type(scheme) is not str or not (port is None or type(port) is int):
        return _server_of_text(str(url))
    return _server(host, port, scheme)


def _server(host: str, port: int | None, scheme: str) -> tuple[str | None, int | None]:
    if not host:
        return None, None
    return host, port or _DEFAULT_PORTS.get(scheme)


_servers: dict[str, tuple[str | None, int | None]] = {}
_SERVERS_KEPT = 256


def _server_of_text(text: str) -> tuple[str | None, int | None]:
    """``server_of`` a URL's text, parsed as an ``httpx.URL`` once per text (up to
    ``_SERVERS_KEPT`` texts are kept)."""
    found = _servers.get(text)
    if found is not None:
        return found
    try:
        parsed = httpx.URL(text)
        found = _server(parsed.host, parsed.port, parsed.scheme)
    except Exception:
        found = (None, None)
    if len(_servers) < _SERVERS_KEPT:
        _servers[text] = found
    return found


@functools.lru_cache(maxsize=256)
def parsed_url(text: str) -> httpx.URL:
    """``httpx.URL(text)``, parsed once per distinct text (an SDK posts to a few URLs, many
    times; a URL is never changed in place, so one is shared)."""
    return httpx.URL(text)


def encode_body(body: dict[str, Any]) -> bytes:
    """Compact JSON, keys in the order the mapping built them, text kept as UTF-8.

    A body that is not valid JSON text (a set or bytes in extras, NaN, a lone surrogate,
    nesting deeper than the interpreter can encode) is refused before sending as
    ``provider_invalid_request``.
    """
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
            "utf-8"
        )
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        pass
    raise ProviderError(
        ErrorCategory.INVALID_REQUEST,
        detail="the request cannot be encoded as JSON text",
        error_type="unencodable_request",
    )


def parse_json(body: bytes) -> Any:
    """Decode a success body, or fail as ``provider_invalid_response`` (never quoting it).
    JSON nested deeper than the interpreter's recursion limit is invalid too."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        pass
    raise ProviderError(
        ErrorCategory.INVALID_RESPONSE,
        detail="response body is not JSON",
        fingerprint=Fingerprint.of(body),
        error_type="invalid_json",
    )


def decoded_body(status: int, headers: httpx.Headers, raw: bytes) -> bytes | None:
    """``raw`` after the content encoding ``headers`` declare, as an httpx client reads it,
    or ``None`` when it does not decode (the client's own read of it fails)."""
    if "content-encoding" not in headers:
        return raw
    probe = httpx.Response(status, headers=headers, stream=httpx.ByteStream(raw))
    try:
        return probe.read()
    except Exception:
        return None


def already_read(response: httpx.Response) -> bytes | None:
    """The body of a response its maker read before handing it on, as a client reads it
    (decoded by its content encoding), or ``None`` while it is still to come off the wire.

    ``httpx.Response(content=...)``, which ``httpx.MockTransport`` handlers, respx and other
    test tools build, reads its body at once: its raw stream is spent, and its ``content`` is
    what ``decoded_body`` gives of the bytes the stream held. Only a body that decoded can
    have been read so; one that does not decode is still the wire's to fail on.
    """
    try:
        return response.content
    except httpx.ResponseNotRead:
        return None


def undecodable_body() -> ProviderError:
    """A 2xx answer whose body does not decode by its declared ``Content-Encoding``: the
    provider answered (and may have billed the work), and the answer is unusable. Every path
    records it so; ``answered_badly`` adds the status and the raw body's fingerprint."""
    return ProviderError(
        ErrorCategory.INVALID_RESPONSE,
        detail="the response body does not decode by its declared content encoding",
        error_type="undecodable_body",
    )


def failure_for(endpoint: Endpoint, status: int, headers: Any, body: bytes | None) -> ProviderError:
    """The categorised error for a failed response to ``endpoint``: by the vendor's error code
    where it sends one (``x-amzn-ErrorType: ThrottlingException:…``), else by status."""
    error = error_for_status(status, headers, body, endpoint.status_overrides)
    named = endpoint.error_code_header
    if named is None:
        return error
    try:
        sent = headers.get(named)
    except Exception:
        return error
    code = sent.split(":", 1)[0].strip() if type(sent) is str else None
    category = endpoint.error_codes.get(code) if code else None
    if category is None:
        return error
    return vendor_coded(error, category, code)


def vendor_coded(error: ProviderError, category: ErrorCategory, code: str | None) -> ProviderError:
    """``error`` recategorised by the vendor's own error code, which becomes its type."""
    return ProviderError(
        category,
        error.status_code,
        error.retry_after,
        error.fingerprint,
        detail=error.detail,
        error_type=code or error.error_type,
    )
