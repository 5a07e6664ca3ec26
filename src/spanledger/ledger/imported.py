"""A dated price table made from genai-prices' bundled data (``spanledger prices import``).

genai-prices (pydantic/genai-prices) ships its price data inside the package, so the import
reads it offline and never fetches. Two kinds of model of the providers spanledger knows are
kept. Embedding models, priced whole: genai-prices has no rerank prices, and a price that
spanledger's table cannot hold exactly (tiers, time-of-day rates, rates besides input tokens)
is skipped with its reason rather than approximated; an output-token rate is the one exception
(an embedding call has no output tokens, so that rate applies to nothing and is left out, and
said so in the note). And language models, by their input-token rate only: that rate prices
the context a prompt carried (``RequestReport.context_spend``); their output, cache and other
rates price nothing spanledger records and are left out (said so in the note), while an input
rate the table cannot hold exactly (tiered) is skipped with its reason. Rates are copied as
``Decimal``, never through ``float``.

``import spanledger`` never loads genai-prices: it is imported inside ``read_genai_prices``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING

from spanledger.errors import ConfigurationError
from spanledger.ledger.prices import PriceEntry, PriceTable, PriceTableError

if TYPE_CHECKING:
    from genai_prices.types import ConditionalPrice, MatchLogic, ModelInfo, ModelPrice, Provider

__all__ = [
    "LANGUAGE_MODEL_PROVIDERS",
    "PROVIDERS",
    "Imported",
    "convert_genai_prices",
    "is_embedding",
    "is_language_model",
    "read_genai_prices",
]

PROVIDERS: Mapping[str, str] = {
    "openai": "openai",
    "cohere": "cohere",
    "voyageai": "voyageai",
    "aws": "aws.bedrock",
    "bedrock": "aws.bedrock",
    "google": "gcp.gemini",
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "azure": "azure.ai.openai",
    "mistral": "mistral_ai",
}
"""genai-prices provider id -> spanledger provider id (``Vendor``). genai-prices 0.2.x names
AWS Bedrock ``aws`` and the Gemini API ``google``, and has no provider of its own for Vertex AI;
``bedrock``, ``gemini`` and ``vertex`` are taken too, should a version name them so. When two
ids map to one provider, the first listed wins a model both list. Jina, TEI and Ollama have no
counterpart in genai-prices (TEI and Ollama are self-hosted); every other provider is
skipped."""

LANGUAGE_MODEL_PROVIDERS: Mapping[str, str] = {"anthropic": "anthropic"}
"""genai-prices provider id -> spanledger provider id, for providers whose language models
spanledger reads the answers of (the chat wires) but records no embedding or rerank call of;
their language models' input rates are imported beside ``PROVIDERS``' own."""

INSTALL_HINT = (
    "genai-prices is not installed; install it with: pip install 'spanledger[genai-prices]'"
)
_CURRENCY = "USD"  # genai-prices prices everything in US dollars
_RATE_KEY = "input_mtok"  # genai-prices' input-token price, per million tokens
_OUTPUT_KEY = "output_mtok"  # applies to no embedding call: embeddings have no output tokens
_INPUT_ONLY = "; input rate only, for a prompt's context"
"""The note on a language model's entry (followed by the rates left out)."""


@dataclass
class Imported:
    """What an import produced: the entries, and what was left out and why."""

    source: str
    """``genai-prices 0.2.3``: the package and version the prices came from."""
    checked: date
    entries: list[PriceEntry] = field(default_factory=list)
    unknown_providers: dict[str, int] = field(default_factory=dict)
    """Embedding models skipped per genai-prices provider that spanledger does not know."""
    skipped: dict[str, list[str]] = field(default_factory=dict)
    """Reason -> ``provider/model`` labels of embedding models that could not be imported."""
    language_models: int = 0
    """Entries that are language models' input rates (the rest are embedding models')."""
    skipped_language_models: dict[str, list[str]] = field(default_factory=dict)
    """Reason -> ``provider/model`` labels of language models whose input rate could not be
    imported."""

    def toml(self) -> str:
        """The table as TOML, checked to read back through ``PriceTable`` as these entries."""
        lines = [
            f"# spanledger price table imported from {self.source} (pydantic/genai-prices)",
            f"# on {self.checked.isoformat()} by `spanledger prices import genai-prices`.",
            "#",
            "# Embedding models, and language models' input rates (what the context a prompt",
            "# carried cost; their output and cache rates are not imported). input_per_mtok is",
            "# genai-prices' input price per million tokens, copied exactly. 'checked' is the",
            "# date of this import: genai-prices' data carries no date of its own, so check the",
            "# vendor's pricing page before billing.",
            "# Rerank prices are not in genai-prices' data and stay yours: add your rerank",
            "# entries (per_search_unit, input_per_mtok or per_request) to this table, or",
            "# spanledger reports rerank calls as unpriced. Re-running the import with --output",
            "# replaces this file, so keep a copy of any entry you add.",
            "",
            f'currency = "{_CURRENCY}"',
        ]
        for entry in self.entries:
            lines.extend(["", *_entry_lines(entry)])
        text = "\n".join(lines) + "\n"
        _check_reads_back(text, self.entries)
        return text


