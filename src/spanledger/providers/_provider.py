"""The public provider classes' shared machinery: clients, lifecycle, and the call entry points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self, TypedDict, Unpack

import httpx

from spanledger import _forksafe
from spanledger.events import EmbeddingResponse, RerankResponse
from spanledger.providers._calls import EmbedCall, RerankCall
from spanledger.providers._driver import Timeout, drive_async, drive_sync, run_async, run_sync
from spanledger.providers._mapping import (
    EmbeddingMapping,
    RerankMapping,
    embedding_flow,
    rerank_flow,
)
from spanledger.recorder import Recorder, get_recorder
from spanledger.recording.call import Recording
from spanledger.recording.facts import embedding_facts, rerank_facts

__all__ = ["ClientOptions", "EmbeddingProvider", "RerankProvider"]

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)


class ClientOptions(TypedDict, total=False):
    """What every provider class takes besides its model: where and how it calls.

    ``base_url``: an origin (the vendor's own by default, where it has one); ``api_key``: else
    the vendor's variable; ``http_client`` / ``async_http_client``: injected httpx clients,
    never closed by spanledger; ``timeout``; ``recorder`` (default: the current one);
    ``chunk_size``: the most inputs (or documents) one request carries.
    """

    base_url: str | None
    api_key: str | None
    http_client: httpx.Client | None
    async_http_client: httpx.AsyncClient | None
    timeout: Timeout
    recorder: Recorder | None
    chunk_size: int | None


_OPTIONS = frozenset(ClientOptions.__annotations__)


class _Provider:
    """Owns (or borrows) the httpx clients and closes only the ones it created.

    A vendor class names its mapping (``mapping_class``); one with settings of its own passes
    them to the mapping by overriding ``_mapping_options``.
    """

    _mapping: EmbeddingMapping | RerankMapping
    mapping_class: ClassVar[type[EmbeddingMapping] | type[RerankMapping]]

    def __init__(self, model: str, **options: Unpack[ClientOptions]) -> None:
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unknown settings {unknown}; it takes "
                f"{sorted(_OPTIONS)} and its own ({', '.join(self._mapping_options()) or 'none'})"
            )
        self._mapping = self.mapping_class(
            model=model,
            base_url=options.get("base_url"),
            api_key=options.get("api_key"),
            chunk_size=options.get("chunk_size"),
            **self._mapping_options(),
        )
        http_client = options.get("http_client")
        async_http_client = options.get("async_http_client")
        self._client = http_client
        self._async_client = async_http_client
        self._owns_client = http_client is None
        self._owns_async_client = async_http_client is None
        self._timeout = options.get("timeout")
        self._recorder = options.get("recorder")
        self._lock = _forksafe.lock(self, "_lock")
        _forksafe.after_fork_in_child(self._drop_inherited_clients)
        self._closed = False
        self._header_cache: tuple[object, dict[str, str]] | None = None

    def _mapping_options(self) -> dict[str, Any]:
        """The vendor class's own settings, as its mapping takes them."""
        return {}

    @property
    def provider(self) -> str:
        """The wire surface name recorded on events (``openai``, ``cohere``, ...)."""
        return self._mapping.provider

    @property
    def model(self) -> str:
        return self._mapping.model

    @property
    def billing(self) -> str | None:
        """What the vendor bills this endpoint by (``tokens``, ``search_units``), if anything."""
        return self._mapping.billing

    @property
    def url(self) -> str:
        """The endpoint this instance posts to."""
        return self._mapping.url

    @property
    def missing_key(self) -> str | None:
        """The variable a call would be refused for naming, when this instance calls the
        vendor's own API with no key (``None``: a key is set, or the origin needs none)."""
        return self._mapping.key_needed

    def _call_timeout(self, timeout: Timeout) -> Timeout:
        """A per-call ``timeout`` overrides the instance's."""
        return timeout if timeout is not None else self._timeout

    def _current_recorder(self) -> Recorder:
        return self._recorder if self._recorder is not None else get_recorder()

    def _headers_for(self, client: httpx.Client | httpx.AsyncClient) -> dict[str, str]:
        """The request headers for ``client``: recomputed only when its defaults change."""
        key = (id(client), tuple(client.headers.raw))
        cached = self._header_cache
        if cached is None or cached[0] != key:
            cached = self._header_cache = (key, self._mapping.headers_with(client.headers))
        return cached[1]

    def _sync_client(self) -> httpx.Client:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = httpx.Client(timeout=DEFAULT_TIMEOUT)
                client = self._client
        return client

    def _async_http(self) -> httpx.AsyncClient:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        client = self._async_client
        if client is None:
            with self._lock:
                if self._async_client is None:
                    self._async_client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)
                client = self._async_client
        return client

    def _drop_inherited_clients(self) -> None:
        """In a forked child: forget the clients this instance made, unclosed. Their pooled
        connections are the parent's sockets (closing one could end the parent's TLS
        session); the child makes its own on first use. Injected clients are the caller's."""
        if self._owns_client:
            self._client = None
        if self._owns_async_client:
            self._async_client = None

    def close(self) -> None:
        """Close the sync client if this instance created it."""
        self._closed = True
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close every client this instance created."""
        self.close()
        if self._owns_async_client and self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, url={self.url!r})"


class EmbeddingProvider(_Provider):
    """An embedding endpoint: ``embed`` / ``aembed`` return vectors in input order."""

    _mapping: EmbeddingMapping

    def _recording(
        self, inputs: object, input_type: object, dimensions: object, extras: object
    ) -> Recording | None:
        """The call's recording (``None`` when nobody listens), from its arguments as given:
        a call refused before sending is recorded too."""
        recorder = self._current_recorder()
        if not recorder.active:
            return None
        mapping = self._mapping
        facts = embedding_facts(
            provider=mapping.provider,
            model=mapping.model,
            inputs=inputs,
            input_type=input_type,
            dimensions=dimensions,
            extras=extras,
            server_address=mapping.server_address,
            server_port=mapping.server_port,
            billing=mapping.billing,
        )
        return Recording(recorder, facts)

    def embed(
        self,
        inputs: Sequence[str],
        *,
        input_type: str | None = None,
        dimensions: int | None = None,
        extras: Mapping[str, Any] | None = None,
        timeout: Timeout = None,
    ) -> EmbeddingResponse:
        """Embed ``inputs``; raises ``ProviderError`` on any failure, never retries.

        ``timeout`` (seconds or an ``httpx.Timeout``) overrides the instance's for this call.
        """
        client = self._sync_client()
        recording = self._recording(inputs, input_type, dimensions, extras)
        return run_sync(
            recording,
            lambda: drive_sync(
                embedding_flow(
                    self._mapping,
                    EmbedCall.checked(inputs, input_type, dimensions, extras),
                    self._headers_for(client),
                ),
                client,
                self._call_timeout(timeout),
            ),
        )

    async def aembed(
        self,
        inputs: Sequence[str],
        *,
        input_type: str | None = None,
        dimensions: int | None = None,
        extras: Mapping[str, Any] | None = None,
        timeout: Timeout = None,
    ) -> EmbeddingResponse:
        """The async twin of ``embed``."""
        client = self._async_http()
        recording = self._recording(inputs, input_type, dimensions, extras)
        return await run_async(
            recording,
            lambda: drive_async(
                embedding_flow(
                    self._mapping,
                    EmbedCall.checked(inputs, input_type, dimensions, extras),
                    self._headers_for(client),
                ),
                client,
                self._call_timeout(timeout),
            ),
        )


class RerankProvider(_Provider):
    """A rerank endpoint: results sorted by relevance, ``index`` into the original documents."""

    _mapping: RerankMapping

    def _recording(
        self,
        query: object,
        documents: object,
        top_k: object,
        return_documents: object,
        extras: object,
    ) -> Recording | None:
        """The call's recording (``None`` when nobody listens), from its arguments as given."""
        recorder = self._current_recorder()
        if not recorder.active:
            return None
        mapping = self._mapping
        facts = rerank_facts(
            provider=mapping.provider,
            model=mapping.model,
            query=query,
            documents=documents,
            top_k=top_k,
            return_documents=return_documents,
            extras=extras,
            server_address=mapping.server_address,
            server_port=mapping.server_port,
            billing=mapping.billing,
        )
        return Recording(recorder, facts)

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        *,
        top_k: int | None = None,
        return_documents: bool | None = None,
        extras: Mapping[str, Any] | None = None,
        timeout: Timeout = None,
    ) -> RerankResponse:
        """Rerank ``documents`` for ``query``. ``return_documents`` unset means ``False``."""
        client = self._sync_client()
        recording = self._recording(query, documents, top_k, return_documents, extras)
        return run_sync(
            recording,
            lambda: drive_sync(
                rerank_flow(
                    self._mapping,
                    RerankCall.checked(query, documents, top_k, return_documents, extras),
                    self._headers_for(client),
                ),
                client,
                self._call_timeout(timeout),
            ),
        )

    async def arerank(
        self,
        query: str,
        documents: Sequence[str],
        *,
        top_k: int | None = None,
        return_documents: bool | None = None,
        extras: Mapping[str, Any] | None = None,
        timeout: Timeout = None,
    ) -> RerankResponse:
        """The async twin of ``rerank``."""
        client = self._async_http()
        recording = self._recording(query, documents, top_k, return_documents, extras)
        return await run_async(
            recording,
            lambda: drive_async(
                rerank_flow(
                    self._mapping,
                    RerankCall.checked(query, documents, top_k, return_documents, extras),
                    self._headers_for(client),
                ),
                client,
                self._call_timeout(timeout),
            ),
        )
