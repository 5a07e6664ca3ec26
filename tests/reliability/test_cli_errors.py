"""The ``spanledger`` command never ends in a traceback: every failure is one line and a
non-zero status, run as users run it (a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "payload-SENTINEL-7f3a"
HUGE_RATE = '[[prices]]\nprovider = "p"\nmodel = "m"\nper_request = "1e999999999"\n'


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without any spanledger / OTel / Langfuse settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "LANGFUSE_", "SPANLEDGER_"))
    }
    env.update(extra)
    return env


def spanledger_cli(
    *argv: str, env: dict[str, str] | None = None, script: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "spanledger.cli"]
    return subprocess.run(
        [*command, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env=env if env is not None else clean_environment(),
        check=False,
    )


def assert_one_line_failure(done: subprocess.CompletedProcess[str], stream: str) -> str:
    """Non-zero status, no traceback anywhere, and exactly one line on ``stream``."""
    assert done.returncode != 0
    assert "Traceback" not in done.stdout + done.stderr
    said = done.stderr if stream == "stderr" else done.stdout
    other = done.stdout if stream == "stderr" else done.stderr
    assert len(said.splitlines()) == 1, said
    assert other == ""
    return said


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- prices check


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("huge.toml", HUGE_RATE, "a rate must be at most 1,000,000"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("binary.toml", b"\xff\xfe\x00" + SECRET.encode(), "not UTF-8"),
        ("cut.json", '{"prices": [{"provider": "' + SECRET, "at line 1"),
    ],
)
def test_prices_check_of_a_hostile_table_says_invalid_in_one_line(
    tmp_path: Path, name: str, content: str | bytes, said: str
) -> None:
    table = write(tmp_path / name, content)

    line = assert_one_line_failure(spanledger_cli("prices", "check", str(table)), "stdout")

    assert line.startswith(f"invalid: {table}: ")
    assert said in line
    assert SECRET not in line


def test_prices_check_of_a_directory_says_invalid(tmp_path: Path) -> None:
    line = assert_one_line_failure(spanledger_cli("prices", "check", str(tmp_path)), "stdout")

    assert line.startswith(f"invalid: {tmp_path}: cannot read")


# --------------------------------------------------------------------------- report


def test_report_of_a_missing_log_is_one_error_line(tmp_path: Path) -> None:
    missing = tmp_path / "absent.jsonl"

    line = assert_one_line_failure(spanledger_cli("report", str(missing)), "stderr")

    assert line == f"error: {missing}: No such file or directory\n"


def test_report_of_a_directory_is_one_error_line(tmp_path: Path) -> None:
    line = assert_one_line_failure(spanledger_cli("report", str(tmp_path)), "stderr")

    assert line.startswith(f"error: {tmp_path}: ")


def test_report_with_an_overflowing_price_table_is_one_error_line(tmp_path: Path) -> None:
    log = write(tmp_path / "events.jsonl", "")
    table = write(tmp_path / "prices.toml", HUGE_RATE)

    line = assert_one_line_failure(
        spanledger_cli("report", str(log), "--prices", str(table), "--json"), "stderr"
    )

    assert line.startswith(f"error: {table}: prices[0] (p/m): field 'per_request'")


def test_an_unexpected_exception_is_named_by_type_only() -> None:
    script = textwrap.dedent(
        f"""
        import sys
        import spanledger.reporting
        from spanledger.cli import main

        def broken(*args, **kwargs):
            raise RuntimeError({SECRET!r})

        spanledger.reporting.log_files = broken
        raise SystemExit(main(sys.argv[1:]))
        """
    )
    log = REPO_ROOT / "pyproject.toml"  # any readable file: it is read as an (empty) log

    line = assert_one_line_failure(spanledger_cli("report", str(log), script=script), "stderr")

    assert line.startswith("error: unexpected RuntimeError in 'spanledger report'")
    assert SECRET not in line


def test_a_reader_that_goes_away_ends_the_report_quietly(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    record = {"schema": 1, "kind": "nothing"}
    write(log, "\n".join(json.dumps(record) for _ in range(2000)) + "\n")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "spanledger.cli", "report", str(log)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=REPO_ROOT,
            env=clean_environment(),
            check=False,
        )
    finally:
        os.close(write_end)

    assert done.returncode == 1
    assert done.stderr == ""


# --------------------------------------------------------------------------- demo


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
        ("SPANLEDGER_PROMETHEUS_PORT", "99999"),
        ("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Basic x,{SECRET}"),
        ("LANGFUSE_PUBLIC_KEY", "pk-lf-only"),
        ("SPANLEDGER_SHUTDOWN_TIMEOUT", "forever"),
    ],
)
def test_demo_with_a_bad_environment_names_the_variable(
    tmp_path: Path, variable: str, value: str
) -> None:
    env = clean_environment(**{variable: value})
    if variable.startswith("OTEL_EXPORTER_OTLP_HEADERS"):
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    events = tmp_path / "events.jsonl"

    line = assert_one_line_failure(
        spanledger_cli("demo", "--events", str(events), env=env), "stderr"
    )

    assert line.startswith("error: ")
    assert variable in line
    assert SECRET not in line
    assert not events.exists()


def test_demo_with_a_directory_for_its_log_names_the_option(tmp_path: Path) -> None:
    line = assert_one_line_failure(spanledger_cli("demo", "--events", str(tmp_path)), "stderr")

    assert line == (
        f"error: --events names {str(tmp_path)!r}, which is a directory, not a file "
        "to append events to\n"
    )


WITHOUT_OTEL_SDK = textwrap.dedent(
    """
    import sys
    sys.modules["opentelemetry.sdk.resources"] = None  # as in an install without the extra
    sys.modules["prometheus_client"] = None
    from spanledger.cli import main
    raise SystemExit(main(sys.argv[1:]))
    """
)


@pytest.mark.parametrize(
    ("variable", "value", "extra"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9", "otel"),
        ("SPANLEDGER_PROMETHEUS_PORT", "9", "prometheus"),
    ],
)
def test_a_missing_extra_is_the_librarys_own_sentence_never_a_bug(
    tmp_path: Path, variable: str, value: str, extra: str
) -> None:
    env = clean_environment(**{variable: value})
    events = tmp_path / "events.jsonl"

    line = assert_one_line_failure(
        spanledger_cli("demo", "--events", str(events), env=env, script=WITHOUT_OTEL_SDK),
        "stderr",
    )

    assert line.startswith(f"error: install spanledger[{extra}] to use this exporter")
    assert f"pip install 'spanledger[{extra}]'" in line
    assert "bug" not in line


def test_a_module_an_install_lacks_is_named_never_called_a_bug() -> None:
    script = textwrap.dedent(
        """
        import sys
        import spanledger.reporting
        from spanledger.cli import main

        def broken(*args, **kwargs):
            raise ModuleNotFoundError("No module named 'duckdb'", name="duckdb")

        spanledger.reporting.log_files = broken
        raise SystemExit(main(sys.argv[1:]))
        """
    )
    log = REPO_ROOT / "pyproject.toml"

    line = assert_one_line_failure(spanledger_cli("report", str(log), script=script), "stderr")

    assert line.startswith("error: 'spanledger report' could not import duckdb")
    assert "bug" not in line
