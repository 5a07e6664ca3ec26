"""The built wheel is the product: build it once, check what is inside, install it (not the
source tree) on every Python version the metadata claims, and run it there.

Per version, one fresh venv (no pip of its own: the suite's pip installs into it with
``--python``, through its usual cache, compiling nothing) holding the wheel with every extra:
``spanledger --version`` and the offline demo run, the core imports come from the venv, and
each extra's modules load. One more venv, on the oldest version, holds the bare wheel: the demo
runs there with none of the extras' packages present. The versions are the ``Programming
Language :: Python :: 3.X`` classifiers, so the metadata cannot claim a version nobody installed
on. The venvs are prepared in parallel (the work is mostly waiting on pip); a missing
interpreter skips its version, and fails under ``SPANLEDGER_REQUIRE_E2E=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest

from spanledger._version import __version__
from tests.e2e.conftest import require_backend
from tests.packaging.interpreters import find_interpreter

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "spanledger"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
_PY_CLASSIFIER = "Programming Language :: Python :: 3."
TESTED = sorted(
    (c.removeprefix("Programming Language :: Python :: ") for c in PROJECT["classifiers"]
     if c.startswith(_PY_CLASSIFIER)),
    key=lambda v: tuple(map(int, v.split("."))),
)  # fmt: skip
"""The Python versions the metadata claims, e.g. ``["3.11", "3.12", "3.13"]``."""

pytestmark = pytest.mark.timeout(900)

OFFLINE = {
    # Anything that tried to leave the machine would go to a proxy that is not there; the
    # demo's own stand-in is on 127.0.0.1, which the proxies leave alone.
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}

CORE_CHECK = """
import pathlib, sys
import spanledger
from spanledger.exporters import alert_rules_path
from spanledger.ledger import PriceTable, example_prices_path
from spanledger.providers import OpenAIEmbeddings
from spanledger.testing import StandIn

package = pathlib.Path(spanledger.__file__).resolve().parent
assert package.is_relative_to(pathlib.Path(sys.prefix).resolve()), package
assert (package / "py.typed").is_file()
assert PriceTable.load(example_prices_path()).entries
assert "groups:" in alert_rules_path().read_text(encoding="utf-8")
print("core ok")
"""

ABSENT_CHECK = """
import importlib.util
for name in ("opentelemetry.sdk", "langfuse", "prometheus_client", "genai_prices", "rank_bm25",
             "pygal"):
    assert importlib.util.find_spec(name) is None, name
print("no extras")
"""

EXTRA_CHECKS: dict[str, str] = {
    # What spanledger loads for each extra, as configure() and the CLI load it.
    "otel": """
import importlib
for name in ("spanledger.exporters.otel", "spanledger.exporters.pipelines",
             "spanledger.exporters._span_delivery", "spanledger.exporters._metric_delivery",
             "opentelemetry.exporter.otlp.proto.http.trace_exporter",
             "opentelemetry.exporter.otlp.proto.http.metric_exporter"):
    importlib.import_module(name)
print("otel ok")
""",
    "langfuse": """
import importlib
for name in ("spanledger.exporters.langfuse", "spanledger.exporters._langfuse_pipeline"):
    importlib.import_module(name)
print("langfuse ok")
""",
    "prometheus": """
from spanledger.exporters.prometheus import PrometheusEndpoint
endpoint = PrometheusEndpoint(port=0)
endpoint.close()
print("prometheus ok")
""",
    "genai-prices": """
import subprocess, sys, tempfile, pathlib
from spanledger.ledger import PriceTable
out = pathlib.Path(tempfile.mkdtemp()) / "imported.toml"
cli = pathlib.Path(sys.executable).with_name("spanledger")
subprocess.run([str(cli), "prices", "import", "genai-prices", "--output", str(out)], check=True)
assert PriceTable.load(out).entries
print("genai-prices ok")
""",
    "bm25": """
from spanledger.providers.fallback import BM25Step, with_fallback
outcome = with_fallback([BM25Step()], "tides", ["the moon and the tides", "clocks"])
assert outcome.status == "ok" and outcome.results[0].index == 0, outcome
print("bm25 ok")
""",
    "html": """
import pathlib, subprocess, sys, tempfile
folder = pathlib.Path(tempfile.mkdtemp())
cli = pathlib.Path(sys.executable).with_name("spanledger")
subprocess.run([str(cli), "demo"], cwd=folder, check=True, capture_output=True)
page = folder / "report.html"
subprocess.run([str(cli), "report", "spanledger-events.jsonl", "--html", str(page)],
               cwd=folder, check=True, capture_output=True)
assert "<svg" in page.read_text()
print("html ok")
""",
}

EXTRA_NEEDS = {
    "otel": {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"},
    "langfuse": {"langfuse"},
    "prometheus": {"prometheus-client", "opentelemetry-sdk", "opentelemetry-exporter-prometheus"},
    "genai-prices": {"genai-prices"},
    "bm25": {"rank-bm25"},
    "html": {"pygal"},
}
"""The distributions each extra must itself declare: the installed checks run with every
extra present, so this keeps one extra from leaning on another's dependencies."""


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path
    twine: str


