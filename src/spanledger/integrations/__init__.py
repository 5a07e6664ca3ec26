"""One package per library spanledger records, each built on the shared machinery.

An integration is a package named after the library (``openai``, ``botocore``, ...): its
``__init__`` declares, in one ``Integration`` record, the library's import and distribution
names, the versions the tests cover, what the process-wide switch patches or hooks, and the
module that instruments one client; that module (``client``, ``model``, ``ranker``) holds the
capture itself and is imported only when it is needed, so reading the declarations never
imports a library. An integration imports only the shared machinery (``spanledger.capture``,
``spanledger.recording``, ``spanledger.wire`` and what lies below them), never another
integration. ``INTEGRATIONS`` is what ``spanledger.instrument`` knows, in the order the switch
turns them on.
"""

from __future__ import annotations

from spanledger.capture.declaration import Integration
from spanledger.integrations import (
    botocore,
    cohere,
    flashrank,
    google_genai,
    haystack,
    langchain,
    llama_index,
    mistralai,
    ollama,
    openai,
    sentence_transformers,
    vertexai,
    voyageai,
)

__all__ = ["INTEGRATIONS"]

INTEGRATIONS: tuple[Integration, ...] = (
    openai.INTEGRATION,
    cohere.INTEGRATION,
    voyageai.INTEGRATION,
    botocore.INTEGRATION,
    google_genai.INTEGRATION,
    mistralai.INTEGRATION,
    ollama.INTEGRATION,
    vertexai.INTEGRATION,
    sentence_transformers.INTEGRATION,
    flashrank.INTEGRATION,
    langchain.INTEGRATION,
    haystack.INTEGRATION,
    llama_index.INTEGRATION,
)
"""Every library integration, by the name ``instrument(sdks=[...])`` takes."""
