"""The package's public names: every one reachable from ``spanledger``, loaded on first use so
that ``import spanledger`` (and the command line) stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest

import spanledger


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_every_public_name_resolves_to_its_definition() -> None:
    assert len(spanledger.__all__) == len(set(spanledger.__all__))
    for name in spanledger.__all__:
        value = getattr(spanledger, name)
        assert value is not None, name
        if name not in {"__version__", "instrumentation", "Event"}:  # Event: a union alias
            assert getattr(value, "__name__", name) == name, name
    assert sorted(dir(spanledger)) == sorted(spanledger.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'configur'"):
        spanledger.configur  # type: ignore[attr-defined]  # noqa: B018


def test_import_spanledger_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, spanledger; "
        "print(sorted(m for m in ('duckdb', 'httpx', 'pydantic', 'structlog', 'opentelemetry') "
        "if m in sys.modules))"
    )
    assert _run(code) == "[]"


def test_configure_stays_the_function_whichever_module_loads_first() -> None:
    code = (
        "import spanledger.demo, spanledger; "  # loads the module that defines configure first
        "print(callable(spanledger.configure), spanledger.configure.__module__)"
    )
    assert _run(code) == "True spanledger.configuration"


def test_the_report_command_does_not_load_the_recording_stack() -> None:
    code = (
        "import sys, spanledger.cli, spanledger.reporting, spanledger.fleet.report; "
        "print(sorted(m for m in ('httpx', 'structlog', 'opentelemetry') if m in sys.modules))"
    )
    assert _run(code) == "[]"