@dataclass
class Installed:
    """What happened in one version's venv; each test asserts on its part."""

    version: str
    missing: str | None = None
    steps: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per step."""


def _run(args: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=cwd
    )


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would put the source tree on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist and the wheel built from it, once per session, and twine's verdict on both."""
    out = tmp_path_factory.mktemp("dist")
    built = _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)])
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = sorted(out.glob("*.whl"))
    sdists = sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1, sorted(out.iterdir())
    assert len(sdists) == 1, sorted(out.iterdir())
    checked = _run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, (*wheels, *sdists))]
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return Dist(wheels[0], sdists[0], checked.stdout)


BARE = "bare"
"""The key of the venv that holds the wheel without extras."""


def _install(version: str, dist: Dist, base: Path, *, extras: bool) -> Installed:
    result = Installed(version)
    python = find_interpreter(version)
    if python is None:
        result.missing = f"no CPython {version} on this machine (PATH or pyenv)"
        return result
    name = f"py{version}" if extras else f"py{version}-{BARE}"
    venv = base / name
    target = venv / "bin" / "python"
    cli = str(venv / "bin" / "spanledger")
    pip = [sys.executable, "-m", "pip", "--python", str(target), "install", "--quiet"]
    pip.append("--no-compile")  # nothing here runs twice: byte-compiling is wasted time
    work = base / f"work-{name}"
    work.mkdir()
    offline = _clean_env(**OFFLINE)

    def step(name: str, args: list[str], env: dict[str, str], timeout: float = 600) -> None:
        started = time.monotonic()
        result.steps[name] = _run(args, env=env, cwd=work, timeout=timeout)
        result.timings[name] = round(time.monotonic() - started, 1)

    step("venv", [str(python), "-m", "venv", "--without-pip", str(venv)], _clean_env())
    wanted = f"{dist.wheel}[{','.join(EXTRA_CHECKS)}]" if extras else str(dist.wheel)
    step("install", [*pip, wanted], _clean_env())
    step("version", [cli, "--version"], offline, 60)
    step("demo", [cli, "demo"], offline, 120)
    step("core", [str(target), "-c", CORE_CHECK], offline, 120)
    if not extras:
        step("absent", [str(target), "-c", ABSENT_CHECK], offline, 60)
        return result
    for extra, script in EXTRA_CHECKS.items():
        step(extra, [str(target), "-c", script], offline, 120)
    return result


@pytest.fixture(scope="session")
def installed(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Installed]:
    """Every claimed version's venv, and the bare one, prepared in parallel."""
    base = tmp_path_factory.mktemp("venvs")
    jobs = [(version, True) for version in TESTED] + [(TESTED[0], False)]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        done = list(pool.map(lambda job: _install(job[0], dist, base, extras=job[1]), jobs))
    pairs = zip(done, jobs, strict=True)
    return {each.version if extras else BARE: each for each, (_, extras) in pairs}


def _prepared(each: Installed) -> Installed:
    if each.missing is not None:
        require_backend(each.missing)
    for step in ("venv", "install"):
        outcome = each.steps[step]
        assert outcome.returncode == 0, f"{step}: {outcome.stdout[-2000:]}{outcome.stderr[-2000:]}"
    return each


@pytest.fixture(params=TESTED)
def venv(request: pytest.FixtureRequest, installed: dict[str, Installed]) -> Installed:
    """The venv of one claimed version, with every extra."""
    return _prepared(installed[request.param])


@pytest.fixture
def bare(installed: dict[str, Installed]) -> Installed:
    """The venv with the wheel alone."""
    return _prepared(installed[BARE])


def _ok(each: Installed, step: str) -> str:
    outcome = each.steps[step]
    assert outcome.returncode == 0, (
        f"{step} on {each.version}:\n{outcome.stdout[-2000:]}\n{outcome.stderr[-3000:]}"
    )
    return outcome.stdout


# --------------------------------------------------------------------------- the metadata


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return HeaderParser().parsestr(archive.read(name).decode("utf-8"))


def test_the_claimed_versions_start_at_requires_python() -> None:
    assert {"3.11", "3.12"} <= set(TESTED)
    assert PROJECT["requires-python"] == f">={TESTED[0]}"


def test_twine_passes_both_artifacts(dist: Dist) -> None:
    assert dist.twine.count("PASSED") == 2, dist.twine


