"""Bad settings for ``spanledger.configure()`` are refused with one sentence naming the variable
or argument, never echoing a secret, and before anything is built.

The export pipelines are replaced by recording fakes (except where a real Prometheus endpoint is
the point), so a configure() that got past validation would be seen building something.
"""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import spanledger
from spanledger import ConfigurationError, Recorder
from spanledger.exporters.pipelines import OtlpSettings
from spanledger.ledger import PriceTable, PriceTableError

configure_module = importlib.import_module("spanledger.configuration")

SECRET = "s3cr3t-VALUE"
PUBLIC = "pk-lf-public-KEY"
GOOD_PRICES = '[[prices]]\nprovider = "cohere"\nmodel = "m"\nper_request = "0.001"\n'


@dataclass
class FakeSink:
    """Stands in for an export pipeline: remembers how it was built and whether it was shut."""

    settings: dict[str, Any]
    shut_down: bool = False

    def emit(self, event: object) -> None:
        pass

    def shutdown(self) -> None:
        self.shut_down = True


@dataclass
class Builds:
    otel: list[FakeSink] = field(default_factory=list)
    langfuse: list[FakeSink] = field(default_factory=list)
    langfuse_error: Exception | None = None

    @property
    def anything(self) -> bool:
        return bool(self.otel or self.langfuse)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Builds:
    seen = Builds()

    def otel_pipeline(**settings: Any) -> FakeSink:
        sink = FakeSink(settings)
        seen.otel.append(sink)
        return sink

    def langfuse_pipeline(**settings: Any) -> FakeSink:
        if seen.langfuse_error is not None:
            raise seen.langfuse_error
        sink = FakeSink(settings)
        seen.langfuse.append(sink)
        return sink

    monkeypatch.setattr(configure_module, "otel_pipeline", otel_pipeline)
    monkeypatch.setattr(configure_module, "langfuse_pipeline", langfuse_pipeline)
    return seen


