"""How each vendor says a call failed: its own error body and headers, with a message that
never quotes the request (a failing test's output must not carry the caller's text)."""

from __future__ import annotations

from typing import Any

from spanledger.testing.answers import _answer_id
from spanledger.wire.endpoints import Vendor

_BEDROCK_CODES = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_BEDROCK_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_GOOGLE_JSON = {"content-type": "application/json; charset=UTF-8"}
"""The content type the Gemini API and Vertex AI answer with, failing or not."""


def _bedrock_error_code(status: int) -> str:
    fallback = "ValidationException" if status < 500 else "InternalServerException"
    return _BEDROCK_CODES.get(status, fallback)


def _error_body(
    vendor: str, path: str, status: int, model: str = "", code: str | None = None
) -> tuple[Any, dict[str, str]]:
    """``vendor``'s error body and headers for a call of ``model`` on ``path`` answered
    ``status``; ``code`` names Bedrock's exception when the status alone does not."""
    message = f"stand-in error {status}"
    headers: dict[str, str] = {}
    body: Any
    if vendor == Vendor.OPENAI:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    elif vendor == Vendor.TEI:
        body = {"error": message, "error_type": "Validation"}
    elif vendor == Vendor.COHERE:
        body = {"id": "standin-error", "message": message}
    elif vendor == Vendor.BEDROCK:
        named = code or _bedrock_error_code(status)
        body = {"message": message}
        headers = {
            "x-amzn-ErrorType": f"{named}:{_BEDROCK_NAMESPACE}",
            "x-amzn-RequestId": _answer_id([path, status]),
        }
    elif vendor in (Vendor.GEMINI, Vendor.VERTEX):
        name = _GOOGLE_STATUSES.get(status, "UNKNOWN")
        body = {"error": {"code": status, "message": message, "status": name}}
        headers = dict(_GOOGLE_JSON)
    elif vendor == "anthropic":
        kind = _ANTHROPIC_ERRORS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        body = {"type": "error", "error": {"type": kind, "message": message}}
    elif vendor == Vendor.AZURE:
        azure_code = "DeploymentNotFound" if status == 404 else str(status)
        body = {"error": {"code": azure_code, "message": message}}
    elif vendor == Vendor.MISTRAL and status == 422:
        missing = {"type": "missing", "loc": ["body", "input"], "msg": "Field required"}
        body = {"detail": [{**missing, "input": None}]}
    elif vendor == Vendor.OLLAMA:
        if status == 404 and model:
            message = f'model "{model}" not found, try pulling it first'
        if path.startswith("/api/"):  # the native routes: the message alone
            body = {"error": message}
        else:  # the OpenAI-compatible route: OpenAI's error object
            body = {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
    else:  # Jina, Voyage, Mistral
        body = {"detail": message}
    return body, headers
