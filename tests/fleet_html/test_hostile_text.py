"""``spanledger report --html F`` over any log and any F: a name of any length draws in bounded
time and memory, control characters never reach the page as themselves, long fields are cut
with a mark (``--json`` and ``--csv`` keep them whole), and F is written only as a new file or
over a regular one, keeping its mode, with errors that name F."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import socket
import stat
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest

from spanledger.display import CUT_MARK, LABEL_LIMIT, PAGE_LIMIT, page_text
from spanledger.errors import ConfigurationError
from spanledger.eventlog import event_line
from spanledger.reporting import run_report

from .logs import Call, attribution, call_event, priced, unpriced, write_log
from .page import read_page, run

HOSTILE = "\x1b[31mred\x07\x9b2J\x1b]0;title\x07\u2028\u2029\u202eevil\u202c\x00\x7f\tend\n"
"""Terminal escapes (CSI, OSC, BEL, a C1 CSI), separators, a bidi override, NUL, DEL, tab."""
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What the page must never hold as itself (tab, newline and return are HTML's own)."""
SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
BOUNDED_SECONDS = 60
MEMORY_LIMIT = 1536 * 2**20
"""The address space a child drawing a page may take: a page that hangs on a label climbs past
2 GB within a minute, so it fails here fast instead of taking the machine's memory."""


def _hostile_log(path: Path, *, long: int = 0, text: str = HOSTILE) -> Path:
    """A log whose every name holds ``text`` (and ``long`` more characters): provider, model,
    currency, request id; one of its models is not priced."""
    tail = "m" * long
    lines = []
    calls = [
        (Call(provider=f"acme{text}{tail}", model=f"model{text}{tail}", cost=priced("0.5")), {}),
        (Call(provider="openai", model=f"embed{text}{tail}", cost=unpriced()), {}),
        (Call(model="plain", cost=priced("0.25")), {"currency": f"U{text}{tail}"}),
    ]
    for number, (call, cost) in enumerate(calls):
        record = json.loads(event_line(call_event(call, number)))
        record["request_id"] = f"req{text}{tail}"
        record["cost"].update(cost)
        lines.append(json.dumps(record))
    request = json.loads(event_line(attribution(f"req{text}{tail}", 0.5)))
    lines.append(json.dumps(request))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _page(log: Path, *more: str) -> tuple[Path, str]:
    target = log.parent / "report.html"
    status, _, err = run("report", str(log), "--html", str(target), *more)
    assert status == 0, err
    return target, target.read_text(encoding="utf-8")


def _charts(raw: str) -> list[ET.Element]:
    """Each inline chart parsed as XML: it fails on any character XML 1.0 forbids."""
    charts = [ET.fromstring(svg) for svg in SVG.findall(raw)]
    assert charts
    return charts


def _texts(chart: ET.Element, tag: str) -> list[str]:
    return ["".join(node.itertext()) for node in chart.iter() if node.tag.endswith("}" + tag)]