@pytest.fixture
def good_env(tmp_path: Path) -> dict[str, str]:
    """Every variable configure() reads, each set to something it accepts."""
    prices = tmp_path / "prices.toml"
    prices.write_text(GOOD_PRICES, encoding="utf-8")
    return {
        "SPANLEDGER_EVENTS": str(tmp_path / "logs" / "events.jsonl"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.internal:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example.com/v1/traces",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://metrics.example.com/v1/metrics",
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Basic%20{SECRET},x-team=search",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_SERVICE_NAME": "search-api",
        "SPANLEDGER_PROMETHEUS_PORT": "9464",
        "SPANLEDGER_PROMETHEUS_ADDR": "0.0.0.0",
        "LANGFUSE_PUBLIC_KEY": PUBLIC,
        "LANGFUSE_SECRET_KEY": SECRET,
        "LANGFUSE_HOST": "https://langfuse.example.com",
        "SPANLEDGER_PRICES": str(prices),
        "SPANLEDGER_CONSOLE": "off",
        "SPANLEDGER_SHUTDOWN_TIMEOUT": "2.5",
    }


def refused(**arguments: Any) -> str:
    """configure()'s refusal message; the refusal is a one-line ConfigurationError."""
    with pytest.raises(ConfigurationError) as caught:
        spanledger.configure(install=False, **arguments)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert "\n" not in message
    assert caught.value.__cause__ is None
    return message


def test_a_good_environment_builds_every_pipeline_from_checked_values(
    builds: Builds, good_env: dict[str, str]
) -> None:
    recorder = spanledger.configure(environ=good_env, install=False)

    (otel,) = builds.otel
    (langfuse,) = builds.langfuse
    assert otel.settings["otlp"] == OtlpSettings(
        traces_endpoint="https://traces.example.com/v1/traces",
        metrics_endpoint="https://metrics.example.com/v1/metrics",
        traces_headers={"authorization": f"Basic {SECRET}", "x-team": "search"},
        metrics_headers={"authorization": f"Basic {SECRET}", "x-team": "search"},
    )
    assert otel.settings["prometheus"] == ("0.0.0.0", 9464)
    assert otel.settings["service_name"] == "search-api"
    assert langfuse.settings["host"] == "https://langfuse.example.com"
    assert (langfuse.settings["public_key"], langfuse.settings["secret_key"]) == (PUBLIC, SECRET)
    assert otel.settings["shutdown_timeout"] == langfuse.settings["shutdown_timeout"] == 2.5
    assert recorder.shutdown_timeout == 2.5
    assert recorder.ledger is not None
    recorder.shutdown()


# --------------------------------------------------------------------------- every variable

BAD_VARIABLES: list[tuple[str, dict[str, str], str, str | None]] = [
    # (id, environment changes, variable the message names, text it must not contain)
    ("header-no-equals", {"OTEL_EXPORTER_OTLP_HEADERS": f"x-team=a,Bearer {SECRET}"},
     "OTEL_EXPORTER_OTLP_HEADERS", SECRET),
    ("header-no-name", {"OTEL_EXPORTER_OTLP_HEADERS": f"={SECRET}"},
     "OTEL_EXPORTER_OTLP_HEADERS", SECRET),
    ("header-bad-name", {"OTEL_EXPORTER_OTLP_HEADERS": f"x team={SECRET}"},
     "OTEL_EXPORTER_OTLP_HEADERS", SECRET),
    ("header-newline", {"OTEL_EXPORTER_OTLP_HEADERS": f"authorization={SECRET}%0Ax-evil=1"},
     "OTEL_EXPORTER_OTLP_HEADERS", SECRET),
    ("traces-header", {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"{SECRET}"},
     "OTEL_EXPORTER_OTLP_TRACES_HEADERS", SECRET),
    ("metrics-header", {"OTEL_EXPORTER_OTLP_METRICS_HEADERS": f"a=b,{SECRET}"},
     "OTEL_EXPORTER_OTLP_METRICS_HEADERS", SECRET),
    ("port-word", {"SPANLEDGER_PROMETHEUS_PORT": "abc"}, "SPANLEDGER_PROMETHEUS_PORT", None),
    ("port-too-big", {"SPANLEDGER_PROMETHEUS_PORT": "99999"}, "SPANLEDGER_PROMETHEUS_PORT", None),
    ("port-huge", {"SPANLEDGER_PROMETHEUS_PORT": "9" * 5000}, "SPANLEDGER_PROMETHEUS_PORT", None),
    ("port-negative", {"SPANLEDGER_PROMETHEUS_PORT": "-1"}, "SPANLEDGER_PROMETHEUS_PORT", None),
    ("port-zero", {"SPANLEDGER_PROMETHEUS_PORT": "0"}, "SPANLEDGER_PROMETHEUS_PORT", None),
    ("port-float", {"SPANLEDGER_PROMETHEUS_PORT": "9464.0"}, "SPANLEDGER_PROMETHEUS_PORT", None),
    ("port-non-ascii", {"SPANLEDGER_PROMETHEUS_PORT": "\u0669\u0664\u0666\u0664"},
     "SPANLEDGER_PROMETHEUS_PORT", None),
    ("addr-url", {"SPANLEDGER_PROMETHEUS_ADDR": "http://0.0.0.0"},
     "SPANLEDGER_PROMETHEUS_ADDR", None),
    ("addr-port", {"SPANLEDGER_PROMETHEUS_ADDR": "localhost:9464"},
     "SPANLEDGER_PROMETHEUS_ADDR", None),
    ("endpoint-no-scheme", {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
     "OTEL_EXPORTER_OTLP_ENDPOINT", None),
    ("endpoint-grpc", {"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://collector:4317"},
     "OTEL_EXPORTER_OTLP_ENDPOINT", None),
    ("endpoint-no-host", {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://user:{SECRET}@:4318"},
     "OTEL_EXPORTER_OTLP_ENDPOINT", SECRET),
    ("endpoint-bad-port", {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{SECRET}.example:99999"},
     "OTEL_EXPORTER_OTLP_ENDPOINT", SECRET),
    ("endpoint-space", {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://exa mple.com/{SECRET}"},
     "OTEL_EXPORTER_OTLP_ENDPOINT", SECRET),
    ("traces-endpoint", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "/v1/traces"},
     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None),
    ("metrics-endpoint", {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "ftp://m.example.com"},
     "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", None),
    ("metrics-exporter", {"OTEL_METRICS_EXPORTER": "otpl"}, "OTEL_METRICS_EXPORTER", None),
    ("console-unknown", {"SPANLEDGER_CONSOLE": "maybe"}, "SPANLEDGER_CONSOLE", None),
    ("prices-missing", {"SPANLEDGER_PRICES": "/nonexistent/prices.toml"},
     "SPANLEDGER_PRICES", None),
    ("events-under-a-file", {"SPANLEDGER_EVENTS": "/dev/null/events/"}, "SPANLEDGER_EVENTS",
     None),
    ("events-nul", {"SPANLEDGER_EVENTS": "events\x00.jsonl"}, "SPANLEDGER_EVENTS", None),
    ("langfuse-public-only", {"LANGFUSE_SECRET_KEY": ""}, "LANGFUSE_SECRET_KEY", PUBLIC),
    ("langfuse-secret-only", {"LANGFUSE_PUBLIC_KEY": ""}, "LANGFUSE_PUBLIC_KEY", SECRET),
    ("langfuse-secret-space", {"LANGFUSE_SECRET_KEY": f"{SECRET} "}, "LANGFUSE_SECRET_KEY",
     SECRET),
    ("langfuse-host", {"LANGFUSE_HOST": "langfuse.example.com"}, "LANGFUSE_HOST", None),
    ("langfuse-base-url", {"LANGFUSE_BASE_URL": "https://"}, "LANGFUSE_BASE_URL", None),
    ("timeout-word", {"SPANLEDGER_SHUTDOWN_TIMEOUT": "soon"}, "SPANLEDGER_SHUTDOWN_TIMEOUT", None),
    ("timeout-zero", {"SPANLEDGER_SHUTDOWN_TIMEOUT": "0"}, "SPANLEDGER_SHUTDOWN_TIMEOUT", None),
    ("timeout-negative", {"SPANLEDGER_SHUTDOWN_TIMEOUT": "-5"}, "SPANLEDGER_SHUTDOWN_TIMEOUT",
     None),
    ("timeout-nan", {"SPANLEDGER_SHUTDOWN_TIMEOUT": "nan"}, "SPANLEDGER_SHUTDOWN_TIMEOUT", None),
    ("timeout-inf", {"SPANLEDGER_SHUTDOWN_TIMEOUT": "inf"}, "SPANLEDGER_SHUTDOWN_TIMEOUT", None),
    ("timeout-huge", {"SPANLEDGER_SHUTDOWN_TIMEOUT": "1e12"}, "SPANLEDGER_SHUTDOWN_TIMEOUT",
     None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "variable", "never_shown"),
    [case[1:] for case in BAD_VARIABLES],
    ids=[case[0] for case in BAD_VARIABLES],
)
def test_a_bad_variable_is_a_sentence_naming_it_and_nothing_is_built(
    builds: Builds,
    good_env: dict[str, str],
    changes: dict[str, str],
    variable: str,
    never_shown: str | None,
) -> None:
    environ = {**good_env, **changes}

    message = refused(environ=environ)

    assert message.startswith(variable) or f" {variable} " in f" {message} ", message
    if never_shown is not None:
        assert never_shown not in message
        assert never_shown.lower() not in message.lower()
    assert not builds.anything
    assert not Path(good_env["SPANLEDGER_EVENTS"]).exists()


def test_a_header_entry_is_named_by_its_position_only(
    builds: Builds, good_env: dict[str, str]
) -> None:
    message = refused(environ={**good_env, "OTEL_EXPORTER_OTLP_HEADERS": f"a=1,,b=2,{SECRET},c=3"})

    assert "OTEL_EXPORTER_OTLP_HEADERS entry 4 has no '='" in message
    assert SECRET not in message


def test_header_lists_keep_equals_signs_in_values_and_allow_a_trailing_comma(
    builds: Builds, good_env: dict[str, str]
) -> None:
    spanledger.configure(
        environ={
            **good_env,
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Authorization=Basic%20dXNlcjpwYXNz==,",
        },
        install=False,
    )

    otlp = builds.otel[0].settings["otlp"]
    assert otlp.traces_headers == {"authorization": "Basic dXNlcjpwYXNz=="}
    assert otlp.metrics_headers == {"authorization": f"Basic {SECRET}", "x-team": "search"}


def test_port_zero_is_refused_with_the_reason(builds: Builds, good_env: dict[str, str]) -> None:
    message = refused(environ={**good_env, "SPANLEDGER_PROMETHEUS_PORT": "0"})

    assert "from 1 to 65535" in message
    assert "random port" in message


@pytest.mark.parametrize(
    ("value", "otlp_metrics"),
    [("none", False), ("prometheus", False), ("otlp,console", True), (" OTLP ", True)],
)
def test_metrics_exporter_list_decides_otlp_metrics(
    builds: Builds, good_env: dict[str, str], value: str, otlp_metrics: bool
) -> None:
    spanledger.configure(environ={**good_env, "OTEL_METRICS_EXPORTER": value}, install=False)

    metrics = builds.otel[0].settings["otlp"].metrics_endpoint
    assert (metrics is not None) is otlp_metrics


def test_only_a_traces_endpoint_sends_no_metrics_to_a_relative_url(builds: Builds) -> None:
    spanledger.configure(
        environ={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://jaeger:4318/v1/traces"},
        install=False,
    )

    otlp = builds.otel[0].settings["otlp"]
    assert otlp.traces_endpoint == "http://jaeger:4318/v1/traces"
    assert otlp.metrics_endpoint is None


@pytest.mark.parametrize(
    ("value", "on"), [("1", True), (" TRUE ", True), ("yes", True), ("Off", False), ("no", False)]
)
def test_console_words(builds: Builds, value: str, on: bool) -> None:
    recorder = spanledger.configure(environ={"SPANLEDGER_CONSOLE": value}, install=False)

    assert bool(recorder.sinks) is on


def test_unknown_console_word_lists_the_accepted_ones() -> None:
    message = refused(environ={"SPANLEDGER_CONSOLE": "enabled"})

    assert message.startswith("SPANLEDGER_CONSOLE must be one of ")
    assert "'enabled'" in message
    assert "true" in message
    assert "off" in message


# --------------------------------------------------------------------------- files


def test_an_unusable_price_table_names_the_variable_and_the_file(
    builds: Builds, tmp_path: Path
) -> None:
    table = tmp_path / "prices.toml"
    table.write_text(
        '[[prices]]\nprovider = "p"\nmodel = "m"\nper_request = "1e999999999"\n', encoding="utf-8"
    )

    with pytest.raises(PriceTableError) as caught:
        spanledger.configure(environ={"SPANLEDGER_PRICES": str(table)}, install=False)

    message = str(caught.value)
    assert message.startswith("SPANLEDGER_PRICES names an unusable price table: ")
    assert str(table) in message
    assert "prices[0] (p/m): field 'per_request'" in message


@pytest.mark.parametrize("make", ["unwritable-directory", "under-a-file", "unwritable"])
def test_an_event_log_that_cannot_be_written_names_the_variable(
    builds: Builds, tmp_path: Path, make: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if make == "under-a-file":
        (tmp_path / "plain").write_text("x")
        path = tmp_path / "plain" / "logs" / "events.jsonl"
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        path = locked if make == "unwritable-directory" else locked / "events.jsonl"
        if (
            os.geteuid() == 0
        ):  # root writes anywhere: let the permission check see what a user would
            real_access = os.access
            monkeypatch.setattr(
                os, "access", lambda p, mode: real_access(p, mode) and Path(p) != locked
            )

    message = refused(environ={"SPANLEDGER_EVENTS": str(path)})

    assert message.startswith(f"SPANLEDGER_EVENTS names {str(path)!r}, which ")


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"prometheus_port": 99999}, "configure(prometheus_port=...)"),
        ({"prometheus_port": True}, "configure(prometheus_port=...)"),
        ({"otlp_endpoint": "localhost:4318"}, "configure(otlp_endpoint=...)"),
        ({"console": 1}, "configure(console=...)"),
        ({"shutdown_timeout": 0}, "configure(shutdown_timeout=...)"),
        ({"shutdown_timeout": float("nan")}, "configure(shutdown_timeout=...)"),
        ({"events_path": "/dev/null/logs/"}, "configure(events_path=...)"),
        ({"prices": 42}, "configure(prices=...)"),
        ({"prices": "/nonexistent/prices.toml"}, "configure(prices=...)"),
        ({"langfuse": "yes"}, "configure(langfuse=...)"),
        ({"langfuse": True}, "configure(langfuse=True)"),
    ],
)
def test_a_bad_argument_is_named_as_an_argument(
    builds: Builds, arguments: dict[str, Any], named: str
) -> None:
    message = refused(environ={}, **arguments)

    assert message.startswith(named), message
    assert not builds.anything


def test_an_argument_wins_over_a_bad_variable_it_replaces(builds: Builds) -> None:
    recorder = spanledger.configure(
        prometheus_port=9464,
        console=False,
        shutdown_timeout=1.5,
        environ={
            "SPANLEDGER_PROMETHEUS_PORT": "abc",
            "SPANLEDGER_CONSOLE": "maybe",
            "SPANLEDGER_SHUTDOWN_TIMEOUT": "soon",
        },
        install=False,
    )

    assert builds.otel[0].settings["prometheus"] == ("127.0.0.1", 9464)
    assert recorder.shutdown_timeout == 1.5


def test_langfuse_false_does_not_read_a_half_configured_environment(builds: Builds) -> None:
    recorder = spanledger.configure(
        langfuse=False, environ={"LANGFUSE_PUBLIC_KEY": PUBLIC}, install=False
    )

    assert recorder.sinks == ()


# --------------------------------------------------------------------------- nothing half-built


def test_a_failure_while_building_shuts_down_what_was_already_built(
    builds: Builds, good_env: dict[str, str]
) -> None:
    builds.langfuse_error = ValueError("a client for this key already exists")

    with pytest.raises(ValueError, match="already exists"):
        spanledger.configure(environ=good_env, install=False)

    (otel,) = builds.otel
    assert otel.shut_down


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_a_prometheus_port_in_use_names_the_variable(busy_port: int, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"

    message = refused(
        environ={"SPANLEDGER_PROMETHEUS_PORT": str(busy_port), "SPANLEDGER_EVENTS": str(events)}
    )

    assert message.startswith(
        f"SPANLEDGER_PROMETHEUS_PORT asks for a Prometheus endpoint on 127.0.0.1:{busy_port}"
    )
    assert "cannot be served" in message


def test_shutdown_timeout_reaches_the_recorder_by_default() -> None:
    assert spanledger.configure(environ={}, install=False).shutdown_timeout == 5.0
    assert Recorder().shutdown_timeout == 5.0


def test_the_price_table_is_loaded_once_before_the_recorder_is_built(tmp_path: Path) -> None:
    table = tmp_path / "prices.json"
    table.write_text(
        '{"prices": [{"provider": "cohere", "model": "m", "per_request": "0.5"}]}', encoding="utf-8"
    )

    recorder = spanledger.configure(environ={"SPANLEDGER_PRICES": str(table)}, install=False)

    ledger = recorder.ledger
    assert ledger is not None
    assert isinstance(getattr(ledger, "prices", None), PriceTable)


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan", "inf"])
def test_a_metric_export_interval_that_is_not_a_positive_number_names_the_variable(
    builds: Builds, value: str
) -> None:
    message = refused(
        environ={
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
            "OTEL_METRIC_EXPORT_INTERVAL": value,
        }
    )
    assert message.startswith("OTEL_METRIC_EXPORT_INTERVAL must be a positive number of")


def test_the_metric_export_interval_is_read_from_the_given_environment(builds: Builds) -> None:
    spanledger.configure(
        install=False,
        environ={
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
            "OTEL_METRIC_EXPORT_INTERVAL": "2500",
        },
    )
    (sink,) = builds.otel
    assert sink.settings["otlp"].metric_interval == 2.5
