"""A price table names providers by the ids events carry: a name that is none of them would
price nothing, so it is refused with the id it was probably meant to be, unless the table
declares it as a provider of the user's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanledger.chains import BM25Step
from spanledger.chains.steps import as_step
from spanledger.cli import main
from spanledger.ledger import PriceTable, PriceTableError
from spanledger.provider_ids import ALIASES, PROVIDER_IDS, canonical, nearest
from spanledger.wire.chat import CHAT_ONLY_PROVIDERS
from spanledger.wire.endpoints import Vendor


def test_the_ids_are_every_vendor_chat_provider_and_chain_step() -> None:
    function = as_step(lambda query, documents: list(documents))
    assert function is not None
    steps = {BM25Step().provider, function.provider}
    assert set(Vendor) | set(CHAT_ONLY_PROVIDERS) | steps == PROVIDER_IDS
    assert set(ALIASES.values()) <= PROVIDER_IDS
    assert not set(ALIASES) & PROVIDER_IDS


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("open-ai", "openai"),
        ("OpenAI", "openai"),
        ("bedrock", "aws.bedrock"),
        ("mistral", "mistral_ai"),
        ("voyage", "voyageai"),
        ("coher", "cohere"),
        ("google_vertexai", "gcp.vertex_ai"),
    ],
)
def test_an_unknown_provider_is_refused_with_the_id_it_was_meant_to_be(
    written: str, meant: str
) -> None:
    rows = [
        {"provider": "cohere", "model": "embed-v4.0", "input_per_mtok": "0.12"},
        {"provider": written, "model": "m", "input_per_mtok": "0.02"},
    ]
    with pytest.raises(PriceTableError) as caught:
        PriceTable.from_dict({"prices": rows}, source="prices.toml")
    message = str(caught.value)
    assert message.startswith(f"prices.toml: prices[1] ({written}/m): provider {written!r} ")
    assert f"Did you mean {meant!r}?" in message
    assert "custom_providers" in message


def test_a_name_far_from_every_id_gets_no_guess() -> None:
    with pytest.raises(PriceTableError) as caught:
        PriceTable.from_dict({"prices": [{"provider": "zzzz", "model": "m", "per_request": 1}]})
    assert "Did you mean" not in str(caught.value)
    assert nearest("zzzz") is None


def test_declared_providers_of_your_own_are_priced() -> None:
    table = PriceTable.from_dict(
        {
            "custom_providers": ["acme"],
            "prices": [{"provider": "acme", "model": "m", "per_request": "0.5"}],
        }
    )
    assert [entry.provider for entry in table.entries] == ["acme"]


@pytest.mark.parametrize(
    ("declared", "fault"),
    [(["openai"], "records already"), ("acme", "must be a list"), ([""], "non-empty strings")],
)
def test_a_bad_declaration_is_refused_by_name(declared: object, fault: str) -> None:
    rows = [{"provider": "cohere", "model": "m", "per_request": "1"}]
    with pytest.raises(PriceTableError, match=fault) as caught:
        PriceTable.from_dict({"custom_providers": declared, "prices": rows})
    assert "custom_providers" in str(caught.value)


def test_prices_check_names_the_mistake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        '[[prices]]\nprovider = "open-ai"\nmodel = "text-embedding-3-small"\n'
        'input_per_mtok = "0.02"\n',
        encoding="utf-8",
    )
    assert main(["prices", "check", str(path)]) == 1
    said = capsys.readouterr()
    assert "provider 'open-ai' is not one spanledger records" in said.out + said.err
    assert "Did you mean 'openai'?" in said.out + said.err
    path.write_text(
        'custom_providers = ["open-ai"]\n' + path.read_text(encoding="utf-8"), encoding="utf-8"
    )
    assert main(["prices", "check", str(path)]) == 0


def test_a_framework_s_own_name_reads_as_the_id() -> None:
    assert canonical("amazon_bedrock") == "aws.bedrock"
    assert canonical("Mistral-AI") == "mistral_ai"
    assert canonical("acme") is None
