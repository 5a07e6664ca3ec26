"""``spanledger report EVENTS.jsonl`` aggregates the requests' attribution records.

The main log is written by real calls to the loopback stand-in, priced from the example table,
across requests with different citation patterns: all cited, none cited, nothing rendered, a
partial citation, a request whose spend is unknown, and a request reported twice (the last
record wins). Expected figures are computed here from the passages and the logged events.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import spanledger
from spanledger import JsonlSink, Recorder, read_events
from spanledger.cli import main
from spanledger.events import AttributionRecord
from spanledger.ledger import example_prices_path
from spanledger.testing import StandIn

from .conftest import PASSAGES, QUESTION, SENTINEL, Providers, accounting_tokens

UNPRICED_MODEL = "rerank-english-v2.0"
SECRET_PASSAGES = [f"{passage} ({SENTINEL})" for passage in PASSAGES]


@dataclass(frozen=True)
class Expected:
    """What this module expects of each request: (cited, rendered) accounting tokens."""

    tokens: dict[str, tuple[int, int]]
    unknown_spend: frozenset[str]

    def share(self, request_id: str) -> float | None:
        cited, rendered = self.tokens[request_id]
        return cited / rendered if rendered else None


@dataclass(frozen=True)
class Log:
    path: Path
    expected: Expected


def _turn(
    recorder: Recorder,
    providers: Providers,
    request_id: str,
    *,
    render: int,
    answer: str,
    reranker_model: str = "rerank-v3.5",
    again: str | None = None,
) -> tuple[int, int]:
    """One request; returns (cited, rendered) tokens as this module computes them."""
    with spanledger.use(recorder), spanledger.request(request_id) as req:
        providers.embedder().embed([f"{QUESTION} {SENTINEL}"], input_type="query")
        response = providers.reranker(reranker_model).rerank(
            f"{QUESTION} {SENTINEL}", SECRET_PASSAGES, top_k=3
        )
        frames = req.serve(response, SECRET_PASSAGES, provider_id="kb")
        shown = frames[:render]
        req.render(shown)
        cited_labels = req.cite_from_text(answer, shown)
        if again is not None:
            req.report()  # an earlier record for the same request
            cited_labels += req.cite_from_text(again, shown)
        req.report()
    order = [result.index for result in response.results][:render]
    costs = [accounting_tokens(SECRET_PASSAGES[i]) for i in order]
    cited = sum(
        cost for frame, cost in zip(shown, costs, strict=True) if frame.frame in cited_labels
    )
    return cited, sum(costs)


@pytest.fixture(scope="module")
def log(standin: StandIn, tmp_path_factory: pytest.TempPathFactory) -> Log:
    path = tmp_path_factory.mktemp("attribution-report") / "events.jsonl"
    recorder = Recorder([JsonlSink(path)], prices=example_prices_path())
    providers = Providers(standin)
    try:
        tokens = {
            "all-cited": _turn(recorder, providers, "all-cited", render=3, answer="[1] [2] [3]"),
            "none-cited": _turn(recorder, providers, "none-cited", render=2, answer="no labels"),
            "nothing-rendered": _turn(
                recorder, providers, "nothing-rendered", render=0, answer="no labels"
            ),
            "partial": _turn(recorder, providers, "partial", render=3, answer="only [2]"),
            "unknown-spend": _turn(
                recorder,
                providers,
                "unknown-spend",
                render=2,
                answer="see [1]",
                reranker_model=UNPRICED_MODEL,
            ),
            "repeated": _turn(
                recorder, providers, "repeated", render=2, answer="none yet", again="now [1]"
            ),
        }
    finally:
        providers.close()
        recorder.shutdown()
    return Log(path, Expected(tokens, frozenset({"unknown-spend"})))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["report", *argv])
    return status, capsys.readouterr().out


def attribution_json(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    status, out = run(capsys, str(path), "--json")
    assert status == 0
    data: dict[str, Any] = json.loads(out)["attribution"]
    return data


def bands(shares: list[float]) -> dict[str, int]:
    """Requests per quarter, the last band including 100%."""
    counts = {"0%-25%": 0, "25%-50%": 0, "50%-75%": 0, "75%-100%": 0}
    for share in shares:
        index = min(int(share * 4), 3)
        counts[list(counts)[index]] += 1
    return counts


def known_spend_per_cited_token(log: Log) -> Decimal:
    """Spend over cited tokens across requests with fully known spend, from the logged events."""
    spend, cited = Decimal(0), 0
    for event in read_events(log.path).events:
        assert event.request_id is not None
        if event.request_id in log.expected.unknown_spend:
            continue
        assert event.cost is not None
        assert event.cost.amount is not None
        spend += event.cost.amount
    for request_id, (request_cited, _) in log.expected.tokens.items():
        if request_id not in log.expected.unknown_spend:
            cited += request_cited
    return spend / cited


# --------------------------------------------------------------------------- the log itself


def test_the_log_holds_one_record_per_report_call(log: Log) -> None:
    read = read_events(log.path)
    assert read.problems == []
    assert [r.request_id for r in read.attributions] == [
        "all-cited",
        "none-cited",
        "nothing-rendered",
        "partial",
        "unknown-spend",
        "repeated",
        "repeated",
    ]
    assert len(read.events) == 12
    by_id = {r.request_id: r for r in read.attributions}
    for request_id, (cited, rendered) in log.expected.tokens.items():
        assert (by_id[request_id].cited_tokens, by_id[request_id].rendered_tokens) == (
            cited,
            rendered,
        )
    assert by_id["unknown-spend"].spend_complete is False
    assert SENTINEL not in log.path.read_text(encoding="utf-8")


def test_the_expected_citation_patterns_were_produced(log: Log) -> None:
    expected = log.expected
    assert expected.share("all-cited") == 1.0
    assert expected.share("none-cited") == 0.0
    assert expected.share("nothing-rendered") is None
    partial = expected.share("partial")
    assert partial is not None
    assert 0 < partial < 1
    assert expected.share("repeated") not in (None, 0.0)


# --------------------------------------------------------------------------- --json


def test_json_summarises_the_last_record_of_each_request(
    capsys: pytest.CaptureFixture[str], log: Log
) -> None:
    data = attribution_json(capsys, log.path)

    expected = log.expected
    shares = [s for s in (expected.share(r) for r in expected.tokens) if s is not None]
    assert len(shares) == 5
    assert data["requests"] == 6
    assert data["requests_with_share"] == 5
    assert data["mean_cited_token_share"] == pytest.approx(statistics.fmean(shares))
    assert data["median_cited_token_share"] == pytest.approx(statistics.median(shares))
    assert data["distribution"] == bands(shares)
    assert data["unreconcilable_requests"] == []


def test_json_lists_requests_whose_rendered_context_earned_nothing(
    capsys: pytest.CaptureFixture[str], log: Log
) -> None:
    data = attribution_json(capsys, log.path)

    # "repeated" earned nothing in its first record only; "nothing-rendered" rendered nothing
    assert data["rendered_context_earned_nothing"] == ["none-cited"]


def test_json_spend_per_cited_token_leaves_out_unknown_spend(
    capsys: pytest.CaptureFixture[str], log: Log
) -> None:
    data = attribution_json(capsys, log.path)

    assert data["requests_with_unknown_spend"] == 1
    assert data["currency"] == "USD"
    assert Decimal(data["spend_per_cited_token"]) == known_spend_per_cited_token(log)


def test_json_keeps_the_spend_report_next_to_the_attribution(
    capsys: pytest.CaptureFixture[str], log: Log
) -> None:
    status, out = run(capsys, str(log.path), "--json")
    data = json.loads(out)

    assert status == 0
    assert "attribution" in data
    assert data["skipped_lines"] == {}
    assert set(data) - {"attribution", "skipped_lines"}  # the spend report is still there
    assert SENTINEL not in out


# --------------------------------------------------------------------------- text


def test_text_report_prints_share_distribution_rate_and_idle_context(
    capsys: pytest.CaptureFixture[str], log: Log
) -> None:
    status, out = run(capsys, str(log.path))

    expected = log.expected
    shares = [s for s in (expected.share(r) for r in expected.tokens) if s is not None]
    assert status == 0
    assert "attribution over 6 requests (5 with rendered context)" in out
    assert (
        f"cited token share: mean {statistics.fmean(shares):.1%}, "
        f"median {statistics.median(shares):.1%}"
    ) in out
    assert "distribution: " + ", ".join(f"{b}: {n}" for b, n in bands(shares).items()) in out
    rate = known_spend_per_cited_token(log)
    assert f"spend per cited token: {rate:.10f} USD (1 request with unknown spend left out)" in out
    assert "rendered context earned nothing in: none-cited\n" in out
    assert "not reconcilable" not in out
    assert SENTINEL not in out


# --------------------------------------------------------------------------- hand-made logs


LATER = datetime(2025, 6, 15, 12, 5, tzinfo=UTC)


def record(request_id: str, **fields: Any) -> AttributionRecord:
    cited, rendered = fields.pop("tokens", (0, 0))
    values: dict[str, Any] = {
        "request_id": request_id,
        "at": datetime(2025, 6, 15, 12, 0, tzinfo=UTC),
        "frames_served": 3,
        "frames_rendered": 2 if rendered else 0,
        "frames_cited": 1 if cited else 0,
        "rendered_tokens": rendered,
        "cited_tokens": cited,
        "uncited_rendered_tokens": rendered - cited,
        "cited_token_share": cited / rendered if rendered else None,
        "reconcilable": True,
        "calls": 1,
        "billed_input_tokens": 10,
        "billed_search_units": 0,
        "calls_without_usage": 0,
        "spend": Decimal("0.001"),
        "currency": "USD",
        "spend_complete": True,
    }
    values.update(fields)
    return AttributionRecord(**values)


def write_records(path: Path, records: list[AttributionRecord]) -> None:
    sink = JsonlSink(path)
    for item in records:
        sink.attribution(item)
    sink.shutdown()


def test_share_bands_put_boundaries_in_the_upper_band(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    cases = [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4), (99, 100), (0, 0)]
    write_records(path, [record(f"r{n}", tokens=case) for n, case in enumerate(cases)])

    data = attribution_json(capsys, path)

    assert data["requests"] == 7
    assert data["requests_with_share"] == 6
    assert data["distribution"] == {"0%-25%": 1, "25%-50%": 1, "50%-75%": 1, "75%-100%": 3}
    assert data["rendered_context_earned_nothing"] == ["r0"]


def test_when_no_spend_is_known_there_is_no_rate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    unknown = {"spend": None, "currency": None, "spend_complete": False, "unknown_spend": "x"}
    write_records(
        path, [record("a", tokens=(1, 2), **unknown), record("b", tokens=(2, 2), **unknown)]
    )

    data = attribution_json(capsys, path)
    status, out = run(capsys, str(path))

    assert data["spend_per_cited_token"] is None
    assert data["requests_with_unknown_spend"] == 2
    assert status == 0
    assert "spend per cited token: n/a (2 requests with unknown spend)" in out


def test_unreconcilable_requests_are_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    write_records(
        path,
        [
            record("fine", tokens=(1, 2)),
            record("broken", tokens=(1, 2), reconcilable=False, problems=["kb/9 was never served"]),
            record("fixed", tokens=(1, 2), reconcilable=False),
            record("fixed", tokens=(1, 2), at=LATER),  # the latest record wins
        ],
    )

    data = attribution_json(capsys, path)
    _, out = run(capsys, str(path))

    assert data["unreconcilable_requests"] == ["broken"]
    assert "not reconcilable: broken\n" in out


def test_a_log_without_records_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("", encoding="utf-8")

    status, out = run(capsys, str(path), "--json")
    data = json.loads(out)["attribution"]
    status, out = run(capsys, str(path))

    assert data["requests"] == 0
    assert data["mean_cited_token_share"] is None
    assert data["spend_per_cited_token"] is None
    assert data["rendered_context_earned_nothing"] == []
    assert status == 1  # nothing readable: the report says so, and fails
    assert "attribution: no request reports in the log" in out


def test_a_log_where_nothing_was_rendered_has_no_mean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    write_records(path, [record("a"), record("b")])

    data = attribution_json(capsys, path)
    _, out = run(capsys, str(path))

    assert data["requests"] == 2
    assert data["requests_with_share"] == 0
    assert data["mean_cited_token_share"] is None
    assert data["distribution"] == {"0%-25%": 0, "25%-50%": 0, "50%-75%": 0, "75%-100%": 0}
    assert "cited token share: n/a (nothing rendered)" in out