def read_genai_prices(today: date | None = None) -> Imported:
    """Import the embedding prices bundled in the installed genai-prices (offline).

    Raises ``ConfigurationError`` when genai-prices is missing or its data is not in the
    shape this reads (0.2.x)."""
    try:
        import genai_prices
    except ModuleNotFoundError as error:
        if error.name == "genai_prices":
            raise ConfigurationError(INSTALL_HINT) from None
        raise ConfigurationError(
            f"genai-prices is installed but cannot be imported (no module named "
            f"{error.name!r}); reinstall it with: pip install 'spanledger[genai-prices]'"
        ) from None
    version = str(getattr(genai_prices, "__version__", "?"))
    try:
        from genai_prices.data import providers
    except ImportError:
        raise ConfigurationError(
            f"genai-prices {version} has no bundled price data where spanledger reads it "
            "(genai_prices.data, as in genai-prices 0.2.x)"
        ) from None
    try:
        return convert_genai_prices(providers, version=version, today=today)
    except (AttributeError, TypeError) as error:
        raise ConfigurationError(
            f"genai-prices {version}'s data is not in the shape spanledger reads "
            f"(genai-prices 0.2.x): {type(error).__name__}"
        ) from None


def convert_genai_prices(
    providers: Iterable[Provider], *, version: str, today: date | None = None
) -> Imported:
    """The price entries for genai-prices' embedding models of the providers in ``PROVIDERS``,
    and the input rates of their language models (and of ``LANGUAGE_MODEL_PROVIDERS``').

    ``checked`` is ``today`` (UTC by default): genai-prices' data has no date of its own."""
    checked = today if today is not None else datetime.now(UTC).date()
    source = f"genai-prices {version}"
    note = f"{source} (pydantic/genai-prices); checked is the import date (the data has none)"
    imported = Imported(source=source, checked=checked)
    taken_by_target: dict[str, set[str]] = {}
    for provider in providers:
        target = PROVIDERS.get(provider.id)
        embeddings = [model for model in provider.models if is_embedding(provider.id, model)]
        if target is None and embeddings:
            imported.unknown_providers[provider.id] = len(embeddings)
        ids = {model.id for model in provider.models}  # a model's own name beats an alias
        if target is not None:
            taken = taken_by_target.setdefault(target, set())
            for model in embeddings:
                _take(imported, model, target, _windows(model, _rate), ids, taken, note)
        target = target or LANGUAGE_MODEL_PROVIDERS.get(provider.id)
        if target is None:
            continue
        taken = taken_by_target.setdefault(target, set())
        for model in provider.models:
            if is_language_model(provider.id, model):
                windows = _windows(model, _input_rate)
                _take(imported, model, target, windows, ids, taken, note, language=True)
    imported.entries.sort(key=lambda e: (e.provider, e.model, e.valid_from or _EARLIEST))
    return imported


