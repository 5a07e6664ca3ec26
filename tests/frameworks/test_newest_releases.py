"""Runs the recording tests in ``.venv-newest``, where the newest release of every supported SDK
and framework is installed, unpinned (``.ci/install-newest.sh`` makes it from the ``newest``
extra): a release published since the pins were written is tested the day it appears.

The lane runs ``tests/instrument``, ``tests/frameworks``, ``tests/local_models``,
``tests/test_recording_core.py`` and ``tests/differential`` (the fuzz with a small budget: its
breadth runs in the main suite; here every path meets the newest releases). All must pass, none
skipped. What it leaves out, and why, is ``LEFT_OUT`` and ``DESELECTED``. It also holds every
installed SDK inside the versions its integration declares tested: a new major fails here until
its tests pass and its range is widened.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from spanledger.integrations import INTEGRATIONS
from tests.e2e.conftest import require_backend

ROOT = Path(__file__).parents[2]
PYTHON = ROOT / ".venv-newest" / "bin" / "python"
LANE = (
    "tests/instrument",
    "tests/frameworks",
    "tests/local_models",
    "tests/test_recording_core.py",
    "tests/differential",
)
CAPPED = (
    "caps google-genai below 3 (through google-cloud-aiplatform), so it cannot be installed "
    "beside google-genai's newest release; the dev extra runs it at its newest"
)
LEFT_OUT = {
    "tests/frameworks/test_newest_releases.py": "this lane itself",
    "tests/frameworks/test_older_sdks.py": "the older SDKs' lane, in .venv-older",
    "tests/instrument/test_vertexai_sdk.py": f"google-cloud-aiplatform {CAPPED}",
    "tests/instrument/test_coexistence.py": (
        "other instrumentation libraries, at the releases the dev extra pins: this lane is "
        "about the SDKs and frameworks spanledger records"
    ),
    "tests/instrument/test_peer_matrix.py": "the same peers as test_coexistence.py",
}
"""Files of the lane's folders it does not run, each with why."""
DESELECTED = {
    "tests/frameworks/test_google_mistral_ollama_frameworks.py::"
    "test_langchain_vertexai_embeddings": f"langchain-google-vertexai {CAPPED}",
    "tests/frameworks/test_google_mistral_ollama_frameworks.py::"
    "test_llamaindex_google_genai_embedding": "llama-index-embeddings-google-genai caps "
    "google-genai below 3; the dev extra runs it at its newest",
    "tests/instrument/test_bedrock_clients_before_switch.py::"
    "test_beside_opentelemetrys_botocore_instrumentation": "OpenTelemetry's botocore "
    "instrumentation, a peer at the release the dev extra pins (as test_peer_matrix.py)",
}
"""Tests of the lane's files it does not run, each with why."""
FUZZ_EXAMPLES = "40"

VERSIONS = """
import importlib.metadata, json, re, sys, tomllib
extra = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["newest"]
found = {}
for requirement in extra:
    name = re.match(r"[A-Za-z0-9_.-]+", requirement).group()
    try:
        found[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        found[name] = None
print(json.dumps(found))
"""


def installed_versions() -> dict[str, str | None]:
    done = subprocess.run(
        [str(PYTHON), "-c", VERSIONS, str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: dict[str, str | None] = json.loads(done.stdout)
    return found


def pinned_ranges() -> dict[str, set[tuple[tuple[int, ...], tuple[int, ...]]]]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins: dict[str, set[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
    for requirement in extras["dev"] + extras["older-sdks"]:
        ranged = re.fullmatch(r"([\w-]+)>=([\d.]+),<([\d.]+)", requirement)
        if ranged:
            low, below = (tuple(map(int, v.split("."))) for v in ranged.group(2, 3))
            pins.setdefault(ranged.group(1), set()).add((low, below))
    return pins


@pytest.mark.timeout(960)
def test_the_newest_releases_pass_the_recording_tests(capsys: pytest.CaptureFixture[str]) -> None:
    if not PYTHON.exists():
        require_backend("no .venv-newest: run .ci/install-newest.sh")
    versions = installed_versions()
    with capsys.disabled():
        print("\nnewest releases tested:")
        for name, version in sorted(versions.items()):
            print(f"  {name} {version}")

    missing = [name for name, version in versions.items() if version is None]
    assert not missing, f"not installed in .venv-newest: {missing}"
    pins = pinned_ranges()
    for integration in INTEGRATIONS:
        version = versions.get(integration.distribution)
        if version is None:  # google-cloud-aiplatform: left out, see CAPPED
            continue
        assert integration.tests(version), (
            f"{integration.distribution} {version} is newer than the versions its tests cover "
            f"({integration.tested_versions()}): run its tests against it, then widen"
        )
        release = tuple(int(n) for n in re.findall(r"\d+", version)[:3])
        for lowest, below in set(integration.tested) - pins.get(integration.distribution, set()):
            assert lowest <= release < below, (  # a range no pin holds is this lane's
                f"{integration.distribution} {version} is not in its unpinned tested range"
            )

    command = [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", *LANE]
    command += [f"--ignore={path}" for path in LEFT_OUT]
    command += [f"--deselect={test}" for test in DESELECTED]
    finished = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SPANLEDGER_FUZZ_EXAMPLES": FUZZ_EXAMPLES},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    tail = finished.stdout[-6000:] + finished.stderr[-2000:]
    assert finished.returncode == 0, tail
    summary = re.search(r"(\d+) passed", finished.stdout)
    assert summary is not None, tail
    assert int(summary.group(1)) >= 900, tail
    deselected = re.search(r"(\d+) deselected", finished.stdout)
    assert deselected is not None, tail
    assert int(deselected.group(1)) == len(DESELECTED), tail
    assert not re.search(r"\d+ (skipped|xfailed|xpassed|error)", finished.stdout), tail
    assert sys.executable != str(PYTHON)
