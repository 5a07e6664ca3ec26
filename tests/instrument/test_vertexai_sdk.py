"""The ``vertexai`` SDK's ``TextEmbeddingModel``, instrumented per model and by the switch,
against a loopback gRPC server answering Vertex AI's ``PredictionService.Predict`` with the
recorded bodies: the SDK's own gRPC client, its conversion of the ``PredictResponse`` and its
parsing into ``TextEmbedding`` objects all run; only the channel is pointed at the loopback.

One event per ``predict`` RPC, provider ``gcp.vertex_ai``, usage the sum of the predictions'
``statistics.token_count`` (which the SDK hands over as doubles: ``4.0``) and the response's
``metadata.billableCharacterCount``, each not reported (and named malformed) when it is not a
whole count; gRPC failures categorised by status."""

from __future__ import annotations

import copy
import json
import logging
from collections import deque
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
import vertexai
from google.api_core import exceptions as google_errors
from google.auth.credentials import AnonymousCredentials
from google.cloud.aiplatform import initializer
from google.cloud.aiplatform_v1.services.prediction_service import (
    PredictionServiceAsyncClient,
    PredictionServiceClient,
)
from google.cloud.aiplatform_v1.services.prediction_service.transports.grpc import (
    PredictionServiceGrpcTransport,
)
from google.cloud.aiplatform_v1.services.prediction_service.transports.grpc_asyncio import (
    PredictionServiceGrpcAsyncIOTransport,
)
from google.cloud.aiplatform_v1.types import prediction_service
from vertexai.language_models import TextEmbeddingInput, TextEmbeddingModel

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, EmbeddingUsage, ErrorCategory
from spanledger.instrumentation import instrumented_sdks
from tests.instrument.conftest import Tape

RECORDED = Path(__file__).resolve().parents[1] / "wire" / "recorded" / "google"
SENTINEL = "SENTINEL-vertex-5a1e"
PROJECT, LOCATION = "rag-project", "us-central1"
SERVICE = "google.cloud.aiplatform.v1.PredictionService"


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / name).read_text())["response"]["body"]
    return body


THREE = recorded("vertex-predict-text-embedding-004-3-texts.json")  # token counts 1, 1, 2
GEMINI = recorded("vertex-predict-gemini-embedding-001.json")  # one prediction, 4 tokens
TEXTS: list[str | TextEmbeddingInput] = [
    f"Ruby {SENTINEL}",
    f"Python {SENTINEL}",
    f"JavaScript {SENTINEL}",
]


class Predictions:
    """A loopback ``PredictionService``: each ``Predict`` takes the next scripted reply (a
    body, or a gRPC status to abort with); the requests it got are kept."""

    def __init__(self) -> None:
        self.replies: deque[dict[str, Any] | grpc.StatusCode] = deque()
        self.requests: list[dict[str, Any]] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.unary_unary_rpc_method_handler(
            self._predict,
            request_deserializer=prediction_service.PredictRequest.deserialize,
            response_serializer=prediction_service.PredictResponse.serialize,
        )
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"Predict": handler}),)
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def _predict(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.requests.append(json.loads(prediction_service.PredictRequest.to_json(request)))
        reply = self.replies.popleft() if self.replies else THREE
        if isinstance(reply, grpc.StatusCode):
            context.abort(reply, "scripted failure")
        return prediction_service.PredictResponse.from_json(json.dumps(reply))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def predictions() -> Iterator[Predictions]:
    vertexai.init(project=PROJECT, location=LOCATION, credentials=AnonymousCredentials())  # type: ignore[no-untyped-call]
    served = Predictions()
    served.server.start()
    yield served
    served.server.stop(grace=None)


def model_on(
    served: Predictions, name: str = "text-embedding-004", location: str = LOCATION
) -> TextEmbeddingModel:
    """A ``TextEmbeddingModel`` as ``from_pretrained`` builds it, its prediction clients on
    an insecure channel to the loopback server."""
    model = TextEmbeddingModel(
        model_id=name,
        endpoint_name=f"projects/{PROJECT}/locations/{location}/publishers/google/models/{name}",
    )
    channel = grpc.insecure_channel(served.address)
    transport = PredictionServiceGrpcTransport(channel=channel)
    client: Any = PredictionServiceClient(transport=transport)
    model._endpoint._prediction_client_value = client
    return model


def async_clients(model: TextEmbeddingModel, served: Predictions) -> None:
    """The async client needs the running loop for its channel."""
    channel = grpc.aio.insecure_channel(served.address)
    transport = PredictionServiceGrpcAsyncIOTransport(channel=channel)
    client: Any = PredictionServiceAsyncClient(transport=transport)
    model._endpoint._prediction_async_client_value = client


def with_token_counts(body: dict[str, Any], *counts: object) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    for prediction, value in zip(changed["predictions"], counts, strict=True):
        prediction["embeddings"]["statistics"]["token_count"] = value
    return changed


def assert_private(tape: Tape) -> None:
    for _, record in tape.log:
        assert SENTINEL not in record.model_dump_json()
        assert SENTINEL not in repr(record)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_one_event_with_the_summed_token_counts(
    predictions: Predictions, tape: Tape, is_async: bool
) -> None:
    model = spanledger.instrument(model_on(predictions))
    if is_async:
        async_clients(model, predictions)
        result = await model.get_embeddings_async(TEXTS, output_dimensionality=8)
    else:
        result = model.get_embeddings(TEXTS, output_dimensionality=8)

    counts = [e.statistics.token_count for e in result if e.statistics is not None]
    assert [type(count) for count in counts] == [float] * 3  # what gRPC hands over
    [request] = predictions.requests
    assert [i["content"] for i in request["instances"]] == TEXTS
    assert [kind for kind, _ in tape.log] == ["start", "event"]
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("gcp.vertex_ai", "text-embedding-004")
    assert (event.input_count, event.dimensions) == (3, 8)
    assert event.usage == EmbeddingUsage(input_tokens=1 + 1 + 2, billable_characters=20)
    assert event.request_params == {"dimensions": 8}
    assert event.server_address == f"{LOCATION}-aiplatform.googleapis.com"
    assert_private(tape)


def test_task_type_and_one_input(predictions: Predictions, tape: Tape) -> None:
    predictions.replies.append(GEMINI)
    model = spanledger.instrument(model_on(predictions, "gemini-embedding-001"))
    text = TextEmbeddingInput(f"Hello, world! {SENTINEL}", task_type="RETRIEVAL_QUERY")
    model.get_embeddings([text])

    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.model, event.input_type, event.input_count) == (
        "gemini-embedding-001",
        "RETRIEVAL_QUERY",
        1,
    )
    assert event.usage == EmbeddingUsage(input_tokens=4, billable_characters=12)
    assert_private(tape)


