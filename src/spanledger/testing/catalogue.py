"""The routes a fresh ``StandIn`` answers: every vendor module's ``ROUTES``, one line each.

A new vendor surface is a module holding its route functions and their ``ROUTES`` table, and
its line here. The order is the mount order: where two routes would answer one request, the
one mounted later does.
"""

from __future__ import annotations

from collections.abc import Callable

from spanledger.testing import (
    anthropic,
    azure,
    bedrock,
    chat,
    chat_cohere,
    cohere,
    google,
    jina,
    mistral,
    ollama,
    openai,
    tei,
    voyage,
)
from spanledger.testing.routes import Route

__all__ = ["BUILT_IN_ROUTES"]

BUILT_IN_ROUTES: tuple[Callable[[], Route], ...] = (
    *openai.ROUTES,
    *cohere.ROUTES,
    *jina.ROUTES,
    *tei.ROUTES,
    *voyage.ROUTES,
    *bedrock.ROUTES,
    *google.ROUTES,
    *azure.ROUTES,
    *mistral.ROUTES,
    *ollama.ROUTES,
    *chat.ROUTES,
    *anthropic.ROUTES,
    *chat_cohere.ROUTES,
)
"""Every built-in route function; ``StandIn.reset`` mounts what each builds."""
