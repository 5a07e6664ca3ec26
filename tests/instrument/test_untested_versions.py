"""A library's version never breaks the application spanledger joins.

A release outside the versions the tests cover is left unpatched with one warning per process
(package, release, tested versions), and the rest is switched on; its HTTP is still recorded
with ``http=True``. A library whose classes lack a declared method, or whose patching raises,
is skipped whole the same way. ``instrument(client)`` records a client of an untested release
that has the shape spanledger knows (with the warning) and refuses one that has not, with a
``TypeError`` naming the release and the tested versions, the client untouched. The releases
here are faked through ``importlib.metadata``; ``tests/older_sdks`` runs the same rules with a
release below its range really installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cohere
import pytest
from google.genai import models as genai_models
from openai.resources.embeddings import Embeddings

import spanledger
from spanledger import EmbeddingEvent, Recorder
from spanledger.instrumentation import (
    SdkState,
    _everywhere,
    _skipped,
    instrumented_sdks,
    is_instrumented,
    sdk_status,
)
from spanledger.testing import StandIn
from tests.instrument.conftest import OPS, TEXTS, Tape

COHERE_TESTED = "5.21 and later, below 6, or 7.3 and later, below 8"
OPENAI_TESTED = "2.52 and later, below 3, or 3.57 and later, below 4"
LOGGER = "spanledger.instrumentation"
COHERE_CLASSES = (cohere.ClientV2, cohere.AsyncClientV2, cohere.Client, cohere.AsyncClient)


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    """Each test starts as a process that has warned of nothing, with the switch off."""
    _skipped._forget_warnings()
    yield
    spanledger.uninstrument()
    _skipped._forget_warnings()


def installed_release(monkeypatch: pytest.MonkeyPatch, distribution: str, version: str) -> None:
    """Make ``distribution`` look installed at ``version`` (``""``: not installed)."""
    real = importlib.metadata.version

    def version_of(name: str) -> str:
        if name != distribution:
            return real(name)
        if not version:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", version_of)


def warnings_of(caplog: pytest.LogCaptureFixture, event: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == LOGGER
        and record.levelno == logging.WARNING
        and record.getMessage().startswith(event + " ")
    ]


def cohere_state() -> list[object]:
    return [vars(kind).get(name) for kind in COHERE_CLASSES for name in ("embed", "rerank")]


def test_an_untested_release_is_left_alone_with_one_warning_and_the_rest_switched_on(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    installed_release(monkeypatch, "cohere", "8.0.1")
    before = cohere_state()
    vendors = {standin.base_url("cohere"): "cohere"}
    spanledger.instrument(http=True, vendors=vendors)
    spanledger.instrument()
    spanledger.instrument(sdks=["cohere", "openai"], http=True, vendors=vendors)

    assert cohere_state() == before  # nothing of cohere patched
    assert "cohere" not in instrumented_sdks()
    assert {"openai", "voyageai", "http"} <= set(instrumented_sdks())
    [warning] = warnings_of(caplog, "untested_version")
    assert "package='cohere'" in warning
    assert "version='8.0.1'" in warning
    assert f"tested='{COHERE_TESTED}'" in warning
    status = sdk_status()["cohere"]
    assert (status.state, status.version, status.tested) == (
        SdkState.UNTESTED_VERSION,
        "8.0.1",
        COHERE_TESTED,
    )

    tape = Tape()
    openai_op, cohere_op = OPS[0], OPS[1]
    with spanledger.use(Recorder([tape])):
        openai_op.call(openai_op.client(standin), "m-u1", TEXTS)
        cohere_op.call(cohere_op.client(standin), "m-u1", TEXTS)  # its HTTP, under http=True
    assert sorted(event.provider for event in tape.events) == ["cohere", "openai"]
    assert all(isinstance(event, EmbeddingEvent) and event.usage for event in tape.events)


def test_configure_and_the_switch_start_with_an_untested_release_installed(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installed_release(monkeypatch, "google-genai", "9.1.0")
    log = tmp_path / "events.jsonl"
    recorder = spanledger.configure(events_path=log, install=False, environ={})
    try:
        spanledger.instrument(http=True)
        assert "google.genai" not in instrumented_sdks()
        op = OPS[0]
        with spanledger.use(recorder):
            op.call(op.client(standin), "m-u2", TEXTS)
    finally:
        recorder.shutdown()
    [line] = log.read_text().splitlines()
    assert json.loads(line)["provider"] == "openai"


def test_a_client_of_an_untested_release_with_the_known_shape_is_recorded_with_a_warning(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    installed_release(monkeypatch, "openai", "9.0.0")
    op = OPS[0]
    first = spanledger.instrument(op.client(standin))
    second = spanledger.instrument(op.client(standin))
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        op.call(first, "m-u3", TEXTS)
        op.call(second, "m-u3", TEXTS)
    assert is_instrumented(first)
    assert [event.provider for event in tape.events] == ["openai", "openai"]
    [warning] = warnings_of(caplog, "untested_version")
    assert "package='openai'" in warning
    assert "version='9.0.0'" in warning
    assert f"tested='{OPENAI_TESTED}'" in warning
    spanledger.uninstrument(first)
    spanledger.uninstrument(second)


def _without_its_http_client(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A release that renamed the attribute the integration hooks."""
    del client._client


