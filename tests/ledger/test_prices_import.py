"""``spanledger prices import genai-prices``: a dated table of the embedding prices bundled in
genai-prices, read offline, that loads and passes ``prices check``; skips said on stderr; a
missing package or an unknown source is one line, never a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path

import genai_prices
import pytest
from genai_prices.data import providers as bundled
from genai_prices.types import (
    ClauseEquals,
    ClauseOr,
    ClauseStartsWith,
    ConditionalPrice,
    ModelInfo,
    ModelPrice,
    PriceVariant,
    Provider,
    StartDateConstraint,
    Tier,
    TieredPrices,
    TimeOfDateConstraint,
)

from spanledger.cli import main
from spanledger.ledger import PriceEntry, PriceTable
from spanledger.ledger.imported import LANGUAGE_MODEL_PROVIDERS, PROVIDERS, convert_genai_prices
from spanledger.wire.chat import CHAT_WIRES
from spanledger.wire.endpoints import Vendor

TODAY = date(2026, 12, 1)
VERSION = genai_prices.__version__


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def imported_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> PriceTable:
    status, _, _ = run(capsys, "prices", "import", "genai-prices", "--output", str(tmp_path / "t"))
    assert status == 0
    return PriceTable.load(tmp_path / "t")


def rate(table: PriceTable, provider: str, model: str) -> Decimal | None:
    entry = table.lookup(provider, model, datetime.now(UTC)).entry
    assert entry is not None, f"{provider}/{model} not in the table"
    return entry.input_per_mtok


def model(
    model_id: str,
    prices: ModelPrice | list[ConditionalPrice],
    *,
    name: str | None = None,
    price_variants: list[PriceVariant] | None = None,
) -> ModelInfo:
    return ModelInfo(
        id=model_id,
        match=ClauseEquals(equals=model_id),
        name=name,
        prices=prices,
        price_variants=price_variants,
    )


def provider(provider_id: str, *models: ModelInfo) -> Provider:
    return Provider(id=provider_id, name=provider_id, api_pattern="", models=list(models))


def midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


# The real bundled data


def test_the_real_data_gives_a_table_that_loads_with_known_embedding_prices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = imported_table(capsys, tmp_path)
    assert rate(table, "openai", "text-embedding-3-small") == Decimal("0.02")
    assert rate(table, "openai", "text-embedding-3-large") == Decimal("0.13")
    assert rate(table, "cohere", "embed-v4.0") == Decimal("0.12")
    assert rate(table, "voyageai", "voyage-3.5") == Decimal("0.06")
    # genai-prices matches ada-002 by the names OpenAI has answered with, too
    assert rate(table, "openai", "text-embedding-ada-002-v2") == Decimal("0.1")
    assert rate(table, "aws.bedrock", "amazon.titan-embed-text-v2:0") == Decimal("0.02")
    assert rate(table, "azure.ai.openai", "text-embedding-3-small") == Decimal("0.02")
    assert rate(table, "gcp.gemini", "gemini-embedding-001") == Decimal("0.15")
    assert rate(table, "mistral_ai", "mistral-embed") == Decimal("0.1")
    assert {entry.provider for entry in table.entries} == {
        "anthropic",
        "openai",
        "cohere",
        "voyageai",
        "aws.bedrock",
        "azure.ai.openai",
        "gcp.gemini",
        "mistral_ai",
    }
    assert table.currency == "USD"


def test_every_entry_is_dated_and_names_its_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = imported_table(capsys, tmp_path)
    today = datetime.now(UTC).date()
    for entry in table.entries:
        assert entry.checked == today, entry.label
        assert entry.note is not None
        assert entry.note.startswith(f"genai-prices {VERSION} (pydantic/genai-prices)")
        assert "import date" in entry.note
        assert entry.per_search_unit is None
        assert entry.per_request is None


def test_no_rerank_is_imported_and_a_chat_model_only_by_its_input_rate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = imported_table(capsys, tmp_path)
    names = {(entry.provider, entry.model): entry for entry in table.entries}
    assert not [name for name in names if "rerank" in name[1].lower()]
    # genai-prices' own chat and completion models of these providers (priced for output;
    # Mistral's embedding model carries an output rate too, which applies to nothing)
    chat = {
        (PROVIDERS[p.id], m.id): m.prices
        for p in bundled
        if p.id in PROVIDERS
        for m in p.models
        if isinstance(m.prices, ModelPrice)
        and isinstance(m.prices.input_mtok, Decimal)
        and getattr(m.prices, "output_mtok", None) is not None
        and "embed" not in m.id
    }
    assert ("openai", "gpt-4o") in chat
    assert ("cohere", "command-r") in chat
    for name, prices in chat.items():
        entry = names[name]
        assert entry.input_per_mtok == prices.input_mtok, name
        assert (entry.per_search_unit, entry.per_request, entry.input_per_kchar) == (None,) * 3
        assert "input rate only, for a prompt's context (" in (entry.note or ""), name
        assert "output_mtok" in (entry.note or ""), name  # said to be left out
    assert rate(table, "openai", "gpt-4o-mini") == Decimal("0.15")
    assert rate(table, "openai", "gpt-4o-mini-2024-07-18") == Decimal("0.15")  # an alias
    assert rate(table, "anthropic", "claude-3-5-haiku-latest") == Decimal("0.8")
    # a model with no token input (speech, transcription by the hour) is no language model
    for model_id in ("whisper-1", "tts-1"):
        assert ("openai", model_id) not in names, model_id


def test_a_tiered_input_rate_is_skipped_with_its_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "prices", "import", "genai-prices")
    assert status == 0
    table = PriceTable.from_dict(tomllib.loads(out))
    tiered = [
        f"{PROVIDERS.get(p.id) or LANGUAGE_MODEL_PROVIDERS[p.id]}/{m.id}"
        for p in bundled
        if p.id in PROVIDERS or p.id in LANGUAGE_MODEL_PROVIDERS
        for m in p.models
        if isinstance(m.prices, ModelPrice)
        and isinstance(m.prices.input_mtok, TieredPrices)
        and "embed" not in m.id
    ]
    assert tiered  # genai-prices 0.2.x tiers some long-context models
    [line] = [line for line in err.splitlines() if "language models, tiered pricing" in line]
    for label in tiered:
        assert label in line
        assert label.split("/", 1)[1] not in {entry.model for entry in table.entries}
    count = int(err.splitlines()[1].split()[0])
    assert err.splitlines()[1] == (
        f"{count} of them are language models' input rates, which price the context a prompt "
        "carried"
    )
    assert 0 < count < len(table.entries)


def test_providers_spanledger_does_not_know_are_skipped_and_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "prices", "import", "genai-prices")
    assert status == 0
    table = PriceTable.from_dict(tomllib.loads(out))
    per_provider: dict[str, int] = {}
    for entry in table.entries:
        per_provider[entry.provider] = per_provider.get(entry.provider, 0) + 1
    counts = ", ".join(f"{name} {count}" for name, count in sorted(per_provider.items()))
    lines = err.splitlines()
    assert lines[0] == f"wrote {len(table.entries)} entries ({counts}) from genai-prices {VERSION}"
    unknown = [line for line in lines if "of providers spanledger does not know" in line]
    assert len(unknown) == 1
    assert re.match(r"skipped \d+ embedding models of providers", unknown[0])
    for name in ("cloudflare", "perplexity"):  # they list embedding models too
        assert re.search(rf"[(, ]{name} \d+", unknown[0]), name
    for name in ("aws", "azure", "google", "mistral"):  # known now, as spanledger's own names
        assert not re.search(rf"[(, ]{name} \d+", unknown[0]), name
    known = {*PROVIDERS.values(), *LANGUAGE_MODEL_PROVIDERS.values()}
    assert not {entry.provider for entry in table.entries} - known
    # a chat model is no embedding model that was skipped: it is imported by its input rate
    assert "gpt-4o," not in err
    assert "command-r," not in err


def test_stdout_and_output_file_hold_the_same_table_and_it_passes_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, printed, _ = run(capsys, "prices", "import", "genai-prices")
    assert status == 0
    target = tmp_path / "imported.toml"
    status, out, err = run(capsys, "prices", "import", "genai-prices", "--output", str(target))
    assert status == 0
    assert out == ""
    assert f"to {target}" in err
    assert target.read_text(encoding="utf-8") == printed
    assert "Rerank prices are not in genai-prices' data and stay yours" in printed
    status, checked, _ = run(capsys, "prices", "check", str(target))
    assert status == 0
    entries = len(PriceTable.load(target).entries)
    assert checked == f"{target}: {entries} entries, valid\n"  # no overlap, nothing stale


# Conversion rules, on data built with genai-prices' own types


def test_rates_are_copied_exactly_not_through_float() -> None:
    fine = Decimal("0.0000001234567890123")  # float would turn this into ...89012299...
    data = [provider("openai", model("text-embedding-x", ModelPrice(input_mtok=fine)))]
    imported = convert_genai_prices(data, version="9", today=TODAY)
    assert 'input_per_mtok = "0.0000001234567890123"' in imported.toml()
    assert imported.entries[0].input_per_mtok == fine
    assert imported.entries[0].checked == TODAY


def test_start_dates_become_validity_windows(tmp_path: Path) -> None:
    prices = [
        ConditionalPrice(prices=ModelPrice(input_mtok=Decimal("0.2"))),
        ConditionalPrice(
            constraint=StartDateConstraint(start_date=date(2025, 1, 1)),
            prices=ModelPrice(input_mtok=Decimal("0.1")),
        ),
        ConditionalPrice(  # the same rate again: no new window
            constraint=StartDateConstraint(start_date=date(2025, 6, 1)),
            prices=ModelPrice(input_mtok=Decimal("0.1")),
        ),
        ConditionalPrice(
            constraint=StartDateConstraint(start_date=date(2026, 3, 1)),
            prices=ModelPrice(input_mtok=Decimal("0.05")),
        ),
    ]
    data = [provider("cohere", model("embed-z", prices))]
    path = tmp_path / "windows.toml"
    path.write_text(convert_genai_prices(data, version="9", today=TODAY).toml())
    table = PriceTable.load(path)
    windows = [(e.valid_from, e.valid_until, e.input_per_mtok) for e in table.entries]
    assert windows == [
        (None, midnight(date(2025, 1, 1)), Decimal("0.2")),
        (midnight(date(2025, 1, 1)), midnight(date(2026, 3, 1)), Decimal("0.1")),
        (midnight(date(2026, 3, 1)), None, Decimal("0.05")),
    ]
    assert "valid_from = 2025-01-01" in path.read_text()


def test_prices_that_cannot_be_held_are_skipped_with_their_reason() -> None:
    tiered = TieredPrices(base=Decimal("0.1"), tiers=[Tier(start=100_000, price=Decimal("0.2"))])
    off_peak = ConditionalPrice(
        constraint=TimeOfDateConstraint(start_time=time(16, 30), end_time=time(0, 30)),
        prices=ModelPrice(input_mtok=Decimal("0.05")),
    )
    data = [
        provider(
            "voyageai",
            model("voyage-tiered", ModelPrice(input_mtok=tiered)),
            model("voyage-night", [ConditionalPrice(prices=ModelPrice()), off_peak]),
            model("voyage-cached", ModelPrice(input_mtok=Decimal(1), cache_read_mtok=Decimal(0))),
            model("voyage-unpriced", ModelPrice()),
            model("voyage-fine", ModelPrice(input_mtok=Decimal("0.06"))),
        )
    ]
    imported = convert_genai_prices(data, version="9", today=TODAY)
    assert [entry.model for entry in imported.entries] == ["voyage-fine"]
    assert imported.skipped == {
        "tiered pricing": ["voyageai/voyage-tiered"],
        "time-of-day pricing": ["voyageai/voyage-night"],
        "rates besides input tokens (cache_read_mtok)": ["voyageai/voyage-cached"],
        "no input-token price": ["voyageai/voyage-unpriced"],
    }


def test_embedding_models_are_known_by_name_and_rerankers_never_are() -> None:
    cheap = ModelPrice(input_mtok=Decimal("0.01"))
    data = [
        provider(
            "openai",
            model("text-embedding-9", cheap),
            model("gpt-9", ModelPrice(input_mtok=Decimal(1), output_mtok=Decimal(2))),
            model("audio-9", cheap, name="Audio 9"),
        ),
        provider("cohere", model("rerank-v9", cheap), model("embed-rerank-v9", cheap)),
        provider("voyageai", model("voyage-9", cheap), model("rerank-9", cheap)),
        provider("acme", model("acme-embed", cheap), model("acme-large", cheap)),
    ]
    imported = convert_genai_prices(data, version="9", today=TODAY)
    assert [e.label for e in imported.entries] == [
        "openai/audio-9",  # priced by input tokens, named no embedding model: a language model
        "openai/gpt-9",
        "openai/text-embedding-9",
        "voyageai/voyage-9",
    ]
    assert imported.language_models == 2
    assert imported.unknown_providers == {"acme": 1}
    assert imported.skipped == {}  # gpt-9 and audio-9 were never taken for embedding models
    assert imported.skipped_language_models == {}


def test_aliases_are_exact_names_and_a_models_own_name_wins() -> None:
    cheap = ModelPrice(input_mtok=Decimal("0.01"))
    aliased = ModelInfo(
        id="text-embedding-a",
        match=ClauseOr(
            or_=[
                ClauseEquals(equals="text-embedding-a"),
                ClauseEquals(equals="text-embedding-a-v2"),
                ClauseEquals(equals="text-embedding-b"),  # another model's own name
                ClauseStartsWith(starts_with="text-embedding-a-"),  # a pattern, not a name
            ]
        ),
        prices=cheap,
    )
    data = [
        provider("openai", aliased, model("text-embedding-b", ModelPrice(input_mtok=Decimal(1))))
    ]
    imported = convert_genai_prices(data, version="9", today=TODAY)
    found = {e.model: (e.input_per_mtok, e.note) for e in imported.entries}
    assert set(found) == {"text-embedding-a", "text-embedding-a-v2", "text-embedding-b"}
    assert found["text-embedding-b"][0] == Decimal(1)
    assert (found["text-embedding-a-v2"][1] or "").endswith("; alias of text-embedding-a")


def test_request_variants_are_left_out_and_said_so() -> None:
    batch = PriceVariant(when={"processing": "batch"}, prices=ModelPrice(input_mtok=Decimal("1")))
    data = [
        provider(
            "openai",
            model("text-embedding-v", ModelPrice(input_mtok=Decimal(2)), price_variants=[batch]),
        )
    ]
    [entry] = convert_genai_prices(data, version="9", today=TODAY).entries
    assert entry.input_per_mtok == Decimal(2)
    assert (entry.note or "").endswith("; standard rate (processing=batch rates not imported)")


def test_odd_model_names_round_trip_through_the_toml(tmp_path: Path) -> None:
    name = 'embed "quoted" \\ back\tslash é \x7f'
    data = [provider("cohere", model(name, ModelPrice(input_mtok=Decimal("3"))))]
    path = tmp_path / "odd.toml"
    path.write_text(convert_genai_prices(data, version="9", today=TODAY).toml(), encoding="utf-8")
    assert [entry.model for entry in PriceTable.load(path).entries] == [name]


def test_provider_ids_are_spanledgers_own() -> None:
    assert set(PROVIDERS.values()) <= {vendor.value for vendor in Vendor}
    # a provider taken for its language models only is one whose chat wire spanledger reads
    assert set(LANGUAGE_MODEL_PROVIDERS.values()) <= {wire.provider for wire in CHAT_WIRES}
    assert {"openai", "cohere", "voyageai"} <= {p.id for p in bundled}


def test_an_entry_is_a_price_entry_as_the_table_reads_it() -> None:
    data = [provider("openai", model("text-embedding-q", ModelPrice(input_mtok=Decimal("0.5"))))]
    [entry] = convert_genai_prices(data, version="1.0", today=TODAY).entries
    assert entry == PriceEntry(
        provider="openai",
        model="text-embedding-q",
        currency="USD",
        input_per_mtok=Decimal("0.5"),
        checked=TODAY,
        note="genai-prices 1.0 (pydantic/genai-prices); checked is the import date "
        "(the data has none)",
    )


# Failures: one line, no traceback


def test_without_genai_prices_one_sentence_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    target = tmp_path / "never.toml"
    status, out, err = run(capsys, "prices", "import", "genai-prices", "--output", str(target))
    assert status == 1
    assert out == ""
    assert err == (
        "error: genai-prices is not installed; install it with: "
        "pip install 'spanledger[genai-prices]'\n"
    )
    assert not target.exists()


def test_a_genai_prices_without_its_bundled_data_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices.data", None)
    status, out, err = run(capsys, "prices", "import", "genai-prices")
    assert (status, out) == (1, "")
    assert err == (
        f"error: genai-prices {VERSION} has no bundled price data where spanledger reads it "
        "(genai_prices.data, as in genai-prices 0.2.x)\n"
    )


def test_an_unknown_source_is_a_usage_error_naming_the_accepted_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["prices", "import", "litellm"])
    assert status == 1  # a usage error: one line, status 1 (tests/reliability/test_usage_errors)
    err = capsys.readouterr().err
    assert "invalid choice: 'litellm' (choose from 'genai-prices')" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_an_unwritable_output_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "missing" / "prices.toml"
    status, out, err = run(capsys, "prices", "import", "genai-prices", "--output", str(target))
    assert (status, out) == (1, "")
    assert err == f"error: {target}: No such file or directory\n"


def test_import_spanledger_and_its_command_line_do_not_load_genai_prices() -> None:
    code = (
        "import sys, spanledger, spanledger.cli, spanledger.ledger, spanledger.reporting; "
        "spanledger.cli._parser().parse_args(['prices', 'import', 'genai-prices']); "
        "print('genai_prices' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
