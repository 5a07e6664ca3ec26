"""``spanledger.configure()``: wire the exporters a deployment asks for, from the environment.

Explicit arguments win over the environment. Every setting in effect is read and checked
before anything is built, so a bad one raises a ``ConfigurationError`` (one sentence naming the
variable or argument and what was expected, never a secret's value) and leaves nothing running.
Nothing is installed globally in OpenTelemetry: the tracer and meter providers built here are
private to spanledger's recorder, which becomes the process default (``set_default_recorder``)
unless ``install=False``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING

from spanledger import _settings as settings
from spanledger._logs import get_logger
from spanledger.errors import ConfigurationError
from spanledger.exporters.console import ConsoleSink
from spanledger.exporters.jsonl import JsonlSink
from spanledger.exporters.pipelines import OtlpSettings, langfuse_pipeline, otel_pipeline
from spanledger.ledger import Pricer, PriceTable
from spanledger.recorder import DEFAULT_SHUTDOWN_TIMEOUT, Recorder, SinkLike, set_default_recorder

if TYPE_CHECKING:
    from langfuse import Langfuse
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["SETTING_VARIABLES", "configure"]

_log = get_logger("spanledger.configure")
_OTLP_EXAMPLE = "http://localhost:4318"
SETTING_VARIABLES = (
    "SPANLEDGER_EVENTS",
    "SPANLEDGER_PRICES",
    "SPANLEDGER_CONSOLE",
    "SPANLEDGER_SHUTDOWN_TIMEOUT",
    "SPANLEDGER_PROMETHEUS_PORT",
    "SPANLEDGER_PROMETHEUS_ADDR",
)
"""The ``SPANLEDGER_*`` variables ``configure()`` reads."""
_TEST_SWITCHES = frozenset(
    {
        "SPANLEDGER_REQUIRE_E2E",
        "SPANLEDGER_FUZZ_EXAMPLES",
        "SPANLEDGER_PHOENIX_BIN",
        "SPANLEDGER_OLDER_SDKS_SUITE",
    }
)
"""Variables spanledger's own test suite reads: not settings, and not typos."""
_LANGFUSE_EXAMPLE = "https://cloud.langfuse.com"