def _take(
    imported: Imported,
    model: ModelInfo,
    target: str,
    found: tuple[list[_Window], str | None],
    ids: set[str],
    taken: set[str],
    note: str,
    *,
    language: bool = False,
) -> None:
    """Add the model's entries under ``target`` (its own name and its aliases), or say why
    it was skipped."""
    windows, reason = found
    if reason is None and model.id in taken:
        reason = "listed twice"
    if reason is not None:
        skipped = imported.skipped_language_models if language else imported.skipped
        skipped.setdefault(reason, []).append(f"{target}/{model.id}")
        return
    aliases = [name for name in _aliases(model.match) if name not in ids | taken]
    extra = (_left_out_note(model) if language else _output_note(model)) + _variants_note(model)
    for name in [model.id, *dict.fromkeys(aliases)]:
        taken.add(name)
        alias = f"; alias of {model.id}" if name != model.id else ""
        entries = [
            PriceEntry(
                provider=target,
                model=name,
                currency=_CURRENCY,
                input_per_mtok=rate,
                valid_from=_moment(start),
                valid_until=_moment(end),
                checked=imported.checked,
                note=note + alias + extra,
            )
            for start, end, rate in windows
        ]
        imported.entries.extend(entries)
        if language:
            imported.language_models += len(entries)


def is_embedding(provider_id: str, model: ModelInfo) -> bool:
    """genai-prices has no model-kind field, so embedding models are known by name: ``embed``
    in the id or name (``text-embedding-3-small``, ``embed-v4.0``), or Voyage's ``voyage-*``
    (genai-prices' voyageai provider lists text embedding models only). Never a reranker."""
    words = f"{model.id} {model.name or ''}".lower()
    if "rerank" in words:
        return False
    return "embed" in words or (provider_id == "voyageai" and model.id.startswith("voyage-"))


_EARLIEST = datetime.min.replace(tzinfo=UTC)
_Window = tuple[date | None, date | None, Decimal]


_RateOf = Callable[["ModelPrice"], tuple[Decimal | None, str | None]]


def _windows(model: ModelInfo, rate_of: _RateOf) -> tuple[list[_Window], str | None]:
    """The model's input rate over time as ``(valid_from, valid_until, rate)`` (each period's
    rate read by ``rate_of``), or why it cannot be imported. genai-prices' conditional prices
    use the last one whose start date has passed (the first when none has); adjacent periods
    at one rate are merged."""
    from genai_prices.types import ModelPrice, StartDateConstraint

    prices = model.prices
    if isinstance(prices, ModelPrice):
        rate, reason = rate_of(prices)
        return ([(None, None, rate)] if rate is not None else []), reason
    if not prices:
        return [], "no price"
    if any(
        c.constraint is not None and not isinstance(c.constraint, StartDateConstraint)
        for c in prices
    ):
        return [], "time-of-day pricing"
    starts = sorted(
        {c.constraint.start_date for c in prices if isinstance(c.constraint, StartDateConstraint)}
    )
    edges: list[date | None] = [None, *starts]
    windows: list[_Window] = []
    for index, start in enumerate(edges):
        end = edges[index + 1] if index + 1 < len(edges) else None
        rate, reason = rate_of(_in_force(prices, start))
        if rate is None:
            return [], reason
        if windows and windows[-1][2] == rate:
            windows[-1] = (windows[-1][0], end, rate)
        else:
            windows.append((start, end, rate))
    return windows, None


def _in_force(prices: Sequence[ConditionalPrice], moment: date | None) -> ModelPrice:
    """The conditional price genai-prices uses from ``moment`` on (``None``: before any start
    date): the last whose constraint is absent or has started, else the first."""
    from genai_prices.types import StartDateConstraint

    for conditional in reversed(prices):
        constraint = conditional.constraint
        if constraint is None:
            return conditional.prices
        if (
            isinstance(constraint, StartDateConstraint)
            and moment is not None
            and constraint.start_date <= moment
        ):
            return conditional.prices
    return prices[0].prices


def _rate(prices: ModelPrice) -> tuple[Decimal | None, str | None]:
    """The input rate per million tokens, or why there is none spanledger can hold."""
    rates = {k: v for k, v in vars(prices).items() if not k.startswith("_") and v is not None}
    value = rates.pop(_RATE_KEY, None)
    rates.pop(_OUTPUT_KEY, None)
    if rates:
        return None, f"rates besides input tokens ({', '.join(sorted(rates))})"
    if value is None:
        return None, "no input-token price"
    if not isinstance(value, Decimal):
        return None, "tiered pricing" if hasattr(value, "tiers") else "unreadable price"
    if not value.is_finite() or value < 0:
        return None, "unreadable price"
    return value, None