@pytest.mark.parametrize(
    ("counts", "malformed"),
    [
        ((1, 1.5, 2), "input_tokens"),
        ((1, "1", 2), "input_tokens"),
        ((1, -1, 2), "input_tokens"),
        ((1, True, 2), "input_tokens"),
    ],
    ids=["fraction", "text", "negative", "bool"],
)
def test_a_count_that_is_not_a_whole_number_is_not_reported(
    predictions: Predictions, tape: Tape, counts: tuple[object, ...], malformed: str
) -> None:
    predictions.replies.append(with_token_counts(THREE, *counts))
    model = spanledger.instrument(model_on(predictions))
    result = model.get_embeddings(TEXTS)

    assert len(result) == 3  # the caller's result is the SDK's, whatever the figure
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage == EmbeddingUsage(billable_characters=20)  # judged on its own
    assert event.malformed_usage == (malformed,)


def with_characters(body: dict[str, Any], value: object) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    changed["metadata"] = {"billableCharacterCount": value}
    return changed


@pytest.mark.parametrize(
    ("value", "usage", "malformed"),
    [
        (20, EmbeddingUsage(input_tokens=4, billable_characters=20), ()),
        (0, EmbeddingUsage(input_tokens=4, billable_characters=0), ()),
        (20.5, EmbeddingUsage(input_tokens=4), ("billable_characters",)),
        ("20", EmbeddingUsage(input_tokens=4), ("billable_characters",)),
        (-20, EmbeddingUsage(input_tokens=4), ("billable_characters",)),
        (None, EmbeddingUsage(input_tokens=4), ()),
    ],
    ids=["whole", "zero", "fraction", "text", "negative", "null"],
)
def test_the_billable_character_count_is_read_by_the_figure_rule(
    predictions: Predictions,
    tape: Tape,
    value: object,
    usage: EmbeddingUsage,
    malformed: tuple[str, ...],
) -> None:
    """gRPC hands the count over as a double (``20.0``): a whole one is the wire's 20."""
    predictions.replies.append(with_characters(THREE, value))
    spanledger.instrument(model_on(predictions)).get_embeddings(TEXTS)
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.usage, event.malformed_usage) == (usage, malformed)


def test_a_model_on_the_global_endpoint_is_recorded_with_its_host(
    predictions: Predictions, tape: Tape
) -> None:
    config = vars(initializer.global_config)
    before = dict(config)
    try:
        vertexai.init(location="global")  # the SDK's own state: put back below
        model = spanledger.instrument(model_on(predictions, "text-embedding-005", "global"))
        model.get_embeddings(TEXTS)
    finally:
        config.clear()
        config.update(before)
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.model, event.server_address) == (
        "text-embedding-005",
        "aiplatform.googleapis.com",
    )
    assert event.usage == EmbeddingUsage(input_tokens=4, billable_characters=20)