def _bounded(code: str) -> dict[str, object]:
    """Run ``code`` in a child Python with at most ``MEMORY_LIMIT`` of address space and fail
    unless it ends within ``BOUNDED_SECONDS``; its last line of output, as JSON."""
    prelude = textwrap.dedent(
        f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))
        """
    )
    # the child's own high-water mark: ru_maxrss of a child starts at its parent's RSS
    finish = (
        "\npeak = next(int(line.split()[1]) for line in open('/proc/self/status')"
        " if line.startswith('VmHWM:'))"
        "\nprint(json.dumps({**found, 'peak': peak}))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code) + finish],
            capture_output=True,
            text=True,
            timeout=BOUNDED_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still drawing after {BOUNDED_SECONDS} s")
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return found


# -- a name of any length draws in bounded time and memory ---------------------------------


@pytest.mark.parametrize("length", [250, 5_000, 200_000])
def test_a_long_model_name_draws_in_bounded_time_and_memory(tmp_path: Path, length: int) -> None:
    log = write_log(tmp_path / "events.jsonl", [Call(model="m" * length, cost=priced("0.1"))])
    target = tmp_path / "report.html"
    found = _bounded(
        f"""
        from spanledger.cli import main
        found = {{"status": main(["report", {str(log)!r}, "--html", {str(target)!r}])}}
        """
    )
    assert found["status"] == 0
    assert isinstance(found["peak"], int)
    assert found["peak"] < 600 * 1024, f"peak {found['peak']} KB"  # VmHWM is in KB
    assert target.stat().st_size < 200_000
    assert "m" * PAGE_LIMIT not in target.read_text(encoding="utf-8")


def test_every_name_long_and_hostile_at_once_draws_in_bounded_time(tmp_path: Path) -> None:
    """Long, spaced, multi-line and escaping names in every field, on many days and under many
    providers (so legends fill and day labels turn), grouped by every key."""
    calls = [
        Call(
            provider=f"p{number % 12} {'x' * 300}\n{'y y ' * 80}",
            model=f"{'m' * 400}{number % 20}",
            day=number % 100,
            cost=priced("0.001") if number % 3 else unpriced(),
        )
        for number in range(400)
    ]
    log = _hostile_log(tmp_path / "hostile.jsonl", long=5_000)
    more = write_log(tmp_path / "more.jsonl", calls)
    target = tmp_path / "report.html"
    found = _bounded(
        f"""
        from spanledger.cli import main
        found = {{"status": main(["report", {str(log)!r}, {str(more)!r}, "--html",
            {str(target)!r}, "--by", "provider,model,day,request"])}}
        """
    )
    assert found["status"] == 0
    assert target.stat().st_size < 2 * 2**20


def _drawn_in_child(tmp_path: Path, build: str) -> list[str]:
    """The SVG of each chart that ``build`` (code naming them ``charts``) makes, drawn by
    ``chart_svg`` in a child bounded in time and memory."""
    out = tmp_path / "charts.json"
    _bounded(
        f"""
        from decimal import Decimal
        from spanledger.fleet.html_charts import chart_svg
        from spanledger.fleet.html_series import Chart, Series
        {textwrap.indent(textwrap.dedent(build), " " * 8).strip()}
        drawn = [chart_svg(chart) for chart in charts]
        open({str(out)!r}, "w", encoding="utf-8").write(json.dumps(drawn))
        found = {{}}
        """
    )
    drawn: list[str] = json.loads(out.read_text(encoding="utf-8"))
    return drawn


def test_the_charts_draw_whatever_their_texts(tmp_path: Path) -> None:
    """``chart_svg`` over charts of every shape whose every text (title, axis, unit, labels,
    series, figures) is long, spaced, multi-line or full of controls: none hangs, each is
    valid XML, and no text drawn passes its bound."""
    drawn = _drawn_in_child(
        tmp_path,
        f"""
        texts = ["m" * 250, "m" * 20_000, "w " * 3000, "a\\n" * 500, {HOSTILE!r} * 50, ""]
        charts = []
        for text in texts:
            for horizontal in (False, True):
                for series_count in (1, 3, 12):
                    for rows in (1, 15, 92):
                        categories = tuple(f"{{text}}{{row}}" for row in range(rows))
                        series = tuple(
                            Series(
                                f"{{text}}{{index}}",
                                tuple(Decimal(row + 1) for row in range(rows)),
                                tuple(f"{{row + 1}} {{text}}" for row in range(rows)),
                            )
                            for index in range(series_count)
                        )
                        charts.append(Chart(
                            "key", text + " title " + text, categories, series, text, text,
                            horizontal=horizontal, legend=True,
                        ))
        """,
    )
    assert len(drawn) == 6 * 2 * 3 * 3
    for svg in drawn:
        chart = ET.fromstring(svg)
        assert all(len(text) <= PAGE_LIMIT for text in _texts(chart, "text"))
        assert all(len(title) <= 3 * PAGE_LIMIT + 6 for title in _texts(chart, "title"))
        assert not RAW.search(svg)


def test_huge_and_tiny_figures_draw(tmp_path: Path) -> None:
    """Figures no log should hold (beyond a float, thousands of digits, below the smallest
    float) are still drawn, stacked or not, either way up: each bar's title keeps its figure
    (cut to the page's bound) and no tick passes ``LABEL_LIMIT``."""
    figures = ["1e400", "9" * 5000, "1e-400", "1e300", "1e100", "0.5"]
    drawn = _drawn_in_child(
        tmp_path,
        f"""
        figures = [Decimal(figure) for figure in {figures!r}]
        texts = tuple(f"{{figure:f}} USD" for figure in figures)
        categories = tuple(f"m{{number}}" for number in range(len(figures)))
        charts = [
            Chart(
                "key", "title", categories,
                tuple(Series(f"s{{index}}", tuple(figures), texts) for index in range(count)),
                "model", "USD", horizontal=horizontal,
            )
            for count in (1, 3)
            for horizontal in (False, True)
        ]
        """,
    )
    assert len(drawn) == 4
    for svg in drawn:
        chart = ET.fromstring(svg)
        titles = _texts(chart, "title")
        for number, figure in enumerate(figures):
            text = page_text(f"{Decimal(figure):f} USD")
            assert f"m{number} · s0: {text}" in titles
        numbers = [text for text in _texts(chart, "text") if text[:1].isdigit()]
        assert numbers  # the ticks (and the figures printed on single bars)
        assert all(len(text) <= LABEL_LIMIT for text in numbers), max(numbers, key=len)


# -- control characters ------------------------------------------------------------------


def test_no_control_character_reaches_the_page(tmp_path: Path) -> None:
    log = _hostile_log(tmp_path / "events.jsonl")
    for grouping in ("provider,model", "provider,model,day,request"):
        target, raw = _page(log, "--by", grouping)
        assert not RAW.search(raw), RAW.findall(raw)
        charts = _charts(raw)  # valid XML: no character XML 1.0 forbids, even escaped
        assert "\\x1b[31mred\\x07\\x9b2J" in raw  # shown, as a visible escape
        page = read_page(target)
        cells = {cell for row in page.rows for cell in row}
        assert page_text(f"acme{HOSTILE}") in cells
        assert page_text(f"model{HOSTILE}") in cells
        bar_titles = [title for chart in charts for title in _texts(chart, "title")]
        assert any(page_text(f"acme{HOSTILE}") in title for title in bar_titles)
        assert f"openai/{page_text(f'embed{HOSTILE}')}: 1 call" in raw  # not priced
        assert "\\u202eevil" in raw
        assert "&#27;" not in raw
        assert "&#x1b;" not in raw.lower()  # nor as a character reference
    assert page_text(f"req{HOSTILE}") in raw  # the request's own row


def test_json_and_csv_keep_the_log_text_whole(tmp_path: Path) -> None:
    log = _hostile_log(tmp_path / "events.jsonl", long=200_000)
    status, out, _ = run("report", str(log), "--json")
    assert status == 0
    models = {row["model"] for row in json.loads(out)["rows"]}
    assert f"model{HOSTILE}{'m' * 200_000}" in models
    status, out, _ = run("report", str(log), "--csv")
    assert status == 0
    assert "m" * 200_000 in out


# -- long fields are cut with a mark ---------------------------------------------------------


def test_a_long_field_is_cut_with_a_mark_on_the_page(tmp_path: Path) -> None:
    log = _hostile_log(tmp_path / "events.jsonl", long=200_000, text="")
    target, raw = _page(log, "--by", "provider,model,request")
    assert len(raw) < 200_000
    assert "m" * PAGE_LIMIT not in raw
    page = read_page(target)
    cells = [cell for row in page.rows for cell in row]
    assert max(len(cell) for cell in cells) == PAGE_LIMIT
    assert f"model{'m' * (PAGE_LIMIT - 6)}{CUT_MARK}" in cells
    for chart in _charts(raw):
        for text in _texts(chart, "text"):
            assert len(text) <= PAGE_LIMIT
            if text.startswith("acme"):  # an axis label or legend entry
                assert len(text) <= LABEL_LIMIT
                assert text.endswith(CUT_MARK)
    labels = [text for chart in _charts(raw) for text in _texts(chart, "text")]
    assert f"acme{'m' * (LABEL_LIMIT - 5)}{CUT_MARK}" in labels  # the provider/model bar
    assert page_text(f"U{'m' * 200_000}", LABEL_LIMIT) in labels  # the currency's axis title


# -- F is written only as a new file or over a regular one ----------------------------------


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "events.jsonl", [Call(cost=priced("0.5"))])


