"""The ``vertexai`` SDK's ``TextEmbeddingModel``: ``get_embeddings`` / ``get_embeddings_async``,
recorded as ``gcp.vertex_ai``.

The SDK calls Vertex AI over gRPC (or its REST twin), not through an httpx client of its own:
each call is one ``predict`` RPC of the model's ``Endpoint`` (no retries below it), so the
model's endpoint has its ``predict`` / ``predict_async`` wrapped, per instance, to report that
RPC as the call's attempt. What it returns is the ``Prediction`` the SDK's own parsing then
turns into ``TextEmbedding`` objects: its ``predictions`` and ``metadata`` are read by the
``:predict`` endpoint's declaration (``VERTEX_EMBEDDINGS``: the vectors, a
``statistics.token_count`` on each, summed only when every one is a sound count, and the
``billableCharacterCount``). The RPC carries them as ``google.protobuf.Value``, which has no
integer type, so the SDK may hand a count over as a double (``4.0``): a whole one is read as
the integer the JSON wire sends, any other value (``4.5``, a text, a bool) stays malformed. A
failed RPC is categorised by the HTTP code its ``google.api_core`` exception maps the gRPC
status to (``ResourceExhausted`` is 429, a rate limit); no text the caller sent reaches the
event.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

from google.api_core import exceptions as google_errors
from google.cloud.aiplatform import initializer
from vertexai.language_models import TextEmbeddingInput
from vertexai.language_models._language_models import _TextEmbeddingModel

from spanledger.capture.installation import Installation
from spanledger.capture.sdk_calls import MethodSpec, SdkCall, current_call
from spanledger.errors import ProviderError, category_for_status
from spanledger.recording.call import logged
from spanledger.recording.facts import EmbedFacts, embedding_facts, passed, positive_int
from spanledger.wire.endpoints import VERTEX_EMBEDDINGS
from spanledger.wire.read import struct_number

__all__ = ["install"]

_EXTRAS = ("auto_truncate",)
Server = tuple[str | None, int | None]


def install(model: Any, installation: Installation) -> None:
    """What ``spanledger.instrument`` does to a vertexai ``TextEmbeddingModel``.

    Anything else is refused with a ``TypeError``.
    """
    if not isinstance(model, _TextEmbeddingModel):
        raise TypeError(
            "spanledger.instrument supports vertexai.language_models.TextEmbeddingModel, "
            f"not {type(model).__qualname__}"
        )
    name = str(model._model_id).rsplit("/", 1)[-1]
    spec = MethodSpec(
        facts=partial(_embed_facts, name, _server(model)),
        endpoint=VERTEX_EMBEDDINGS,
        shape=_width,
        route=VERTEX_EMBEDDINGS.suffix,
    )
    specs = (spec,)
    endpoint = model._endpoint
    installation.is_async = False
    installation.wrap(model, "get_embeddings", spec)
    _report_rpc(endpoint, "predict", installation, specs)
    installation.is_async = True
    installation.wrap(model, "get_embeddings_async", spec)
    _report_rpc(endpoint, "predict_async", installation, specs)


def _server(model: Any) -> Server:
    """The API host the model's predictions go to (``us-central1-aiplatform.googleapis.com``,
    or the ``api_endpoint`` given to ``vertexai.init``)."""
    try:
        options = initializer.global_config.get_client_options(
            location_override=model._endpoint.location, prediction_client=True
        )
        host = str(options.api_endpoint)
    except Exception as exc:
        logged(exc)
        return None, None
    address, _, port = host.removeprefix("https://").removeprefix("http://").partition(":")
    return address or None, int(port) if port.isdigit() else 443


def _embed_facts(
    model: str, server: Server, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> EmbedFacts | None:
    given = args[0] if args else kwargs.get("texts")
    if isinstance(given, str) or not isinstance(given, list | tuple):
        return None  # the SDK refuses it before any RPC
    texts: list[Any] = []
    input_type = None
    for item in given:
        if isinstance(item, TextEmbeddingInput):
            texts.append(item.text)
            input_type = input_type or item.task_type
        else:
            texts.append(item)
    return embedding_facts(
        provider=VERTEX_EMBEDDINGS.provider,
        model=model,
        inputs=texts,
        input_type=input_type,
        dimensions=positive_int(kwargs.get("output_dimensionality")),
        extras=passed(kwargs, _EXTRAS),
        server_address=server[0],
        server_port=server[1],
        billing=VERTEX_EMBEDDINGS.billing,
    )


def _report_rpc(
    endpoint: Any, name: str, installation: Installation, specs: tuple[MethodSpec, ...]
) -> None:
    """Have ``endpoint.name`` (``predict`` or ``predict_async``) report its RPC to the call
    being recorded, when that call is one of ``specs``'; any other call passes through."""
    held = vars(endpoint).get(name)
    kind = type(endpoint)
    target = weakref.ref(endpoint)  # the endpoint holds this: no reference cycle

    def original() -> Callable[..., Any]:
        found: Callable[..., Any] = held or getattr(kind, name).__get__(target(), kind)
        return found

    def ours() -> SdkCall | None:
        call = current_call()
        return call if call is not None and call.spec in specs else None

    if installation.is_async:

        async def predict_async(*args: Any, **kwargs: Any) -> Any:
            call = ours()
            if call is None:
                return await original()(*args, **kwargs)
            call.attempt_sent(None)
            try:
                prediction = await original()(*args, **kwargs)
            except BaseException as exc:
                _rpc_failed(call, exc)
                raise
            _rpc_answered(call, prediction)
            return prediction

        installation.replace(endpoint, name, predict_async)
        return

    def predict(*args: Any, **kwargs: Any) -> Any:
        call = ours()
        if call is None:
            return original()(*args, **kwargs)
        call.attempt_sent(None)
        try:
            prediction = original()(*args, **kwargs)
        except BaseException as exc:
            _rpc_failed(call, exc)
            raise
        _rpc_answered(call, prediction)
        return prediction

    installation.replace(endpoint, name, predict)


