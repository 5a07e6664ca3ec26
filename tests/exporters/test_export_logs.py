"""SDK messages logged on spanledger's export threads go through structlog, once per kind and
without their arguments; the application's own SDK logging is left exactly as it was."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator

import pytest
import structlog

from spanledger.exporters._export_logs import EXPORT_THREAD_PREFIX, route_export_logs

SDK_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
RETRY = (
    "Transient error %s encountered while exporting %s batch, retrying in %.2fs. "
    + uuid.uuid4().hex  # a kind this process has not logged yet
)
SECRET = "SENTINEL-body-in-an-error"


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[Kept]:
    import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401  (its logger)

    route_export_logs()
    handler = Kept()
    logger = logging.getLogger(SDK_LOGGER)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def log_on(thread_name: str, times: int) -> None:
    def run() -> None:
        for _ in range(times):
            logging.getLogger(SDK_LOGGER).warning(RETRY, SECRET, "spans", 1.0)

    thread = threading.Thread(target=run, name=thread_name)
    thread.start()
    thread.join(5)


def test_records_from_export_threads_go_to_structlog_once_per_kind(kept: Kept) -> None:
    with structlog.testing.capture_logs() as logs:
        log_on(f"{EXPORT_THREAD_PREFIX}-test", 3)
    assert kept.records == []
    routed = [entry for entry in logs if entry["event"] == "export_sdk_message"]
    assert [(entry["source"], entry["template"]) for entry in routed] == [(SDK_LOGGER, RETRY)]
    assert SECRET not in repr(logs)


def test_records_from_the_applications_threads_are_untouched(kept: Kept) -> None:
    log_on("application-worker", 2)
    logging.getLogger(SDK_LOGGER).warning(RETRY, SECRET, "spans", 1.0)
    assert len(kept.records) == 3
    assert all(record.getMessage().startswith("Transient error") for record in kept.records)
