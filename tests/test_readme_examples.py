"""Every ```python block in README.md and on every page of the documentation site (docs/**/*.md)
runs as written, offline, in a fresh interpreter.

Each block is saved to a file of its own in an empty directory and run with this interpreter:
as a script, or with pytest when it is a test module (it defines ``test_`` functions). The
environment carries no OTEL_*, LANGFUSE_* or SPANLEDGER_* settings and no vendor API keys, and
every HTTP proxy variable points at a closed port on 127.0.0.1 with only loopback exempt, so an
example that tries to reach anything but the local stand-in fails instead of going online.

Standard error may hold only the lines ``ConsoleSink`` writes there; a warning, a logged
complaint or a traceback fails the block. Blocks whose output says what they did have it
checked, so an example that runs but records or reads back nothing fails too.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
"""The README and every page of the site, pages added later included."""

PYTHON_BLOCKS_AT_LEAST: dict[str, int] = {
    "README.md": 1,
    "docs/getting-started.md": 1,
    "docs/guides/providers.md": 1,
    "docs/guides/instrument-sdk.md": 1,
    "docs/guides/clouds.md": 2,
    "docs/guides/frameworks/langchain.md": 2,
    "docs/guides/frameworks/llamaindex.md": 2,
    "docs/guides/frameworks/haystack.md": 2,
    "docs/guides/frameworks/litellm.md": 1,
    "docs/guides/attribution.md": 2,
    "docs/guides/attribution-by-hand.md": 1,
    "docs/guides/backends/index.md": 1,
    "docs/guides/backends/langfuse.md": 1,
    "docs/guides/backends/prometheus.md": 1,
    "docs/guides/prices.md": 1,
    "docs/guides/production.md": 1,
    "docs/guides/fleet-reports.md": 1,
    "docs/guides/testing.md": 1,
    "docs/guides/fallback-chains.md": 6,
    "docs/guides/local-models.md": 2,
    "docs/guides/html-report.md": 1,
}
"""How many python blocks each file had when its floor was set: one may turn into another
language on purpose (a fragment that cannot run), but none may drop out unnoticed. A page not
listed here has no floor, and its blocks run all the same."""

OPENING = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w+-]*)\s*$")
PYTHON_LANGUAGES = {"python", "py", "python3"}
HEADING = re.compile(r"^##? (?P<title>.+)$")

_CLOSED_PORT = "http://127.0.0.1:9"
"""The discard port, where nothing listens: a request sent through this proxy is refused."""

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_DROPPED_PREFIXES = ("OTEL_", "LANGFUSE_", "SPANLEDGER_", "PYTEST_", "HAYSTACK_")
_VENDOR_KEYS = {
    "OPENAI_API_KEY",
    "CO_API_KEY",
    "COHERE_API_KEY",
    "JINA_API_KEY",
    "VOYAGE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "MISTRAL_API_KEY",
    "OLLAMA_HOST",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
}

CONSOLE_LINE = re.compile(r"(embed |rerank) \S+ +\S+ +\d+\.\d ms  .+|request \S+: .+")
"""A line ``ConsoleSink`` writes to standard error (``describe_event``,
``describe_attribution``)."""

_QUICKSTART = [
    re.compile(r"request turn-42"),
    re.compile(r"  cited token share: \d+\.\d%.*"),
    re.compile(r"embedding embed-v4\.0 input_tokens=[1-9]\d* \d+\.\d+ USD"),
    re.compile(r"rerank rerank-v3\.5 search_units=1 input_tokens=None \d+\.\d+ USD"),
    re.compile(r"1 request summary; 0 unreadable lines"),
]
_RECIPE = re.compile(r"billed \d+ (tokens|search unit); cited token share \d+%")

EXPECTED_STDOUT: dict[tuple[str, str], list[re.Pattern[str]]] = {
    # The request's report, then the event log read back: both calls, priced, and the summary.
    ("README.md", "Quickstart"): _QUICKSTART,
    ("docs/getting-started.md", "Quickstart"): _QUICKSTART,
    # A provider call's figures, a 429 as the error the caller sees, and both events.
    ("docs/guides/providers.md", "A call, and a failure"): [
        re.compile(r"2 input_tokens=[1-9]\d*"),
        re.compile(r"provider_rate_limit 429 2\.0"),
        re.compile(r"embedding openai text-embedding-3-small"),
        re.compile(r"rerank_failed voyageai fail-429"),
    ],
    # One event per call, in order: the instrumented client, the Cohere client, a client made
    # under the process-wide switch, the httpx transport, the manual block.
    ("docs/guides/instrument-sdk.md", "Every way in, in one example"): [
        re.compile(r"embedding openai text-embedding-3-small input_tokens=[1-9]\d*"),
        re.compile(r"rerank cohere rerank-v3\.5 search_units=1 input_tokens=None"),
        re.compile(r"embedding openai text-embedding-3-small input_tokens=[1-9]\d*"),
        re.compile(r"embedding openai text-embedding-3-small input_tokens=[1-9]\d*"),
        re.compile(r"embedding mine m input_tokens=3"),
    ],
    # The cloud and local provider classes: each call's figures and how the ledger priced it.
    ("docs/guides/clouds.md", "The provider classes"): [
        re.compile(r"gcp\.gemini gemini-embedding-001 input_tokens=[1-9]\d* priced \S+"),
        re.compile(
            r"gcp\.vertex_ai gemini-embedding-001 input_tokens=[1-9]\d* "
            r"billable_characters=[1-9]\d* priced \S+"
        ),
        re.compile(
            r"gcp\.vertex_ai text-embedding-005 input_tokens=[1-9]\d* "
            r"billable_characters=[1-9]\d* priced \S+"
        ),
        re.compile(r"gcp\.vertex_ai semantic-ranker-default-004 None estimated 0\.001"),
        re.compile(r"azure\.ai\.openai my-embedder input_tokens=[1-9]\d* priced \S+"),
        re.compile(r"mistral_ai mistral-embed input_tokens=[1-9]\d* priced \S+"),
        re.compile(r"ollama nomic-embed-text input_tokens=[1-9]\d* not_billed 0"),
    ],
    # The clouds' SDKs, each instrumented: one event per call with the figure the wire carried.
    ("docs/guides/clouds.md", "The clouds' and local servers' SDKs"): [
        re.compile(r"embedding aws\.bedrock amazon\.titan-embed-text-v2:0 input_tokens=[1-9]\d*"),
        re.compile(r"embedding aws\.bedrock cohere\.embed-v4:0 input_tokens=[1-9]\d*"),
        re.compile(r"rerank aws\.bedrock amazon\.rerank-v1:0 None"),
        re.compile(r"embedding gcp\.gemini gemini-embedding-001 input_tokens=[1-9]\d*"),
        re.compile(r"embedding mistral_ai mistral-embed input_tokens=[1-9]\d*"),
        re.compile(r"embedding ollama nomic-embed-text input_tokens=[1-9]\d*"),
        re.compile(r"embedding azure\.ai\.openai my-embedder input_tokens=[1-9]\d*"),
    ],
    # Each framework recipe: what its request was billed and the share of context it cited.
    ("docs/guides/frameworks/langchain.md", "Recording Voyage's reranker"): [_RECIPE],
    ("docs/guides/frameworks/llamaindex.md", "Recording OpenAI embeddings"): [_RECIPE],
    ("docs/guides/frameworks/haystack.md", "Recording Cohere's ranker"): [_RECIPE],
    # A pipeline that attributes itself: what it rendered and cited, by the builder's marking.
    ("docs/guides/frameworks/haystack.md", "Attribution with no hand-written call"): [
        re.compile(r"rendered 3, cited 2 by \['framework_marking'\]"),
        re.compile(r"cited token share \d+%"),
    ],
    # An LCEL chain and a LlamaIndex query engine that attribute themselves: the model's
    # answer cites two of the three numbered sources, by the labels the prompt gave them.
    ("docs/guides/frameworks/langchain.md", "Attribution with no hand-written call"): [
        re.compile(r"The sources say so \[1\]\. They agree \[2\]\."),
        re.compile(r"rendered 3, cited 2 by \['prompt_label'\]"),
        re.compile(r"cited token share \d+%"),
    ],
    ("docs/guides/frameworks/llamaindex.md", "Attribution with no hand-written call"): [
        re.compile(r"The sources say so \[1\]\. They agree \[2\]\."),
        re.compile(r"rendered 3, cited 2 by \['prompt_label'\]"),
        re.compile(r"cited token share \d+%"),
    ],
    ("docs/guides/frameworks/litellm.md", "LiteLLM"): [
        re.compile(r"billed [1-9]\d* tokens and 1 search unit; cited token share \d+%"),
    ],
    # A plain app's Cohere rerank and OpenAI chat through their SDKs: the rerank serves and
    # selects, the chat request is read for what it rendered and cited, and the context priced.
    ("docs/guides/attribution.md", "With no hand-written call"): [
        re.compile(r"The sources say so \[1\]\. They agree \[2\]\."),
        re.compile(r"served 4, selected 3, rendered 3, cited 2"),
        re.compile(r"cited token share \d+%"),
        re.compile(r"context spend 0\.\d+ USD, cited 0\.\d+"),
    ],
    # A request that reconciles, and one that cites what it never rendered and a label that
    # names nothing: both problems named, by frame id and count.
    ("docs/guides/attribution-by-hand.md", "When a report does not reconcile"): [
        re.compile(r"turn-1: cited token share \d+%, reconcilable True"),
        re.compile(r"turn-2: reconcilable False"),
        re.compile(r"  unknown_label 1 citation label\(s\) in the answer match no frame"),
        re.compile(r"  incoherent kb/d cited but not rendered"),
    ],
    # A bad setting refused by name, then a configured recorder's log read back, priced.
    ("docs/guides/backends/index.md", "`configure()`"): [
        re.compile(r"refused: SPANLEDGER_PROMETHEUS_PORT must be .*"),
        re.compile(r"rerank rerank-v3\.5 priced 0\.002 USD"),
    ],
    # The app's Langfuse client and spanledger's from the same key: spanledger's own stays off
    # the app's provider (payload allowed, counted); the app's client, passed in, carries both.
    ("docs/guides/backends/langfuse.md", "When your app uses Langfuse too"): [
        re.compile(r"your provider: \['your answer'\]"),
        re.compile(r"spanledger's own: 1 observation, payload: True"),
        re.compile(r"your provider: \['embeddings embed-v4\.0', 'your answer'\]"),
    ],
    # The scrape: the rerank's search unit and its priced spend, as Prometheus reads them.
    ("docs/guides/backends/prometheus.md", "Prometheus and Grafana"): [
        re.compile(r'spanledger_rerank_search_units_total\{.*"rerank-v3\.5".*\} 1\.0'),
        re.compile(r'spanledger_cost_total\{.*spanledger_cost_status="priced"\} 0\.002'),
    ],
    # A backend where nothing listens: the call and the shutdown stay bounded, and every span
    # produced is accounted for.
    ("docs/guides/production.md", "A dead backend, end to end"): [
        re.compile(r"call under 1 s: True; shutdown within 3 s: True"),
        re.compile(
            r"spans produced 1, exported 0, failed \d, dropped \d, pending 0; balanced: True"
        ),
    ],
    # A glob entry prices one model; the other is unpriced, named in a warning, never $0.
    ("docs/guides/prices.md", "Pricing events"): [
        re.compile(r"WARNING spanledger\.ledger usage_not_priced .*model='my-fine-tune'.*"),
        re.compile(r"text-embedding-3-small priced \S+ USD None"),
        re.compile(r"my-fine-tune unpriced None None no_price_entry"),
    ],
    # The report over a directory of logs: every call, grouped by model, priced from the table.
    ("docs/guides/fleet-reports.md", "`spanledger report`"): [
        re.compile(r"6 calls"),
        re.compile(r"embed-v4\.0 +priced +3 .*"),
        re.compile(r"rerank-v3\.5 +priced +3 +0\.006 USD .*"),
    ],
    # A chain whose remote step answers 503: the local cross-encoder ranks, nothing is billed.
    ("docs/guides/fallback-chains.md", "A chain with local steps"): [
        re.compile(r"outcome: degraded answered by attempt 1"),
        re.compile(r"  provider cohere failed provider_unavailable"),
        re.compile(r"  cross_encoder sentence_transformers ok None"),
        re.compile(r"ranking: \[\(\d, -?\d\.\d+\), \(\d, -?\d\.\d+\)\]"),
        re.compile(r"costs: \['not_billed', 'not_billed'\] spend: 0"),
    ],
    ("docs/guides/fallback-chains.md", "Gates and keys"): [
        re.compile(
            r"degraded \[\('nightly_model', 'skipped', 'quota_spent'\), "
            r"\('canary', 'failed', 'step_error'\), \('bm25okapi', 'ok', None\)\]"
        ),
    ],
    # Two 503s open the breaker, the third call is skipped unsent, the probe closes it.
    ("docs/guides/fallback-chains.md", "Circuit breakers"): [
        re.compile(r"call 1: failed provider_unavailable -> breaker closed"),
        re.compile(r"call 2: failed provider_unavailable -> breaker open"),
        re.compile(r"call 3: skipped circuit_open -> breaker open"),
        re.compile(r"call 4: ok None -> breaker closed"),
        re.compile(r"requests sent to Cohere: 3"),
    ],
    ("docs/guides/fallback-chains.md", "Deadlines and cancellation"): [
        re.compile(r"aborted aborted search_units=1 input_tokens=None True"),
    ],
    ("docs/guides/fallback-chains.md", "Async"): [
        re.compile(r"ok 0 search_units=None input_tokens=[1-9]\d*"),
    ],
}
"""What a block under each (file, section) must print: these lines, in order (each a full
line)."""

SLOW_IMPORTS = ("sentence_transformers", "flashrank")
"""Blocks that load a model in process: importing torch and loading weights takes most of a
minute on a busy machine, so they get more time."""


@dataclass(frozen=True)
class Block:
    index: int
    """Its position among the python blocks of its file."""
    line: int
    """The line of the opening fence."""
    section: str
    """The ``# `` or ``## `` heading the block sits under."""
    code: str
    document: str = "README.md"
    """The file it comes from, relative to the repository."""

    @property
    def first_line(self) -> str:
        return next((line for line in self.code.splitlines() if line.strip()), "")

    @property
    def test_count(self) -> int:
        """How many test functions it defines (a test module is run with pytest)."""
        return len(re.findall(r"^def test_\w*\(", self.code, re.MULTILINE))

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}-{self.first_line}"

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line} ({self.section})"