def _rpc_failed(call: SdkCall, exc: BaseException) -> None:
    """The RPC raised: a ``google.api_core`` error ends the attempt by its status; anything
    else is left to the call's end, which describes it as every path does."""
    try:
        if isinstance(exc, google_errors.GoogleAPICallError):
            call.attempt_failed(rpc_error(exc))
    except Exception as failure:
        logged(failure)


def rpc_error(exc: google_errors.GoogleAPICallError) -> ProviderError:
    """The failure a ``google.api_core`` error stands for: the HTTP code its gRPC status maps
    to (``ResourceExhausted`` 429, ``InvalidArgument`` 400, ``PermissionDenied`` 403,
    ``Unauthenticated`` 401, ``NotFound`` 404, ``ServiceUnavailable`` 503,
    ``DeadlineExceeded`` 504), named by its class; never its message."""
    code = exc.code  # an ``http.HTTPStatus``
    status = int(code) if isinstance(code, int) and not isinstance(code, bool) else None
    name = type(exc).__name__
    if status is None or not 400 <= status <= 599:
        return ProviderError(
            category_for_status(500), detail=f"call ended by {name}", error_type=name
        )
    return ProviderError(
        category_for_status(status),
        status_code=status,
        detail=f"the RPC failed: {name}",
        error_type=name,
    )


def _rpc_answered(call: SdkCall, prediction: Any) -> None:
    """The RPC answered: its predictions and metadata, as the JSON wire carries them, are the
    answer."""
    try:
        call.attempt_answered(None)
        predictions = getattr(prediction, "predictions", None)
        answer: dict[str, object] = {"predictions": _as_sent(predictions)}
        metadata = getattr(prediction, "metadata", None)
        if metadata is not None:
            answer["metadata"] = metadata
        call.answer_decoded(_whole_at(answer, VERTEX_EMBEDDINGS.characters_at or ()))
    except Exception as exc:
        logged(exc)


def _as_sent(predictions: object) -> object:
    """``predictions`` with each token figure as the JSON wire sends it: a whole double
    (how a ``google.protobuf.Value`` carries every number) as its integer. Only the
    dictionaries on the figure's path are copied; a figure of any other kind is left as is."""
    if type(predictions) is not list:
        return predictions
    path = VERTEX_EMBEDDINGS.tokens_each_at or ()
    return [_whole_at(item, path) for item in predictions]


def _whole_at(node: object, path: tuple[str, ...]) -> object:
    if not path:
        return struct_number(node)
    if type(node) is not dict or path[0] not in node:
        return node
    return {**node, path[0]: _whole_at(node[path[0]], path[1:])}


def _width(result: Any) -> int | None:
    return len(result[0].values) or None