def configure(
    *,
    events_path: str | PathLike[str] | None = None,
    otlp_endpoint: str | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    langfuse: Langfuse | bool | None = None,
    prices: Pricer | PriceTable | str | PathLike[str] | None = None,
    prometheus_port: int | None = None,
    console: bool | None = None,
    capture_payload: bool = False,
    shutdown_timeout: float | None = None,
    sinks: Iterable[SinkLike] = (),
    install: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Recorder:
    """Build a recorder from arguments and the environment, and make it the process default.

    - ``events_path`` / ``SPANLEDGER_EVENTS``: the JSONL event log, or a directory where each
      process writes rotated files of its own.
    - ``tracer_provider`` / ``meter_provider``: render spans and metrics through these; else an
      OTLP endpoint (``otlp_endpoint``, or the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
      ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and the other ``OTEL_EXPORTER_OTLP_*`` variables)
      gets spans and metrics over OTLP/HTTP (metrics unless ``OTEL_METRICS_EXPORTER`` leaves
      ``otlp`` out, and only where an endpoint for them is known). ``OTEL_SERVICE_NAME`` and
      ``OTEL_RESOURCE_ATTRIBUTES`` name the resource; Phoenix's project
      (``openinference.project.name``) follows the service name unless they name one.
    - ``prometheus_port`` / ``SPANLEDGER_PROMETHEUS_PORT`` (+ ``SPANLEDGER_PROMETHEUS_ADDR``,
      default 127.0.0.1): serve the metrics for Prometheus to scrape (extra ``prometheus``),
      beside a ``tracer_provider`` of yours too (it gets the spans, the endpoint the metrics);
      with a ``meter_provider`` of yours it is a ``ConfigurationError``.
    - ``langfuse``: a client of yours, used as it is (flushed, never shut down), or
      ``LANGFUSE_PUBLIC_KEY`` + ``LANGFUSE_SECRET_KEY`` (+ ``LANGFUSE_BASE_URL`` /
      ``LANGFUSE_HOST``) to build one of spanledger's own, kept apart from any client of the
      application's, even for the same key; ``False`` turns Langfuse off.
    - ``prices`` / ``SPANLEDGER_PRICES``: a price table (or its path) to price every event.
    - ``console`` / ``SPANLEDGER_CONSOLE`` (``1``/``true``/``yes``/``on`` or
      ``0``/``false``/``no``/``off``): one line per call on standard error.
    - ``shutdown_timeout`` / ``SPANLEDGER_SHUTDOWN_TIMEOUT``: seconds that flushing and shutting
      down may take in all (default 5).

    A ``SPANLEDGER_*`` variable that is none of these is logged as ``unknown_setting`` (with
    the setting it was probably meant to be), and a recorder with neither a sink nor a price
    table as ``nothing_configured``: both are warnings on the ``spanledger.configure`` logger.

    Raises ``ConfigurationError`` (``PriceTableError`` for a price table) naming the setting.
    """
    env = os.environ if environ is None else environ
    _warn_of_unknown_settings(env)
    given_providers = tracer_provider is not None or meter_provider is not None
    plan = _Plan(
        events=_events_setting(events_path, env),
        providers=(tracer_provider, meter_provider) if given_providers else None,
        otel=(
            _prometheus_beside(meter_provider, prometheus_port, env)
            if given_providers
            else _otel_setting(otlp_endpoint, prometheus_port, env)
        ),
        langfuse_client=langfuse if not isinstance(langfuse, bool | None) else None,
        langfuse_keys=_langfuse_setting(langfuse, env),
        console=_console_setting(console, env),
        prices=_prices_setting(prices, env),
        shutdown_timeout=_shutdown_setting(shutdown_timeout, env),
        capture_payload=capture_payload,
    )
    built: list[SinkLike] = []
    try:
        _build_sinks(plan, built)
        recorder = Recorder(
            [*sinks, *built], prices=plan.prices, shutdown_timeout=plan.shutdown_timeout
        )
    except BaseException:
        Recorder(built, shutdown_timeout=plan.shutdown_timeout).shutdown()
        raise
    if not recorder.sinks and plan.prices is None:
        _log.warning(
            "nothing_configured",
            hint="events are sent nowhere: set SPANLEDGER_EVENTS, OTEL_EXPORTER_OTLP_ENDPOINT, "
            "SPANLEDGER_PROMETHEUS_PORT, LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY, "
            "SPANLEDGER_CONSOLE=1 or SPANLEDGER_PRICES, or pass them as arguments",
        )
    if install:
        set_default_recorder(recorder)
    return recorder


def _warn_of_unknown_settings(env: Mapping[str, str]) -> None:
    """Name each ``SPANLEDGER_*`` variable ``configure()`` does not read: a typo would
    otherwise turn a sink off without a word."""
    known = {*SETTING_VARIABLES, *_TEST_SWITCHES}
    for name in sorted(env):
        if not name.startswith("SPANLEDGER_") or name in known:
            continue
        suffixes = [setting.removeprefix("SPANLEDGER_") for setting in SETTING_VARIABLES]
        close = difflib.get_close_matches(name.removeprefix("SPANLEDGER_"), suffixes, 1, 0.75)
        _log.warning(
            "unknown_setting",
            variable=name,
            hint=f"did you mean SPANLEDGER_{close[0]}?" if close else "spanledger does not read it",
        )


# --------------------------------------------------------------------------- settings in effect


@dataclass(frozen=True)
class _OtelSetting:
    otlp: OtlpSettings | None
    prometheus: tuple[str, int] | None
    prometheus_source: str
    service_name: str
    resource: dict[str, str]


@dataclass(frozen=True)
class _LangfuseKeys:
    public_key: str
    secret_key: str
    host: str

    def __repr__(self) -> str:
        return f"_LangfuseKeys(public_key=..., secret_key=..., host={self.host!r})"


def _events_setting(argument: object, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The event log's path and the setting that named it; a path ending in a separator names
    a directory, made if need be."""
    value = settings.pick(argument, "events_path", env, "SPANLEDGER_EVENTS")
    if value is None:
        return None
    path = str(settings.event_log_path(value, directory=True))
    named_a_directory = os.fsdecode(value.raw).endswith(("/", os.sep))  # type: ignore[arg-type]
    return (path + os.sep if named_a_directory else path), value.source


def _otel_setting(
    otlp_endpoint: object,
    prometheus_port: object,
    env: Mapping[str, str],
    *,
    with_otlp: bool = True,
) -> _OtelSetting | None:
    otlp = _otlp_setting(otlp_endpoint, env) if with_otlp else None
    port = settings.pick(prometheus_port, "prometheus_port", env, "SPANLEDGER_PROMETHEUS_PORT")
    if otlp is None and port is None:
        return None
    named = settings.from_env(env, "OTEL_RESOURCE_ATTRIBUTES")
    resource = settings.resource_attributes(named) if named is not None else {}
    prometheus = None
    if port is not None:
        address = settings.from_env(env, "SPANLEDGER_PROMETHEUS_ADDR")
        prometheus = (
            settings.host(address) if address is not None else "127.0.0.1",
            settings.port(port),
        )
    return _OtelSetting(
        otlp=otlp,
        prometheus=prometheus,
        prometheus_source=port.source if port is not None else "",
        service_name=env.get("OTEL_SERVICE_NAME") or resource.get("service.name") or "spanledger",
        resource=resource,
    )


def _prometheus_beside(
    meter_provider: object, prometheus_port: object, env: Mapping[str, str]
) -> _OtelSetting | None:
    """With providers of the caller's: only the Prometheus endpoint is spanledger's to build
    (OTLP goes through the caller's providers), and not beside a meter provider of theirs."""
    setting = _otel_setting(None, prometheus_port, env, with_otlp=False)
    if setting is None:
        return None
    if meter_provider is not None:
        raise ConfigurationError(
            f"{setting.prometheus_source} asks for a Prometheus endpoint and meter_provider is "
            "given: the metrics go to that meter provider, which spanledger cannot serve; add "
            "a PrometheusEndpoint's reader to it, or leave one of the two settings out"
        )
    return setting


def _otlp_setting(argument: object, env: Mapping[str, str]) -> OtlpSettings | None:
    """Where OTLP spans and metrics go: the ``otlp_endpoint`` argument (a base URL), else the
    standard ``OTEL_EXPORTER_OTLP_*`` variables; ``None`` when neither names an endpoint."""
    base_value = settings.pick(argument, "otlp_endpoint", env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    base = settings.url(base_value, _OTLP_EXAMPLE) if base_value is not None else None
    traces_value = metrics_value = None
    if argument is None:
        traces_value = settings.from_env(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        metrics_value = settings.from_env(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    if base is None and traces_value is None:
        return None
    traces = settings.url(traces_value, _OTLP_EXAMPLE) if traces_value is not None else None
    metrics = settings.url(metrics_value, _OTLP_EXAMPLE) if metrics_value is not None else None
    if not settings.otlp_metrics_wanted(settings.from_env(env, "OTEL_METRICS_EXPORTER")):
        metrics = None
    elif metrics is None and base is not None:
        metrics = f"{base}/v1/metrics"
    return OtlpSettings(
        traces_endpoint=traces or f"{base}/v1/traces",
        metrics_endpoint=metrics,
        traces_headers=_otlp_headers(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
        metrics_headers=_otlp_headers(env, "OTEL_EXPORTER_OTLP_METRICS_HEADERS"),
        metric_interval=_metric_interval(env),
    )


def _metric_interval(env: Mapping[str, str]) -> float:
    """``OTEL_METRIC_EXPORT_INTERVAL`` (milliseconds, as the OTel SDK reads it), else 60 s."""
    value = settings.from_env(env, "OTEL_METRIC_EXPORT_INTERVAL")
    return settings.milliseconds(value) if value is not None else 60.0


def _otlp_headers(env: Mapping[str, str], specific: str) -> dict[str, str] | None:
    """Headers from ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_HEADERS``, else the shared
    ``OTEL_EXPORTER_OTLP_HEADERS``."""
    value = settings.from_env(env, specific) or settings.from_env(env, "OTEL_EXPORTER_OTLP_HEADERS")
    return settings.headers(value) if value is not None else None


def _langfuse_setting(argument: object, env: Mapping[str, str]) -> _LangfuseKeys | None:
    """The keys and host to build a Langfuse client from, when the environment asks for one.
    One key without the other is an error: a half-configured Langfuse is a mistake, and
    quietly sending nothing would hide it."""
    if isinstance(argument, str | int | float) and not isinstance(argument, bool):
        raise ConfigurationError(
            "configure(langfuse=...) must be a Langfuse client, True, False or None, "
            f"not a {type(argument).__name__}"
        )
    if argument is not None and argument is not True:
        return None
    public = settings.from_env(env, "LANGFUSE_PUBLIC_KEY")
    secret = settings.from_env(env, "LANGFUSE_SECRET_KEY")
    if public is None and secret is None:
        if argument is True:
            raise ConfigurationError(
                "configure(langfuse=True) needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
                "in the environment, and neither is set"
            )
        return None
    if public is None or secret is None:
        have, missing = (
            ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY")
            if public is not None
            else ("LANGFUSE_SECRET_KEY", "LANGFUSE_PUBLIC_KEY")
        )
        raise ConfigurationError(
            f"{have} is set but {missing} is not; Langfuse needs both keys (set both, or "
            "neither, or pass configure(langfuse=False))"
        )
    host = settings.from_env(env, "LANGFUSE_BASE_URL") or settings.from_env(env, "LANGFUSE_HOST")
    return _LangfuseKeys(
        public_key=settings.secret(public),
        secret_key=settings.secret(secret),
        host=settings.url(host, _LANGFUSE_EXAMPLE) if host is not None else _LANGFUSE_EXAMPLE,
    )


def _console_setting(argument: object, env: Mapping[str, str]) -> bool:
    value = settings.pick(argument, "console", env, "SPANLEDGER_CONSOLE")
    return settings.flag(value) if value is not None else False


def _prices_setting(argument: object, env: Mapping[str, str]) -> Pricer | PriceTable | None:
    value = settings.pick(argument, "prices", env, "SPANLEDGER_PRICES")
    return settings.price_table(value) if value is not None else None


def _shutdown_setting(argument: object, env: Mapping[str, str]) -> float:
    value = settings.pick(argument, "shutdown_timeout", env, "SPANLEDGER_SHUTDOWN_TIMEOUT")
    return settings.seconds(value) if value is not None else DEFAULT_SHUTDOWN_TIMEOUT


# --------------------------------------------------------------------------- building


@dataclass(frozen=True)
class _Plan:
    """Every setting in effect, read and checked, before anything is built."""

    events: tuple[str, str] | None
    """The event log's path, and the setting that named it."""
    providers: tuple[TracerProvider | None, MeterProvider | None] | None
    otel: _OtelSetting | None
    langfuse_client: Langfuse | None
    langfuse_keys: _LangfuseKeys | None
    console: bool
    prices: Pricer | PriceTable | None
    shutdown_timeout: float
    capture_payload: bool


def _build_sinks(plan: _Plan, built: list[SinkLike]) -> None:
    """Build the sinks the plan asks for, appending each to ``built`` as soon as it exists (so
    a later failure can shut down what was already started)."""
    if plan.events is not None:
        built.append(_open_event_log(*plan.events))
    if plan.providers is not None:  # beside them, plan.otel is a Prometheus endpoint only
        metrics = plan.otel is None
        built.append(_given_providers_exporter(*plan.providers, plan.capture_payload, metrics))
    if plan.otel is not None:
        built.append(_build_otel(plan.otel, plan.capture_payload, plan.shutdown_timeout))
    if plan.langfuse_client is not None:
        built.append(_given_langfuse_exporter(plan.langfuse_client, plan.capture_payload))
    elif plan.langfuse_keys is not None:
        built.append(
            _build_langfuse(plan.langfuse_keys, plan.capture_payload, plan.shutdown_timeout)
        )
    if plan.console:
        built.append(ConsoleSink())


def _open_event_log(path: str, source: str) -> JsonlSink:
    try:
        return JsonlSink(path)
    except OSError as error:
        raise ConfigurationError(
            f"{source} names the event log {str(path)!r}, which cannot be opened for appending "
            f"({error.strerror or type(error).__name__})"
        ) from None


def _given_providers_exporter(
    tracer_provider: TracerProvider | None,
    meter_provider: MeterProvider | None,
    capture_payload: bool,
    metrics: bool = True,
) -> SinkLike:
    """Spans (and, unless a Prometheus endpoint takes them, metrics) through the caller's
    providers."""
    from spanledger.exporters.otel import OtelExporter

    return OtelExporter(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_payload=capture_payload,
        enable_metrics=metrics,
    )


def _build_otel(setting: _OtelSetting, capture_payload: bool, timeout: float) -> SinkLike:
    try:
        return otel_pipeline(
            otlp=setting.otlp,
            prometheus=setting.prometheus,
            service_name=setting.service_name,
            resource_attributes=setting.resource,
            capture_payload=capture_payload,
            shutdown_timeout=timeout,
        )
    except OSError as error:
        if setting.prometheus is None:
            raise
        address, port = setting.prometheus
        raise ConfigurationError(
            f"{setting.prometheus_source} asks for a Prometheus endpoint on {address}:{port}, "
            f"which cannot be served ({error.strerror or type(error).__name__})"
        ) from None


def _given_langfuse_exporter(client: Langfuse, capture_payload: bool) -> SinkLike:
    from spanledger.exporters.langfuse import LangfuseExporter

    return LangfuseExporter(client, capture_payload=capture_payload)


def _build_langfuse(keys: _LangfuseKeys, capture_payload: bool, timeout: float) -> SinkLike:
    return langfuse_pipeline(
        public_key=keys.public_key,
        secret_key=keys.secret_key,
        host=keys.host,
        capture_payload=capture_payload,
        shutdown_timeout=timeout,
    )