def test_the_metadata_says_what_the_project_is(dist: Dist) -> None:
    meta = _metadata(dist.wheel)
    assert meta["Name"] == "spanledger"
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == f">={TESTED[0]}"
    classifiers = set(meta.get_all("Classifier") or [])
    assert {"Typing :: Typed", "Operating System :: OS Independent"} <= classifiers
    assert {f"Programming Language :: Python :: {v}" for v in TESTED} <= classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    # no project home yet: no address is better than a placeholder that leads nowhere
    assert not [url for url in meta.get_all("Project-URL") or [] if ".example" in url]
    assert meta["Description-Content-Type"] == "text/markdown"


def test_each_extra_declares_what_its_modules_need(dist: Dist) -> None:
    meta = _metadata(dist.wheel)
    declared: dict[str, set[str]] = {}
    for requirement in meta.get_all("Requires-Dist") or []:
        spec, _, marker = requirement.partition(";")
        if "extra ==" not in marker:
            continue
        extra = marker.split("extra ==", 1)[1].strip().strip("'\"")
        name = spec.strip().split("[")[0]
        for stop in "<>=!~ ":
            name = name.split(stop)[0]
        declared.setdefault(extra, set()).add(name.lower())
    for extra, needs in EXTRA_NEEDS.items():
        assert needs <= declared.get(extra, set()), (extra, declared.get(extra))
    assert set(EXTRA_CHECKS) == set(EXTRA_NEEDS)


# --------------------------------------------------------------------------- the contents


def test_the_wheel_holds_the_package_and_its_data(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as archive:
        names = set(archive.namelist())
        license_name = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        assert archive.read(license_name) == (ROOT / "LICENSE").read_bytes()
        alerts = archive.read("spanledger/data/spanledger-alerts.yml")
    sources = {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sources <= names, sorted(sources - names)[:10]
    assert "spanledger/py.typed" in names
    prices = {f"spanledger/data/{p.name}" for p in (PACKAGE / "data").glob("*.toml")}
    assert prices
    assert prices <= names
    assert alerts == (ROOT / "dashboards" / "prometheus" / "spanledger-alerts.yml").read_bytes()
    assert not any(n.startswith(("tests/", "benchmarks/", "dashboards/")) for n in names)


def test_the_sdist_holds_what_a_rebuild_and_a_reader_need(dist: Dist) -> None:
    import tarfile

    with tarfile.open(dist.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"} <= names
    assert "src/spanledger/data/spanledger-alerts.yml" in names


def test_the_alert_rules_in_the_repository_are_the_shipped_file() -> None:
    """One copy: ``dashboards/prometheus`` links to the file inside the package."""
    from spanledger.exporters import alert_rules_path

    linked = ROOT / "dashboards" / "prometheus" / "spanledger-alerts.yml"
    assert linked.resolve() == alert_rules_path().resolve()
    assert alert_rules_path().is_relative_to(PACKAGE)


# --------------------------------------------------------------------------- installed


def test_version_matches_the_metadata(venv: Installed, dist: Dist) -> None:
    assert _ok(venv, "version").strip() == f"spanledger {_metadata(dist.wheel)['Version']}"


def test_the_demo_runs_offline_from_the_wheel(venv: Installed) -> None:
    out = _ok(venv, "demo")
    assert "stand-in listening on http://127.0.0.1:" in out
    assert "cited token share" in out


def test_the_core_imports_from_the_venv(venv: Installed) -> None:
    assert _ok(venv, "core").strip() == "core ok"


def test_the_demo_needs_none_of_the_extras(bare: Installed) -> None:
    assert _ok(bare, "absent").strip() == "no extras"
    assert "cited token share" in _ok(bare, "demo")
    assert _ok(bare, "core").strip() == "core ok"
    assert _ok(bare, "version").strip() == f"spanledger {__version__}"


@pytest.mark.parametrize("extra", list(EXTRA_CHECKS))
def test_each_extra_loads_what_spanledger_loads_for_it(venv: Installed, extra: str) -> None:
    assert _ok(venv, extra).strip().endswith(f"{extra} ok")


def test_report_the_time_taken(
    installed: dict[str, Installed], capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a check of behaviour but of budget: each version's install and runs stay within
    a few minutes (they run in parallel)."""
    times = {key: each.timings for key, each in installed.items() if each.missing is None}
    with capsys.disabled():
        for version, steps in times.items():
            print(f"\nwheel venv {version}: {sum(steps.values()):.0f} s; by step: {steps}")
    assert all(sum(steps.values()) < 600 for steps in times.values()), times


def test_a_missing_interpreter_skips_here_and_fails_where_e2e_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert find_interpreter("3.99") is None
    missing = Installed("3.99", missing="no CPython 3.99 on this machine (PATH or pyenv)")
    monkeypatch.setenv("SPANLEDGER_REQUIRE_E2E", "1")
    with pytest.raises(pytest.fail.Exception, match=r"no CPython 3\.99"):
        _prepared(missing)
    monkeypatch.delenv("SPANLEDGER_REQUIRE_E2E")
    with pytest.raises(pytest.skip.Exception, match=r"no CPython 3\.99"):
        _prepared(missing)