def _input_rate(prices: ModelPrice) -> tuple[Decimal | None, str | None]:
    """A language model's input rate per million tokens alone (its other rates price nothing
    spanledger records), or why there is none spanledger can hold."""
    value = prices.input_mtok
    if value is None:
        return None, "no input-token price"
    if not isinstance(value, Decimal):
        return None, "tiered pricing" if hasattr(value, "tiers") else "unreadable price"
    if not value.is_finite() or value < 0:
        return None, "unreadable price"
    return value, None


def is_language_model(provider_id: str, model: ModelInfo) -> bool:
    """A model priced by its input tokens that is neither an embedding model nor a
    reranker: a chat or completion model, whose input rate prices a prompt's context."""
    from genai_prices.types import ModelPrice

    if is_embedding(provider_id, model) or "rerank" in f"{model.id} {model.name or ''}".lower():
        return False
    prices = model.prices
    listed = [prices] if isinstance(prices, ModelPrice) else [c.prices for c in prices]
    return any(price.input_mtok is not None for price in listed)


def _left_out_note(model: ModelInfo) -> str:
    """The language model's note: only its input rate was taken, and which rates were not."""
    from genai_prices.types import ModelPrice

    prices = model.prices
    listed = [prices] if isinstance(prices, ModelPrice) else [c.prices for c in prices]
    others = sorted(
        {
            name
            for price in listed
            for name, value in vars(price).items()
            if not name.startswith("_") and value is not None and name != _RATE_KEY
        }
    )
    return _INPUT_ONLY + (f" ({', '.join(others)} not imported)" if others else "")


def _aliases(match: MatchLogic) -> list[str]:
    """Exact names genai-prices matches the model by: its ``equals`` clauses, alone or in an
    ``or`` (patterns such as ``starts_with`` are not names and are left out)."""
    from genai_prices.types import ClauseEquals, ClauseOr

    if isinstance(match, ClauseEquals):
        return [match.equals]
    if isinstance(match, ClauseOr):
        return [name for clause in match.or_ for name in _aliases(clause)]
    return []


def _output_note(model: ModelInfo) -> str:
    """A note that the model's output-token rate was left out, if it has one."""
    from genai_prices.types import ModelPrice

    prices = model.prices
    listed = [prices] if isinstance(prices, ModelPrice) else [c.prices for c in prices]
    if any(getattr(price, _OUTPUT_KEY, None) is not None for price in listed):
        return f"; its {_OUTPUT_KEY} rate is left out (an embedding call has no output tokens)"
    return ""


def _variants_note(model: ModelInfo) -> str:
    """A note that request-specific rates (batch, service tiers) were left out, if any."""
    kinds = sorted(
        {f"{k}={v}" for variant in model.price_variants or () for k, v in variant.when.items()}
    )
    return f"; standard rate ({', '.join(kinds)} rates not imported)" if kinds else ""


def _moment(day: date | None) -> datetime | None:
    return datetime.combine(day, time.min, tzinfo=UTC) if day is not None else None


def _entry_lines(entry: PriceEntry) -> list[str]:
    lines = [
        "[[prices]]",
        f"provider = {_string(entry.provider)}",
        f"model = {_string(entry.model)}",
    ]
    if entry.input_per_mtok is not None:
        lines.append(f"input_per_mtok = {_string(format(entry.input_per_mtok, 'f'))}")
    for name, moment in (("valid_from", entry.valid_from), ("valid_until", entry.valid_until)):
        if moment is not None:
            lines.append(f"{name} = {_when(moment)}")
    if entry.checked is not None:
        lines.append(f"checked = {entry.checked.isoformat()}")
    if entry.note is not None:
        lines.append(f"note = {_string(entry.note)}")
    return lines


def _when(moment: datetime) -> str:
    """A TOML date when the moment is midnight UTC (as genai-prices' start dates are), else
    an offset date-time."""
    utc = moment.astimezone(UTC)
    if utc.time() == time.min:
        return utc.date().isoformat()
    return utc.isoformat().replace("+00:00", "Z")


def _string(text: str) -> str:
    """A TOML basic string: quote, backslash and control characters escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _check_reads_back(text: str, entries: list[PriceEntry]) -> None:
    """Refuse to hand out a table that would not load as exactly these entries."""
    table = PriceTable.from_dict(tomllib.loads(text), source="the imported table")
    if table.entries != entries:
        raise PriceTableError("the imported table does not read back as written")