def test_a_prediction_without_statistics_reports_no_usage(
    predictions: Predictions, tape: Tape
) -> None:
    body = copy.deepcopy(THREE)
    del body["predictions"][1]["embeddings"]["statistics"]["token_count"]
    predictions.replies.append(body)
    model = spanledger.instrument(model_on(predictions))
    with pytest.raises(KeyError):  # the SDK's own parsing needs every figure
        model.get_embeddings(TEXTS)

    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category == ErrorCategory.INVALID_RESPONSE
    assert event.error_type == "KeyError"


@pytest.mark.parametrize(
    ("status", "http", "category", "error"),
    [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 429, ErrorCategory.RATE_LIMIT, "ResourceExhausted"),
        (grpc.StatusCode.INVALID_ARGUMENT, 400, ErrorCategory.INVALID_REQUEST, "InvalidArgument"),
        (grpc.StatusCode.PERMISSION_DENIED, 403, ErrorCategory.AUTHENTICATION, "PermissionDenied"),
        (grpc.StatusCode.UNAUTHENTICATED, 401, ErrorCategory.AUTHENTICATION, "Unauthenticated"),
        (grpc.StatusCode.NOT_FOUND, 404, ErrorCategory.INVALID_MODEL, "NotFound"),
        (grpc.StatusCode.UNAVAILABLE, 503, ErrorCategory.UNAVAILABLE, "ServiceUnavailable"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504, ErrorCategory.UNAVAILABLE, "DeadlineExceeded"),
    ],
    ids=lambda value: getattr(value, "name", None) or str(value),
)
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_failed_rpc_is_categorised_by_its_status(
    predictions: Predictions,
    tape: Tape,
    caplog: pytest.LogCaptureFixture,
    is_async: bool,
    status: grpc.StatusCode,
    http: int,
    category: ErrorCategory,
    error: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="spanledger")
    predictions.replies.append(status)
    model = spanledger.instrument(model_on(predictions))
    if is_async:
        async_clients(model, predictions)
        with pytest.raises(google_errors.GoogleAPICallError) as raised:
            await model.get_embeddings_async(TEXTS)
    else:
        with pytest.raises(google_errors.GoogleAPICallError) as raised:
            model.get_embeddings(TEXTS)

    assert type(raised.value).__name__ == error  # the SDK's exception, unchanged
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.status_code, event.error_type) == (category, http, error)
    assert (event.provider, event.model, event.input_count) == (
        "gcp.vertex_ai",
        "text-embedding-004",
        3,
    )
    assert "scripted failure" not in event.model_dump_json()
    assert_private(tape)
    assert SENTINEL not in caplog.text


def test_uninstrument_takes_everything_back(predictions: Predictions, tape: Tape) -> None:
    model = model_on(predictions)
    before = (dict(vars(model)), dict(vars(model._endpoint)))
    spanledger.instrument(model)
    model.get_embeddings(TEXTS)
    spanledger.uninstrument(model)
    assert (dict(vars(model)), dict(vars(model._endpoint))) == before
    model.get_embeddings(TEXTS)

    assert len(predictions.requests) == 2
    assert len(tape.events) == 1


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_the_switch_records_models_made_before_and_after_it(
    predictions: Predictions, tape: Tape, is_async: bool
) -> None:
    earlier = model_on(predictions)
    spanledger.instrument(sdks=["vertexai"])
    try:
        assert "vertexai" in instrumented_sdks()
        later = model_on(predictions, "text-embedding-005")
        for model in (earlier, later):
            if is_async:
                async_clients(model, predictions)
                await model.get_embeddings_async(TEXTS)
            else:
                model.get_embeddings(TEXTS)
    finally:
        spanledger.uninstrument()
    earlier.get_embeddings(TEXTS)

    assert len(predictions.requests) == 3
    assert [(e.provider, e.model) for e in tape.events] == [
        ("gcp.vertex_ai", "text-embedding-004"),
        ("gcp.vertex_ai", "text-embedding-005"),
    ]
    assert all(
        e.usage == EmbeddingUsage(input_tokens=4, billable_characters=20)  # type: ignore[union-attr]
        for e in tape.events
    )


def test_the_switch_leaves_a_version_it_does_not_cover_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: "3.0.0" if name == "google-cloud-aiplatform" else real(name),
    )
    spanledger.instrument(sdks=["vertexai"])
    assert instrumented_sdks() == ()
