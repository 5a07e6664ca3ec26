"""``spanledger export`` writes exactly the columns and types ``export_schema`` declares, in
every file, whatever the log holds (events and attribution records, events only, records only,
nothing readable); both tables always exist, with a partition for every day either has rows
on; amounts come back as the exact strings the log holds; and the Fleet reports guide lists
the declared columns and types, so a rename or a type change without the docs fails here."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from spanledger.costs import CostLine, CostStatus
from spanledger.eventlog import event_line
from spanledger.events import AttributionRecord, RerankUsage
from spanledger.fleet.export import export_parquet
from spanledger.fleet.export_schema import ATTRIBUTION, EVENTS, PARTITION, TABLES
from tests.ledger.conftest import REPO_ROOT, embedding_event, rerank_event

DAY = datetime(2026, 11, 3, 1, tzinfo=UTC)
NEXT_DAY = DAY + timedelta(days=1)
COST = Decimal("0.000000000000000000123")  # 21 places: more than a DECIMAL(38, 18) keeps
PER_TOKEN = Decimal("0.000004285714285714285714285714286")
GUIDE = REPO_ROOT / "docs" / "guides" / "fleet-reports.md"

EVENT_LINES = event_line(
    embedding_event(
        tokens=5,
        started_at=DAY,
        request_id="turn-1",
        cost=CostLine(CostStatus.PRICED, COST, "USD", price_entry="openai/text-embedding"),
    )
) + event_line(rerank_event(usage=RerankUsage(search_units=1), started_at=NEXT_DAY))
RECORD_LINE = event_line(
    AttributionRecord(
        request_id="turn-1",
        at=DAY + timedelta(minutes=1),
        frames_served=3,
        frames_rendered=2,
        frames_cited=1,
        rendered_tokens=14,
        cited_tokens=7,
        uncited_rendered_tokens=7,
        cited_token_share=0.5,
        reconcilable=True,
        calls=1,
        billed_input_tokens=5,
        billed_search_units=0,
        calls_without_usage=0,
        spend=Decimal("0.00003"),
        currency="USD",
        spend_complete=True,
        spend_per_cited_token=PER_TOKEN,
        model_calls=1,
        quoted_tokens=0,
        cited_by={"provider_citation": 1},
        capture_cut={"frames": 2},
    )
)


@pytest.fixture
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    found = duckdb.connect()
    yield found
    found.close()


def columns(connection: duckdb.DuckDBPyConnection, files: str, hive: bool) -> list[tuple[str, str]]:
    """The (name, type) of each column DuckDB reads from ``files``."""
    described = connection.execute(
        f"DESCRIBE SELECT * FROM read_parquet('{files}', hive_partitioning = {hive})"
    ).fetchall()
    return [(str(name), str(kind)) for name, kind, *_ in described]


def export(tmp_path: Path, lines: bytes, since: datetime | None = None) -> Path:
    log = tmp_path / "logs" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(lines)
    target = tmp_path / "parquet"
    export_parquet([log], target, since=since)
    return target


def days_of(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


@pytest.mark.parametrize(
    ("lines", "rows"),
    [
        pytest.param(EVENT_LINES + RECORD_LINE, {"events": 2, "attribution": 1}, id="both"),
        pytest.param(EVENT_LINES, {"events": 2, "attribution": 0}, id="no-attribution"),
        pytest.param(RECORD_LINE, {"events": 0, "attribution": 1}, id="no-events"),
    ],
)
def test_every_file_holds_exactly_the_declared_columns_and_types(
    tmp_path: Path,
    connection: duckdb.DuckDBPyConnection,
    lines: bytes,
    rows: Mapping[str, int],
) -> None:
    target = export(tmp_path, lines)
    covered = ["day=2026-11-03", "day=2026-11-04"] if rows["events"] else ["day=2026-11-03"]
    for table, declared in TABLES.items():
        assert days_of(target / table) == covered, table
        files = sorted((target / table).rglob("*.parquet"))
        assert len(files) == len(covered)
        for file in files:
            assert columns(connection, str(file), hive=False) == list(declared.items()), file
        pattern = f"{target}/{table}/**/*.parquet"
        assert columns(connection, pattern, hive=True) == [*declared.items(), PARTITION]
        [(count,)] = connection.execute(
            f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning = true)"
        ).fetchall()
        assert count == rows[table], table


@pytest.mark.parametrize(
    ("since", "day"),
    [(DAY, "day=2026-11-03"), (datetime(2026, 11, 5, 23, 30), "day=2026-11-05")],
    ids=["since", "since-naive-is-utc"],
)
def test_an_export_that_finds_nothing_writes_both_tables_empty_on_the_since_day(
    tmp_path: Path, connection: duckdb.DuckDBPyConnection, since: datetime, day: str
) -> None:
    target = export(tmp_path, b"not json\n", since=since)
    for table, declared in TABLES.items():
        assert days_of(target / table) == [day]
        pattern = f"{target}/{table}/**/*.parquet"
        assert columns(connection, pattern, hive=True) == [*declared.items(), PARTITION]
        assert connection.execute(f"SELECT * FROM read_parquet('{pattern}')").fetchall() == []


def test_without_since_the_empty_tables_go_under_the_day_of_the_export(tmp_path: Path) -> None:
    before = datetime.now(UTC).date()
    target = export(tmp_path, b"")
    after = datetime.now(UTC).date()
    for table in TABLES:
        [folder] = days_of(target / table)
        assert date.fromisoformat(folder.removeprefix("day=")) in {before, after}


def test_amounts_and_maps_come_back_exactly_as_the_log_holds_them(
    tmp_path: Path, connection: duckdb.DuckDBPyConnection
) -> None:
    target = export(tmp_path, EVENT_LINES + RECORD_LINE)
    [(amount, currency, entry)] = connection.execute(
        "SELECT cost_amount, cost_currency, price_entry FROM "
        f"read_parquet('{target}/events/**/*.parquet') WHERE cost_amount IS NOT NULL"
    ).fetchall()
    assert (amount, currency, entry) == (f"{COST:f}", "USD", "openai/text-embedding")
    assert Decimal(amount) == COST
    [record] = connection.execute(
        'SELECT spend, spend_per_cited_token, cited_by, capture_cut, "at", day FROM '
        f"read_parquet('{target}/attribution/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert record == (
        "0.00003",
        f"{PER_TOKEN:f}",
        {"provider_citation": 1},
        {"frames": 2},
        DAY + timedelta(minutes=1),
        date(2026, 11, 3),
    )


# --------------------------------------------------------------------------- the guide


def export_section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("## `spanledger export`\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def table_after(section: str, heading: str) -> list[list[str]]:
    """The body rows of the first Markdown table after ``heading``, each a list of cells
    with their backticks taken off."""
    after = section[section.index(heading + "\n") + len(heading) :].splitlines()
    start = next(i for i, line in enumerate(after) if line.startswith("|"))
    lines = []
    for line in after[start:]:
        if not line.startswith("|"):
            break
        lines.append(line)
    assert len(lines) > 2, f"no table after {heading!r}"
    return [
        [re.sub(r"^`(.*)`$", r"\1", cell.strip()) for cell in line.strip("|").split(" | ")]
        for line in lines[2:]
    ]


@pytest.mark.parametrize(("table", "declared"), [("events", EVENTS), ("attribution", ATTRIBUTION)])
def test_the_guide_lists_exactly_the_declared_columns_and_types(
    table: str, declared: Mapping[str, str]
) -> None:
    rows = table_after(export_section(), f"### The `{table}` table")
    assert [(column, kind) for column, kind, _ in rows] == [*declared.items(), PARTITION]
    assert all(meaning.strip() for *_, meaning in rows)


def test_the_guide_says_what_each_type_is_in_parquet_and_spark() -> None:
    rows = table_after(export_section(), "### Types in Parquet and Spark")
    named = {kind for kind, *_ in rows}
    used = {kind for columns in TABLES.values() for kind in columns.values()} | {PARTITION[1]}
    assert named == used
