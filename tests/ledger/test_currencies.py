"""A price table's currency is on the ISO 4217 list, and an empty table is accepted with a
warning that nothing will be priced.

The list is ``spanledger/data/iso4217.txt``, generated from pycountry's ISO 4217 data: run this
module (``python -m tests.ledger.test_currencies``) to write it again when the first test says
the installed pycountry lists other codes.
"""

from __future__ import annotations

import importlib.metadata
import logging
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pycountry
import pytest

from spanledger.cli import main
from spanledger.costs import CostStatus
from spanledger.eventlog import event_line
from spanledger.events import EmbeddingEvent, EmbeddingUsage
from spanledger.ledger import Ledger, PriceTable, PriceTableError
from spanledger.ledger import imported as imported_module
from spanledger.ledger.currencies import iso4217_codes

CODES_FILE = Path(__file__).resolve().parents[2] / "src" / "spanledger" / "data" / "iso4217.txt"
XYZ_TABLE = '[[prices]]\nprovider = "jina"\nmodel = "m"\ninput_per_mtok = 0.02\ncurrency = "XYZ"\n'
EMPTY_TABLE = 'currency = "USD"\nprices = []\n'


def pycountry_codes() -> list[str]:
    return sorted(currency.alpha_3 for currency in pycountry.currencies)


def codes_file_text() -> str:
    version = importlib.metadata.version("pycountry")
    header = (
        "# ISO 4217 currency codes: the only currencies a price table may name, one a line.\n"
        f"# Generated from the ISO 4217 data of pycountry {version} by\n"
        "# `python -m tests.ledger.test_currencies`; tests/ledger/test_currencies.py asks\n"
        "# for a new run when the installed pycountry lists other codes.\n"
    )
    return header + "\n".join(pycountry_codes()) + "\n"


def event(model: str = "m") -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id="c1",
        provider="jina",
        model=model,
        started_at=datetime(2026, 11, 1, tzinfo=UTC),
        latency_ms=1.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=3),
    )


# --------------------------------------------------------------------------- the ISO list


def test_the_shipped_list_is_the_iso_4217_list_pycountry_keeps() -> None:
    assert sorted(iso4217_codes()) == pycountry_codes(), (
        "the ISO 4217 list changed: run `python -m tests.ledger.test_currencies`"
    )
    assert {"USD", "EUR", "JPY", "GBP", "CHF"} <= iso4217_codes()


@pytest.mark.parametrize(
    "table",
    [
        {"currency": "XYZ", "prices": []},
        {"prices": [{"provider": "jina", "model": "m", "input_per_mtok": 1, "currency": "XYZ"}]},
    ],
    ids=["table", "entry"],
)
def test_a_three_letter_code_not_on_the_list_is_refused_by_name(table: dict[str, object]) -> None:
    with pytest.raises(PriceTableError) as raised:
        PriceTable.from_dict(table, source="prices.toml")
    message = str(raised.value)
    assert message.startswith("prices.toml: ")
    assert "field 'currency'" in message
    assert "'XYZ'" in message
    assert "ISO 4217" in message


@pytest.mark.parametrize("code", ["EUR", "JPY", "CHF"])
def test_a_code_on_the_list_is_accepted(code: str) -> None:
    table = PriceTable.from_dict(
        {"currency": code, "prices": [{"provider": "jina", "model": "m", "per_request": 1}]}
    )
    assert table.entries[0].currency == code


def test_report_and_prices_check_refuse_the_same_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prices = tmp_path / "xyz.toml"
    prices.write_text(XYZ_TABLE)
    log = tmp_path / "events.jsonl"
    log.write_bytes(event_line(event()))
    capsys.readouterr()
    assert main(["report", str(log), "--prices", str(prices)]) == 1
    report_err = capsys.readouterr().err
    assert main(["prices", "check", str(prices)]) == 1
    check_out = capsys.readouterr().out
    for text in (report_err, check_out):
        assert str(prices) in text
        assert "field 'currency'" in text
        assert "'XYZ'" in text


def test_the_genai_prices_import_is_checked_by_the_same_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    imported = imported_module.read_genai_prices()
    assert imported.entries
    assert {entry.currency for entry in imported.entries} <= iso4217_codes()
    monkeypatch.setattr(imported_module, "_CURRENCY", "XYZ")
    with pytest.raises(PriceTableError, match="'XYZ'"):
        imported_module.read_genai_prices().toml()


# --------------------------------------------------------------------------- an empty table


def test_an_empty_table_loads_and_warns_once_that_nothing_will_be_priced(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    prices = tmp_path / "empty.toml"
    prices.write_text(EMPTY_TABLE)
    with caplog.at_level(logging.WARNING, logger="spanledger"):
        table = PriceTable.load(prices)
    assert table.entries == []
    warned = [r for r in caplog.records if r.name == "spanledger.ledger"]
    assert len(warned) == 1
    message = warned[0].getMessage()
    assert message.startswith("price_table_empty ")
    assert "\n" not in message
    assert str(prices) in message
    assert "no call will be priced" in message
    line = Ledger(table, warn=False).price(event())
    assert line.status is CostStatus.UNPRICED


def test_a_table_with_entries_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="spanledger"):
        PriceTable.from_dict({"prices": [{"provider": "jina", "model": "m", "per_request": 1}]})
    assert not [r for r in caplog.records if r.name.startswith("spanledger")]


@pytest.mark.parametrize("command", ["check", "report"])
def test_the_cli_says_an_empty_table_prices_nothing(tmp_path: Path, command: str) -> None:
    prices = tmp_path / "empty.toml"
    prices.write_text(EMPTY_TABLE)
    log = tmp_path / "events.jsonl"
    log.write_bytes(event_line(event()))
    argv = ["prices", "check", str(prices)]
    if command == "report":
        argv = ["report", str(log), "--prices", str(prices)]
    done = subprocess.run(
        [sys.executable, "-m", "spanledger.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "price_table_empty" in line]
    assert len(warnings) == 1, done.stderr
    assert str(prices) in warnings[0]
    assert "price_table_empty" not in done.stdout


if __name__ == "__main__":
    CODES_FILE.write_text(codes_file_text(), encoding="ascii")
    sys.stdout.write(f"wrote {len(pycountry_codes())} codes to {CODES_FILE}\n")