def python_blocks(text: str, document: str = "README.md") -> list[Block]:
    """The ```python blocks of a Markdown text, in order, each under its section heading (the
    nearest ``# `` or ``## `` heading above it)."""
    blocks: list[Block] = []
    section = ""
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        opening = OPENING.match(line)
        if opening is None:
            heading = HEADING.match(line)
            if heading is not None:
                section = heading["title"].strip()
            number += 1
            continue
        end = number + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"{document}:{number + 1}: a fence that never closes"
        if opening["language"].lower() in PYTHON_LANGUAGES:
            code = textwrap.dedent("\n".join(lines[number + 1 : end])) + "\n"
            blocks.append(Block(len(blocks), number + 1, section, code, document))
        number = end + 1
    return blocks


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


BLOCKS = [
    block
    for path in DOCUMENTS
    for block in python_blocks(path.read_text(encoding="utf-8"), relative(path))
]


def example_environment(home: Path, proxy: str = _CLOSED_PORT) -> dict[str, str]:
    """This process's environment without settings an example could pick up by accident, with
    every proxy variable pointing at ``proxy`` and only loopback exempt."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.upper().startswith(_DROPPED_PREFIXES)
        and name.upper() not in _VENDOR_KEYS
        and name.upper() not in {*_PROXY_VARIABLES, "NO_PROXY"}
    }
    for name in _PROXY_VARIABLES:
        env[name] = env[name.lower()] = proxy
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["HOME"] = str(home)
    env["HAYSTACK_TELEMETRY_ENABLED"] = "False"  # Haystack phones home unless told not to
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # A test module needs only pytest itself: no plugin of this environment may join in.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def block_timeout(block: Block) -> float:
    """Seconds a block may run: longer for one that loads a model in process."""
    return 180.0 if any(name in block.code for name in SLOW_IMPORTS) else 60.0


def run_block(
    block: Block, directory: Path, proxy: str = _CLOSED_PORT
) -> subprocess.CompletedProcess[str]:
    script = directory / f"test_example_block_{block.index}.py"
    script.write_text(block.code, encoding="utf-8")
    if block.test_count:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", script.name]
    else:
        command = [sys.executable, script.name]
    home = directory / "home"
    home.mkdir()
    return subprocess.run(
        command,
        cwd=directory,
        env=example_environment(home, proxy),
        capture_output=True,
        text=True,
        timeout=block_timeout(block),
        check=False,
    )


def unexpected_stderr(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not CONSOLE_LINE.fullmatch(line)]


@pytest.mark.parametrize("document", sorted(PYTHON_BLOCKS_AT_LEAST))
def test_each_file_keeps_its_python_blocks(document: str) -> None:
    count = sum(1 for block in BLOCKS if block.document == document)
    assert count >= PYTHON_BLOCKS_AT_LEAST[document], f"{document} has {count} python blocks"


def test_the_blocks_come_from_the_readme_and_every_page() -> None:
    documents = {relative(path) for path in DOCUMENTS}
    assert "README.md" in documents
    assert set(PYTHON_BLOCKS_AT_LEAST) <= documents
    assert {relative(path) for path in (ROOT / "docs").rglob("*.md")} <= documents


def test_every_expected_output_names_a_section_with_a_block() -> None:
    sections = {(block.document, block.section) for block in BLOCKS}
    assert set(EXPECTED_STDOUT) - sections == set()


def test_the_extraction_finds_blocks_in_order_with_their_sections() -> None:
    text = (
        "## One\n\n```python\nprint(1)\n```\n\n```sh\nls\n```\n\n"
        "## Two\n\n  ```py\n  print(2)\n  ```\n```toml\na = 1\n```\n"
        "### Three, a sub-section\n\n```python\nprint(3)\n```\n"
    )
    blocks = python_blocks(text, "docs/page.md")
    assert [(b.index, b.line, b.section, b.code, b.document) for b in blocks] == [
        (0, 3, "One", "print(1)\n", "docs/page.md"),
        (1, 13, "Two", "print(2)\n", "docs/page.md"),
        (2, 21, "Two", "print(3)\n", "docs/page.md"),
    ]
    titled = python_blocks("# A page\n\n```python\nprint(0)\n```\n", "docs/a.md")
    assert [(b.section, b.line) for b in titled] == [("A page", 3)]


def test_the_environment_sends_anything_but_loopback_to_the_proxy(tmp_path: Path) -> None:
    """With a listener of ours in place of the closed port: a request for a public host reaches
    it (and so, in the real runs, is refused), one for loopback goes straight to its server."""
    seen: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as proxy:
        proxy.settimeout(30)

        def answer_once() -> None:
            connection, _ = proxy.accept()
            with connection:
                seen.append(connection.recv(65536).split(b"\r\n", 1)[0])
                connection.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

        listener = threading.Thread(target=answer_once)
        listener.start()
        code = (
            "import httpx\n"
            "from spanledger.testing import StandIn\n"
            "print(httpx.get('http://example.com/').status_code)\n"
            "with StandIn() as standin:\n"
            "    url = standin.base_url('openai') + '/v1/embeddings'\n"
            "    print(httpx.post(url, json={'model': 'm', 'input': ['a']}).status_code)\n"
        )
        done = run_block(
            Block(0, 1, "Check", code), tmp_path, f"http://127.0.0.1:{proxy.getsockname()[1]}"
        )
        listener.join(timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["502", "200"]
    assert seen == [b"GET http://example.com/ HTTP/1.1"]


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, marks=pytest.mark.timeout(block_timeout(b) + 30)) for b in BLOCKS],
    ids=[block.name for block in BLOCKS],
)
def test_a_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    done = run_block(block, tmp_path)
    where = block.where
    assert "Traceback" not in done.stderr, f"{where}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{where}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert unexpected_stderr(done.stderr) == [], f"{where}\n{done.stderr[-3000:]}"
    printed = done.stdout.splitlines()
    if block.test_count:
        assert re.fullmatch(rf"{block.test_count} passed in .*", printed[-1]), done.stdout
    for pattern in EXPECTED_STDOUT.get((block.document, block.section), []):
        matched = next((n for n, line in enumerate(printed) if pattern.fullmatch(line)), None)
        assert matched is not None, f"{where}: no line {pattern.pattern!r} in\n{done.stdout}"
        printed = printed[matched + 1 :]
