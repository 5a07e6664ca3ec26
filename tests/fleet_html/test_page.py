"""``spanledger report --html FILE``: one page, offline, holding the text report's figures."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import spanledger.fleet.scan as scan_module
from spanledger.cli import main
from spanledger.fleet.html_page import MAX_TABLE_ROWS
from spanledger.fleet.html_series import MAX_DAYS, MAX_MODELS
from spanledger.ledger import example_prices_path

from .logs import (
    ATTRIBUTE_MODEL,
    SCRIPT_MODEL,
    Call,
    attribution,
    mixed_calls,
    mixed_records,
    priced,
    unpriced,
    write_log,
)
from .page import read_page, run

TWO_MB = 2 * 2**20


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "events.jsonl", mixed_calls(), mixed_records())


def _html(log: Path, *more: str) -> Path:
    target = log.parent / "report.html"
    status, out, err = run("report", str(log), "--html", str(target), *more)
    assert status == 0, err
    assert str(target) in out
    return target


def _json(log: Path, *more: str) -> dict[str, object]:
    status, out, _ = run("report", str(log), "--json", *more)
    assert status == 0
    data: dict[str, object] = json.loads(out)
    return data


def test_the_totals_table_is_the_text_reports(log: Path) -> None:
    _, text, _ = run("report", str(log))
    page = read_page(_html(log))
    header, *rows = page.rows
    assert header == ["provider", "model", "status", "calls", "amount", "tokens", "units", "chars"]
    expected = [
        [
            row["provider"],
            row["model"],
            row["status"],
            str(row["calls"]),
            "unknown"
            if row["amount"] is None
            else f"{Decimal(row['amount']).normalize():f} {row['currency']}",
        ]
        for row in _json(log)["rows"]  # type: ignore[attr-defined]
    ]
    assert [row[:5] for row in rows] == expected
    table = text.split("\n\n")[1].splitlines()[1:]
    for row in rows:  # each amount and figure as the text report prints it, on its row
        [line] = [
            each
            for each in table
            if each.startswith(f"{row[0]} ") and f" {row[1]} " in each and f" {row[2]} " in each
        ]
        assert row[4] in line
        assert line.split(row[4], 1)[1].split() == " ".join(row[5:]).split()


def test_the_summary_and_status_chart_hold_the_text_reports_counts(log: Path) -> None:
    _, text, _ = run("report", str(log))
    page = read_page(_html(log))
    status_line = text.splitlines()[1]  # "priced: 6  estimated: 0  ..."
    counts = dict(part.split(": ") for part in status_line.split("  "))
    assert page.bar_figures("calls-by-status") == {
        f"{status} · calls": count for status, count in counts.items()
    }
    assert {label: value for value, label in page.tiles} == {
        **dict(counts.items()),
        "calls": text.splitlines()[0].split()[0],
        "known spend (USD)": "0.0003 USD",
        "known spend (EUR)": "0.0001 EUR",
        "requests with unknown context spend": "5",  # records written without the figure
    }
    assert "known spend: 0.0001 EUR, 0.0003 USD" in text
    assert "  context spend: unknown for 5 requests" in text


def test_spend_by_day_adds_up_to_the_known_spend_and_the_by_day_rows(log: Path) -> None:
    page = read_page(_html(log))
    by_day_rows = _json(log, "--by", "day")["rows"]
    for currency, known in _json(log)["spend"].items():  # type: ignore[attr-defined]
        figures = page.bar_figures(f"spend-by-day-{currency}")
        assert all(figure.endswith(f" {currency}") for figure in figures.values())
        per_day: dict[str, Decimal] = defaultdict(Decimal)
        for named, figure in figures.items():
            per_day[named.split(" · ")[0]] += Decimal(figure.split()[0])
        assert sum(per_day.values()) == Decimal(known)
        rows: dict[str, Decimal] = defaultdict(Decimal)
        for row in by_day_rows:  # type: ignore[attr-defined]
            if row["currency"] == currency and row["amount"] is not None:
                rows[row["day"]] += Decimal(row["amount"])
        assert per_day == rows


def test_spend_by_model_is_per_currency_and_matches_the_rows(log: Path) -> None:
    page = read_page(_html(log))
    expected: dict[str, dict[str, str]] = defaultdict(dict)
    for row in _json(log)["rows"]:  # type: ignore[attr-defined]
        if row["amount"] is not None and row["currency"]:
            currency = row["currency"]
            expected[currency][f"{row['provider']}/{row['model']} · spend ({currency})"] = (
                f"{Decimal(row['amount']).normalize():f} {currency}"
            )
    assert set(expected) == {"USD", "EUR"}
    for currency, bars in expected.items():
        assert page.bar_figures(f"spend-by-model-{currency}") == bars


def test_priced_with_a_table_the_page_holds_the_tables_figures(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "events.jsonl",
        [Call(day=day, tokens=1000 + day) for day in range(5)]
        + [Call(provider="cohere", model="embed-v4.0", day=1, tokens=333)],
    )
    prices = str(example_prices_path())
    _, text, _ = run("report", str(log), "--prices", prices)
    html = _html(log, "--prices", prices)
    page = read_page(html)
    for figure in page.bar_figures("spend-by-model-USD").values():
        assert figure in text
    assert str(tmp_path) not in html.read_text()  # no path of the user's files
    assert "example-prices" not in html.read_text()


def test_not_priced_and_malformed_usage_by_model(log: Path) -> None:
    page = read_page(_html(log))
    assert page.bar_figures("not-priced-by-model") == {
        f"acme/{SCRIPT_MODEL} · no_price_entry": "2",
        f"acme/{ATTRIBUTE_MODEL} · usage_malformed": "1",
        "tei/bge-small · usage_not_reported": "1",
    }
    assert page.bar_figures("malformed-by-model") == {f"acme/{ATTRIBUTE_MODEL} · input_tokens": "1"}


def test_cited_share_distribution_is_the_text_reports(log: Path) -> None:
    _, text, _ = run("report", str(log))
    page = read_page(_html(log))
    distribution = next(line for line in text.splitlines() if "distribution:" in line)
    bands = dict(part.split(": ") for part in distribution.split("distribution: ")[1].split(", "))
    assert bands == {"0%-25%": "1", "25%-50%": "2", "50%-75%": "0", "75%-100%": "1"}
    assert page.bar_figures("cited-share") == {
        f"{band} · requests": count for band, count in bands.items()
    }


def test_log_text_is_escaped_everywhere(log: Path) -> None:
    raw = _html(log).read_text(encoding="utf-8")
    page = read_page(log.parent / "report.html")
    tags = {tag for tag, _ in page.elements}
    assert "script" not in tags
    assert "img" not in tags
    assert not [attrs for _, attrs in page.elements if "onerror" in attrs]
    assert "<script" not in raw.lower()
    assert "<img" not in raw.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in raw
    assert any(SCRIPT_MODEL in row for row in page.rows)  # readable as itself


def test_the_page_fetches_nothing(log: Path) -> None:
    raw = _html(log).read_text(encoding="utf-8")
    page = read_page(log.parent / "report.html")
    urls = set(re.findall(r"[a-z][a-z0-9+.-]*://[^\s\"'<>)]*", raw, flags=re.IGNORECASE))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    for fetching in ("src", "href", "xlink:href", "srcset", "action", "data"):
        assert not [tag for tag, attrs in page.elements if fetching in attrs], fetching
    assert "@import" not in raw
    assert "url(" not in raw
    policies = [
        attrs["content"]
        for tag, attrs in page.elements
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policies
    assert "default-src 'none'" in str(policies[0])
    assert "script-src" not in str(policies[0])


def test_empty_sections_say_so(tmp_path: Path) -> None:
    log = write_log(tmp_path / "events.jsonl", [Call(cost=unpriced())])
    page = read_page(_html(log))
    assert page.empty["cited-share"].startswith("no request summaries")
    assert page.empty["spend-by-day"].startswith("no known spend")
    assert page.empty["spend-by-model"].startswith("no known spend")
    assert page.empty["malformed-by-model"] == "no malformed usage figure"
    assert "calls-by-status" not in page.empty


def test_a_log_of_attribution_only_has_no_calls_to_chart(tmp_path: Path) -> None:
    log = write_log(tmp_path / "events.jsonl", [], [attribution("req-1", 0.5)])
    page = read_page(_html(log))
    assert page.empty["calls-by-status"].startswith("no call")
    assert page.empty["not-priced-by-model"] == "no call is unpriced or unmetered"
    assert page.bar_figures("cited-share")["50%-75% · requests"] == "1"


def test_the_page_stays_small_and_says_what_it_left_out(tmp_path: Path) -> None:
    days, models = 400, 80
    calls = [
        Call(
            provider=f"p{number % 12}",
            model=f"model-{number % models}-{'x' * 40}",
            day=number % days,
            cost=priced("0.0001") if number % 7 else unpriced(),
        )
        for number in range(6000)
    ]
    records = [attribution(f"req-{number}", (number % 100) / 100) for number in range(3000)]
    log = write_log(tmp_path / "events.jsonl", calls, records)
    html = _html(log, "--by", "provider,model,day")
    size = html.stat().st_size
    assert size < TWO_MB, size
    page = read_page(html)
    assert len(page.rows) == 1 + MAX_TABLE_ROWS
    captions = " ".join(page.captions)
    assert f"the latest {MAX_DAYS} of {days} days are shown" in captions
    assert f"the {MAX_MODELS - 1} models with the most spend are shown" in captions
    day_chart = page.bar_figures("spend-by-day-USD")
    assert len({named.split(" · ")[0] for named in day_chart}) == MAX_DAYS
    assert len({named.split(" · ")[1] for named in day_chart}) <= 8
    assert f"the first {MAX_TABLE_ROWS} of" in html.read_text()
    assert len(page.bar_figures("spend-by-model-USD")) == MAX_MODELS
    other = [named for named in page.bar_figures("spend-by-model-USD") if "other (" in named]
    named = {(call.provider, call.model) for call in calls if call.cost and call.cost.amount}
    assert other == [f"other ({len(named) - MAX_MODELS + 1} models) · spend (USD)"]


def test_the_cut_bars_keep_every_cent(tmp_path: Path) -> None:
    calls = [
        Call(model=f"m{number % 40}", day=number % 120, cost=priced("0.00013"))
        for number in range(400)
    ]
    log = write_log(tmp_path / "events.jsonl", calls)
    page = read_page(_html(log))
    by_model = page.bar_figures("spend-by-model-USD").values()
    assert sum(Decimal(figure.split()[0]) for figure in by_model) == Decimal("0.052")
    by_day = page.bar_figures("spend-by-day-USD").values()
    assert sum(Decimal(figure.split()[0]) for figure in by_day) == Decimal("0.00013") * sum(
        1 for number in range(400) if number % 120 >= 120 - MAX_DAYS
    )


def test_one_scan_split_by_day(monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
    calls: list[dict[str, object]] = []
    real = scan_module.scan_logs

    def counting(*args: object, **kwargs: object) -> scan_module.Scan:
        calls.append(kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(scan_module, "scan_logs", counting)
    _html(log)
    assert len(calls) == 1
    assert calls[0]["daily"] is True
    calls.clear()
    run("report", str(log))
    assert calls[0]["daily"] is False  # the text report's scan is as it was


def test_days_are_utc_days(tmp_path: Path) -> None:
    late = Call(day=0, cost=priced("0.5"))
    log = write_log(tmp_path / "events.jsonl", [late])
    text = log.read_text().replace("2026-11-01T09:30:00Z", "2026-11-01T23:30:00-05:00")
    log.write_text(text)
    page = read_page(_html(log))
    assert page.bar_figures("spend-by-day-USD") == {"2026-11-02 · openai": "0.5 USD"}


def test_a_missing_charting_library_is_named_before_any_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, log: Path
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    scans: list[object] = []
    monkeypatch.setattr(scan_module, "scan_logs", lambda *a, **k: scans.append(a))
    target = tmp_path / "out.html"
    status, _out, err = run("report", str(log), "--html", str(target))
    assert status == 1
    assert "pip install 'spanledger[html]'" in err
    assert err.count("\n") == 1
    assert not target.exists()
    assert scans == []


def test_html_is_one_output_among_json_and_csv(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["report", str(log), "--json", "--html", str(log.parent / "x.html")])
    assert status == 1  # a usage error: one line, status 1 (tests/reliability/test_usage_errors)
    err = capsys.readouterr().err
    assert "not allowed with" in err
    assert err.count("\n") == 1


def test_an_unwritable_target_is_one_line(tmp_path: Path, log: Path) -> None:
    status, _, err = run("report", str(log), "--html", str(tmp_path / "no" / "such" / "r.html"))
    assert status == 1
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == [log]


def test_no_payload_reaches_the_page(tmp_path: Path) -> None:
    import spanledger
    from spanledger.providers import CohereEmbeddings, CohereReranker
    from spanledger.testing import StandIn

    sentinel = "SENTINEL-7f3a-html-report"
    passages = [f"a passage {sentinel}", f"another {sentinel}"]
    sink = spanledger.JsonlSink(tmp_path / "logs")
    with (
        StandIn() as standin,
        spanledger.Recorder([sink]) as recorder,
        spanledger.use(recorder),
        spanledger.request("turn-1") as request,
    ):
        cohere = standin.base_url("cohere")
        CohereEmbeddings("embed-v4.0", base_url=cohere, api_key="k").embed([sentinel])
        ranked = CohereReranker("rerank-v3.5", base_url=cohere, api_key="k").rerank(
            f"question {sentinel}", passages, top_k=2
        )
        frames = request.serve(ranked, passages, provider_id="kb")
        request.render(frames)
        request.cite(frames[:1])
        request.report()
    target = tmp_path / "report.html"
    status, out, err = run(
        "report",
        str(tmp_path / "logs"),
        "--prices",
        str(example_prices_path()),
        "--html",
        str(target),
    )
    assert status == 0, err
    page = target.read_text(encoding="utf-8")
    assert sentinel not in page
    assert sentinel not in out + err
    assert read_page(target).bar_figures("cited-share")  # the request was charted