def _report_to(log: Path, target: Path | str, *options: str) -> tuple[int, str]:
    status, _, err = run("report", str(log), "--html", str(target), *options)
    return status, err


def _listing(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()}


@pytest.mark.parametrize(
    ("mask", "mode"), [(0o077, 0o600), (0o022, 0o600), (0o022, 0o640), (0o077, 0o644)], ids=oct
)
def test_an_existing_report_keeps_its_mode(log: Path, tmp_path: Path, mask: int, mode: int) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    target.chmod(mode)
    with _umask(mask):
        status, err = _report_to(log, target)
    assert status == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert _listing(tmp_path) == {"events.jsonl", "report.html"}  # no temporary file left


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give a file to another user")
def test_root_replacing_a_users_report_leaves_it_theirs(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    target.chmod(0o600)
    os.chown(target, 65534, 65534)
    status, err = _report_to(log, target)
    assert status == 0, err
    found = target.stat()
    assert (found.st_uid, found.st_gid, stat.S_IMODE(found.st_mode)) == (65534, 65534, 0o600)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("mask", [0o077, 0o022, 0o027], ids=oct)
def test_a_new_report_gets_the_mode_the_umask_gives(log: Path, tmp_path: Path, mask: int) -> None:
    target = tmp_path / "report.html"
    with _umask(mask):
        status, err = _report_to(log, target)
    assert status == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask


def _refused(log: Path, target: Path | str, kind: str) -> None:
    folder = Path(target).absolute().parent
    before = _listing(folder)
    with pytest.raises(ConfigurationError) as refused:
        run_report([log], None, html=Path(target), out=io.StringIO(), err=io.StringIO())
    message = str(refused.value)
    assert message.startswith(f"{target} is {kind}"), message
    assert "\n" not in message
    status, err = _report_to(log, target)
    assert status == 1
    assert err == f"error: {message}\n"
    assert _listing(folder) == before  # no temporary file left


def test_a_symbolic_link_is_refused_and_its_target_untouched(log: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.html"
    real.write_text("kept")
    link = tmp_path / "report.html"
    link.symlink_to(real)
    _refused(log, link, "a symbolic link")
    assert link.is_symlink()
    assert os.readlink(link) == str(real)
    assert real.read_text() == "kept"


def test_a_dangling_link_is_refused_and_nothing_created(log: Path, tmp_path: Path) -> None:
    link = tmp_path / "report.html"
    link.symlink_to(tmp_path / "elsewhere.html")
    _refused(log, link, "a symbolic link")
    assert not (tmp_path / "elsewhere.html").exists()
    assert link.is_symlink()


def test_the_path_is_named_as_given(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real.html").write_text("kept")
    (tmp_path / "report.html").symlink_to("real.html")
    monkeypatch.chdir(tmp_path)
    _refused(log, "report.html", "a symbolic link")


def test_a_directory_is_refused(log: Path, tmp_path: Path) -> None:
    folder = tmp_path / "report.html"
    folder.mkdir()
    (folder / "inside").write_text("kept")
    _refused(log, folder, "a directory")
    assert _listing(folder) == {"inside"}


@pytest.mark.timeout(60)
def test_a_named_pipe_is_refused_without_opening_it(log: Path, tmp_path: Path) -> None:
    pipe = tmp_path / "report.html"
    os.mkfifo(pipe)
    _refused(log, pipe, "a named pipe")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_a_socket_is_refused(log: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.html"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        _refused(log, path, "a socket")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a device node")
def test_a_device_node_is_refused_and_stays_one(log: Path, tmp_path: Path) -> None:
    device = tmp_path / "full"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # as /dev/full
    except PermissionError:
        pytest.skip("this root may not make device nodes (a container without CAP_MKNOD)")
    _refused(log, device, "a character device")
    found = os.lstat(device)
    assert stat.S_ISCHR(found.st_mode)
    assert found.st_rdev == os.makedev(1, 7)


def test_a_missing_folder_is_named_by_f(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "r.html"
    status, err = _report_to(log, target)
    assert status == 1
    assert err == f"error: {target}: No such file or directory\n"


def test_a_file_for_a_folder_is_named_by_f(log: Path, tmp_path: Path) -> None:
    target = log / "r.html"
    status, err = _report_to(log, target)
    assert status == 1
    assert err == f"error: {target}: Not a directory\n"


@pytest.mark.parametrize(
    ("failing", "code"),
    [
        ("open", errno.EACCES),  # a folder this user may not write
        ("open", errno.EROFS),  # a read-only file system
        ("fsync", errno.ENOSPC),  # a full disk, found when the data reach it
        ("replace", errno.EBUSY),
    ],
)
def test_a_failed_write_names_f_and_leaves_it_as_it_was(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str, code: int
) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    real = getattr(os, failing)

    def fail(*args: object, **kwargs: object) -> object:
        first = args[0] if args else None
        flags = args[1] if len(args) > 1 and isinstance(args[1], int) else 0
        creating = failing == "open" and bool(flags & os.O_CREAT)
        if failing != "open" or creating:  # not the log's reading, only the page's writing
            raise OSError(code, os.strerror(code), first if isinstance(first, Path) else None)
        return real(*args, **kwargs)

    monkeypatch.setattr(os, failing, fail)
    status, err = _report_to(log, target, "--no-cache")  # the report cache would fail too
    monkeypatch.undo()
    assert status == 1
    assert err == f"error: {target}: {os.strerror(code)}\n"
    assert ".spanledger-" not in err
    assert target.read_text() == "old"
    assert _listing(tmp_path) == {"events.jsonl", "report.html"}


def test_a_file_this_user_may_not_write_is_named_and_kept(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``open`` would refuse it (root may write any file, so the check is told so here)."""
    target = tmp_path / "report.html"
    target.write_text("old")
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: path != target and real(path, mode, **kw)
    )
    status, err = _report_to(log, target)
    monkeypatch.undo()
    assert (status, err) == (1, f"error: {target}: Permission denied\n")
    assert target.read_text() == "old"
    assert _listing(tmp_path) == {"events.jsonl", "report.html"}


def test_a_folder_or_file_not_writable_is_named_by_f(
    log: Path, tmp_path: Path, where_modes_bind: list[str]
) -> None:
    """For real, where mode bits bind (as root, with the capabilities that bypass them
    dropped): a read-only F and an F in a read-only folder are named, and F is kept."""

    def report_to(target: Path) -> tuple[int, str]:
        command = ["report", str(log), "--html", str(target)]
        done = subprocess.run(
            [*where_modes_bind, sys.executable, "-m", "spanledger.cli", *command],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return done.returncode, done.stderr

    folder = tmp_path / "locked"
    folder.mkdir()
    target = folder / "report.html"
    target.write_text("old")
    target.chmod(0o444)
    assert report_to(target) == (1, f"error: {target}: Permission denied\n")
    target.chmod(0o644)
    folder.chmod(0o555)
    try:
        status, err = report_to(target)
    finally:
        folder.chmod(0o755)
    assert (status, err) == (1, f"error: {target}: Permission denied\n")
    assert target.read_text() == "old"