def _without_a_declared_method(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A release that moved ``Embeddings.create``."""
    monkeypatch.delattr(Embeddings, "create")


@pytest.mark.parametrize(
    "change", [_without_its_http_client, _without_a_declared_method], ids=["hook", "method"]
)
def test_a_client_of_an_untested_release_with_an_unknown_shape_is_refused_untouched(
    standin: StandIn,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    change: Any,
) -> None:
    installed_release(monkeypatch, "openai", "9.0.0")
    client = OPS[0].client(standin)
    change(client, monkeypatch)
    embeddings = client.embeddings
    attributes = dict(vars(client))
    resource = dict(vars(embeddings))
    with pytest.raises(TypeError) as refused:
        spanledger.instrument(client)
    message = str(refused.value)
    assert "openai 9.0.0" in message
    assert OPENAI_TESTED in message
    assert "OpenAI" in message
    assert vars(client) == attributes
    assert vars(embeddings) == resource
    assert not is_instrumented(client)
    assert warnings_of(caplog, "untested_version") == []


def test_a_declared_method_missing_from_the_installed_class_skips_that_library_whole(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kept_async = vars(genai_models.AsyncModels)["embed_content"]
    monkeypatch.delattr(genai_models.Models, "embed_content")
    spanledger.instrument(http=True)

    assert vars(genai_models.AsyncModels)["embed_content"] is kept_async  # not half-patched
    assert "google.genai" not in instrumented_sdks()
    assert {"openai", "cohere", "http"} <= set(instrumented_sdks())
    [warning] = warnings_of(caplog, "library_not_patched")
    assert "package='google-genai'" in warning
    assert "google.genai.models.Models.embed_content not found" in warning
    status = sdk_status()["google.genai"]
    assert status.state is SdkState.FAILED
    assert status.version == importlib.metadata.version("google-genai")
    assert status.reason is not None
    assert "Models.embed_content" in status.reason

    tape = Tape()
    op = OPS[1]
    with spanledger.use(Recorder([tape])):
        op.call(op.client(standin), "m-u4", TEXTS)
    [event] = tape.events
    assert event.provider == "cohere"

    spanledger.uninstrument()
    assert sdk_status()["google.genai"].state is SdkState.OFF
    monkeypatch.undo()
    spanledger.instrument(sdks=["google.genai"])
    assert instrumented_sdks() == ("google.genai",)


def test_a_failure_while_patching_undoes_what_that_library_had_patched(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = _everywhere._patch
    patched: list[str] = []

    def patch_then_fail(method: Any, *args: Any) -> Any:
        if method.module == "cohere" and patched:
            raise RuntimeError("the SDK changed under us")
        if method.module == "cohere":
            patched.append(method.name)
        return real(method, *args)

    monkeypatch.setattr(_everywhere, "_patch", patch_then_fail)
    before = cohere_state()
    spanledger.instrument(sdks=["openai", "cohere"])
    assert patched == ["embed"]
    assert cohere_state() == before
    assert instrumented_sdks() == ("openai",)
    [warning] = warnings_of(caplog, "library_not_patched")
    assert "package='cohere'" in warning
    assert "RuntimeError" in warning
    assert "the SDK changed under us" not in warning  # exceptions are named by type only
    assert sdk_status()["cohere"].state is SdkState.FAILED


def test_a_named_library_that_is_not_installed_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    installed_release(monkeypatch, "ollama", "")
    spanledger.instrument(sdks=["ollama", "openai"])
    spanledger.instrument(sdks=["ollama"])
    assert instrumented_sdks() == ("openai",)
    [warning] = warnings_of(caplog, "library_not_installed")
    assert "package='ollama'" in warning
    assert sdk_status()["ollama"].state is SdkState.NOT_INSTALLED
    assert sdk_status()["ollama"].version is None


def test_a_mistyped_name_is_still_a_bad_setting() -> None:
    with pytest.raises(ValueError, match="no SDK named 'cohere2'"):
        spanledger.instrument(sdks=["cohere2"])
    assert instrumented_sdks() == ()


def test_sdk_status_names_every_library_with_its_release_and_tested_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    installed_release(monkeypatch, "voyageai", "0.1.0")
    spanledger.instrument(sdks=["openai"])
    status = sdk_status()
    assert set(status) == {
        "openai",
        "cohere",
        "voyageai",
        "botocore",
        "google.genai",
        "mistralai",
        "ollama",
        "vertexai",
        "sentence_transformers",
        "flashrank",
        "langchain_core",
        "haystack",
        "llama_index.core",
    }
    assert status["openai"].state is SdkState.SWITCHED_ON
    assert status["openai"].version == importlib.metadata.version("openai")
    assert status["cohere"].state is SdkState.OFF
    assert status["cohere"].tested == COHERE_TESTED
    assert status["voyageai"].state is SdkState.UNTESTED_VERSION
    assert status["voyageai"].reason is not None
    assert "voyageai 0.1.0" in status["voyageai"].reason
    assert all(
        s.reason is None for s in status.values() if s.state is not SdkState.UNTESTED_VERSION
    )
    assert instrumented_sdks() == ("openai",)  # its meaning is unchanged


UNCONFIGURED = """
import importlib.metadata
real = importlib.metadata.version
importlib.metadata.version = lambda name: "8.0.1" if name == "cohere" else real(name)
import spanledger
spanledger.instrument(http=True)
spanledger.instrument()
spanledger.instrument(sdks=["cohere", "openai"])
from spanledger.instrumentation import instrumented_sdks
assert "cohere" not in instrumented_sdks() and "openai" in instrumented_sdks()
spanledger.uninstrument()
"""


def test_an_application_that_configured_no_logging_sees_the_warning_once() -> None:
    done = subprocess.run(
        [sys.executable, "-c", UNCONFIGURED],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    [line] = [line for line in done.stderr.splitlines() if "untested_version" in line]
    assert "package='cohere'" in line
    assert "version='8.0.1'" in line
    assert COHERE_TESTED in line


GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "process-wide-switch.md"


def test_the_guide_lists_each_librarys_tested_versions_as_declared() -> None:
    from spanledger.integrations import INTEGRATIONS

    lines = GUIDE.read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("<!-- tested versions"))
    table = lines[start + 1 : lines.index("", start)]
    assert table[:2] == ["| `sdks=` name | package | tested versions |", "|---|---|---|"]
    rows = table[2:]
    expected = [
        f"| `{i.name}` | {i.distribution} | "
        + ", ".join(f"`{spec}`" for spec in i.specifiers())
        + " |"
        for i in INTEGRATIONS
    ]
    assert rows == expected
