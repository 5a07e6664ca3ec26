"""``openai.OpenAI`` / ``AsyncOpenAI``: ``embeddings.create``, recorded as provider ``openai``.

Usage and ids are read from the raw JSON body: hooks on the client's own httpx client see each
HTTP attempt, and the body's ``usage.prompt_tokens`` is read from the JSON the SDK decodes (the
SDK builds its typed result without validating it, so ``"abc"`` would reach ``result.usage``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import openai

from spanledger.instrumentation._capture import MethodSpec
from spanledger.instrumentation._registry import Installation
from spanledger.recording.facts import EmbedFacts, input_texts, passed, server_of, text_or_none
from spanledger.wire.endpoints import OPENAI_EMBEDDINGS
from spanledger.wire.read import vector_type

__all__ = ["install"]

_PARAMS = ("dimensions",)
_EXTRAS = ("encoding_format", "user")


def install(client: Any, installation: Installation) -> None:
    if isinstance(client, openai.AsyncOpenAI):
        installation.is_async = True
    elif not isinstance(client, openai.OpenAI):
        raise TypeError(
            "spanledger.instrument supports openai.OpenAI and AsyncOpenAI, "
            f"not {type(client).__qualname__}"
        )
    server = server_of(client.base_url)
    spec = MethodSpec(
        facts=partial(_embed_facts, server),
        endpoint=OPENAI_EMBEDDINGS,
        shape=_width,
        route="/embeddings",
    )
    installation.wrap(client.embeddings, "create", spec)
    installation.hook(client._client)


def _embed_facts(
    server: tuple[str | None, int | None], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> EmbedFacts | None:
    model = text_or_none(kwargs.get("model"))
    if model is None:
        return None
    count, texts = input_texts(kwargs.get("input"))
    return EmbedFacts(
        provider=OPENAI_EMBEDDINGS.provider,
        model=model,
        input_count=count,
        inputs=texts,
        request_params=passed(kwargs, _PARAMS),
        extras=passed(kwargs, _EXTRAS),
        server_address=server[0],
        server_port=server[1],
        billing=OPENAI_EMBEDDINGS.billing,
        dtype=vector_type(kwargs.get("encoding_format")) if "encoding_format" in kwargs else None,
    )


def _width(result: Any) -> int | None:
    return len(result.data[0].embedding) or None
