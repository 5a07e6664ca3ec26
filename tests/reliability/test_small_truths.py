"""Small truths the command and the settings tell (issue 36, item 7): an empty time window, an
export directory that cannot be written, a source that is not a log file, a bounded
``--stale-days``, a dangling ``SPANLEDGER_EVENTS`` symlink, a price entry that applies only
later, and a long rate written as a plain number. Each is one line, naming what it is about."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

import spanledger
from spanledger.cli import main
from spanledger.costs import CostCode
from spanledger.errors import ConfigurationError
from spanledger.eventlog import event_line
from spanledger.events import EmbeddingEvent, EmbeddingUsage
from spanledger.ledger import PriceTable, PriceTableError, price_usage

CALLED = datetime(2026, 11, 1, tzinfo=UTC)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_error_line(status: int, err: str) -> str:
    """Status 1 and exactly one ``error:`` line, never the words of an unexpected failure."""
    assert status == 1
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ")
    assert "bug" not in err
    assert "unexpected" not in err
    return err.strip()


def a_log(tmp_path: Path) -> Path:
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        event_line(
            EmbeddingEvent(
                call_id="c1",
                provider="jina",
                model="m",
                started_at=CALLED,
                latency_ms=1.0,
                input_count=1,
                usage=EmbeddingUsage(input_tokens=3),
            )
        )
    )
    return log


# --------------------------------------------------------------------------- a. the window


@pytest.mark.parametrize("command", ["report", "export"])
def test_a_since_after_until_is_refused_naming_both_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    target = ["--parquet", str(tmp_path / "out")] if command == "export" else []
    status, out, err = run(
        capsys,
        command,
        str(a_log(tmp_path)),
        *target,
        "--since",
        "2026-12-01",
        "--until",
        "2026-11-01",
    )

    line = one_error_line(status, err)
    assert line == (
        "error: --since '2026-12-01' is not before --until '2026-11-01': the window holds no time"
    )
    assert out == ""
    assert not (tmp_path / "out").exists()


def test_a_window_in_order_still_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _ = run(
        capsys, "report", str(a_log(tmp_path)), "--since", "2026-10-01", "--until", "2026-12-01"
    )

    assert status == 0
    assert out.startswith("1 call\n")


# --------------------------------------------------------------------------- b. export target


@contextlib.contextmanager
def read_only_directory(path: Path) -> Iterator[Path]:
    """An empty directory this process cannot write in: immutable for root (who writes
    anywhere else), mode 0o555 for anyone else."""
    path.mkdir()
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(path)], check=False).returncode:
            pytest.skip("root, and the directory cannot be made immutable here")
        try:
            yield path
        finally:
            subprocess.run([chattr, "-i", str(path)], check=False)
    else:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)


def test_export_into_a_read_only_directory_names_it_and_the_cause(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = a_log(tmp_path)
    with read_only_directory(tmp_path / "out") as target:
        status, _, err = run(capsys, "export", str(log), "--parquet", str(target))

    line = one_error_line(status, err)
    assert line.startswith(
        f"error: --parquet {str(target)!r}: cannot write the export into this directory ("
    )
    assert line.endswith(("(Permission denied)", "(Operation not permitted)"))


# --------------------------------------------------------------------------- c. sources


def test_the_null_device_is_named_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "report", os.devnull)

    assert one_error_line(status, err) == (
        f"error: {os.devnull}: a character device, not an event log file"
    )


def test_a_fifo_is_named_a_fifo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)

    status, _, err = run(capsys, "report", str(fifo))

    assert one_error_line(status, err) == (
        f"error: {fifo}: a FIFO (named pipe), not an event log file"
    )


def test_standard_input_is_said_to_be_unsupported(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "report", "-")

    assert one_error_line(status, err) == (
        "error: -: reading an event log from standard input is not supported; save it to a "
        "file and name the file"
    )


def test_the_help_says_which_sources_are_not_read(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])

    said = " ".join(capsys.readouterr().out.split())
    assert "not standard input ('-'), a pipe or a device" in said


# --------------------------------------------------------------------------- d. --stale-days


@pytest.mark.parametrize("days", ["99999999999", "-1", "36501", "ninety"])
def test_stale_days_out_of_bounds_is_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], days: str
) -> None:
    example = str(spanledger.ledger.example_prices_path())

    status, out, err = run(capsys, "prices", "check", example, "--stale-days", days)

    assert one_error_line(status, err) == (
        f"error: --stale-days {days!r}: a whole number of days from 0 to 36,500"
    )
    assert out == ""


@pytest.mark.parametrize("days", ["0", "36500"])
def test_stale_days_at_its_bounds_is_accepted(
    capsys: pytest.CaptureFixture[str], days: str
) -> None:
    example = str(spanledger.ledger.example_prices_path())

    status, out, _ = run(capsys, "prices", "check", example, "--stale-days", days)

    assert status == 0
    assert out.startswith(f"{example}: ")


# --------------------------------------------------------------------------- f. SPANLEDGER_EVENTS


def test_a_dangling_events_symlink_is_named_with_the_variable(tmp_path: Path) -> None:
    link = tmp_path / "events.jsonl"
    link.symlink_to(tmp_path / "gone" / "events.jsonl")

    with pytest.raises(ConfigurationError) as caught:
        spanledger.configure(install=False, environ={"SPANLEDGER_EVENTS": str(link)})

    assert str(caught.value) == (
        f"SPANLEDGER_EVENTS names {str(link)!r}, which is a symbolic link to "
        f"{str(tmp_path / 'gone' / 'events.jsonl')!r}, a file that cannot be created (its "
        "directory does not exist)"
    )


# --------------------------------------------------------------------------- g. a later entry


LATER_ENTRY = {
    "prices": [
        {"provider": "jina", "model": "m", "input_per_mtok": "0.02", "valid_from": "2027-01-01"}
    ]
}


def test_an_entry_valid_only_later_is_its_own_reason() -> None:
    table = PriceTable.from_dict(LATER_ENTRY)

    line = price_usage(table, "jina", "m", CALLED, EmbeddingUsage(input_tokens=3))

    assert line.code is CostCode.PRICE_NOT_YET_VALID
    assert line.reason is not None
    assert "applies only from 2027-01-01" in line.reason
    assert "no price entry" not in line.reason


def test_the_report_does_not_call_a_later_entry_missing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(LATER_ENTRY), encoding="utf-8")

    status, out, _ = run(capsys, "report", str(a_log(tmp_path)), "--prices", str(prices))

    assert status == 0
    assert "jina/m: 1 call (price_not_yet_valid)" in out
    assert "no_price_entry" not in out


def test_a_model_with_no_entry_at_all_still_has_none() -> None:
    table = PriceTable.from_dict(LATER_ENTRY)

    line = price_usage(table, "jina", "other", CALLED, EmbeddingUsage(input_tokens=3))

    assert line.code is CostCode.NO_PRICE_ENTRY


# --------------------------------------------------------------------------- h. long plain rates


@pytest.mark.parametrize(
    ("name", "rate"),
    [
        ("prices.toml", "0.123456789012345678"),  # 18 significant digits
        ("prices.toml", "0.1234567890123456789"),
        ("prices.json", "0.12345678901234567891"),  # 20
        ("prices.json", "123456.78901234567891"),
    ],
)
def test_a_long_rate_written_as_a_plain_number_must_be_quoted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, rate: str
) -> None:
    table = tmp_path / name
    if name.endswith(".json"):
        table.write_text(
            '{"prices": [{"provider": "jina", "model": "m", "input_per_mtok": ' + rate + "}]}"
        )
    else:
        table.write_text(f'[[prices]]\nprovider = "jina"\nmodel = "m"\ninput_per_mtok = {rate}\n')
    digits = len(rate.replace(".", "").lstrip("0"))

    status, out, _ = run(capsys, "prices", "check", str(table))

    assert status == 1
    assert out == (
        f"invalid: {table}: prices[0] (jina/m): field 'input_per_mtok': {rate} has {digits} "
        "significant digits, more than a plain number keeps (a float is exact to only about "
        f'15-17); quote it as a string ("{rate}") to keep every digit\n'
    )


def test_the_same_rate_quoted_is_read_exactly(tmp_path: Path) -> None:
    table = tmp_path / "prices.toml"
    rate = "0.1234567890123456789"
    table.write_text(f'[[prices]]\nprovider = "jina"\nmodel = "m"\ninput_per_mtok = "{rate}"\n')

    assert PriceTable.load(table).entries[0].input_per_mtok == Decimal(rate)


def test_a_plain_number_a_float_holds_is_still_read(tmp_path: Path) -> None:
    table = tmp_path / "prices.json"
    table.write_text('{"prices": [{"provider": "jina", "model": "m", "input_per_mtok": 0.02}]}')

    assert PriceTable.load(table).entries[0].input_per_mtok == Decimal("0.02")


def test_a_plain_number_too_long_for_any_rate_says_the_limit(tmp_path: Path) -> None:
    table = tmp_path / "prices.toml"
    table.write_text('[[prices]]\nprovider = "j"\nmodel = "m"\ninput_per_mtok = 0.' + "1" * 30)

    with pytest.raises(PriceTableError, match=r"at most 20 significant digits, not 30$"):
        PriceTable.load(table)


# --- the OTLP settings' repr, and spend in two currencies ---------------------------------


def test_the_otlp_settings_repr_holds_no_secret() -> None:
    from spanledger.exporters.pipelines import OtlpSettings

    secret = "SENTINEL-otlp-9c1d"
    settings = OtlpSettings(
        f"https://user:{secret}@otel.example.com:4318/v1/traces?key={secret}",
        f"https://otel.example.com/v1/metrics?token={secret}",
        {"authorization": f"Bearer {secret}"},
        {"x-api-key": secret},
    )
    shown = repr(settings)
    assert secret not in shown
    assert secret not in str(settings)
    assert "'https://otel.example.com:4318/v1/traces'" in shown
    assert "'authorization': '<redacted>'" in shown
    assert "'x-api-key': '<redacted>'" in shown


def test_spend_in_two_currencies_is_said_so_not_that_nothing_was_cited() -> None:
    from spanledger.attribution.summary import AttributionFigures, figure_rows

    figures = AttributionFigures(
        requests=2, with_share=2, cited_tokens=40, currencies=("EUR", "USD")
    )
    rows = dict(figure_rows(figures))
    assert rows["spend per cited token"] == "n/a (the spend is in 2 currencies)"
