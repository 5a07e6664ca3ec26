"""Every ```python block in README.md runs as written, offline, in a fresh interpreter.

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

README = Path(__file__).resolve().parents[1] / "README.md"

PYTHON_BLOCKS_AT_LEAST = 6
"""How many python blocks README.md had when this test was written: one may turn into another
language on purpose (a fragment that cannot run), but none may drop out unnoticed."""

OPENING = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w+-]*)\s*$")
PYTHON_LANGUAGES = {"python", "py", "python3"}

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

CONSOLE_LINE = re.compile(r"(embed |rerank) \S+ +\S+ +\d+\.\d ms  .+")
"""A line ``ConsoleSink`` writes to standard error (``describe_event``)."""

EXPECTED_STDOUT: dict[str, list[re.Pattern[str]]] = {
    # The request's report, then the event log read back: both calls, priced, and the summary.
    "Quickstart": [
        re.compile(r"request turn-42"),
        re.compile(r"  cited token share: \d+\.\d%.*"),
        re.compile(r"embedding embed-v4\.0 input_tokens=[1-9]\d* \d+\.\d+ USD"),
        re.compile(r"rerank rerank-v3\.5 search_units=1 input_tokens=None \d+\.\d+ USD"),
        re.compile(r"1 request summary; 0 unreadable lines"),
    ],
    # One event per call, in order: the instrumented client, the Cohere client, a client made
    # under the process-wide switch, the httpx transport, the manual block.
    "Instrumenting calls you already make": [
        re.compile(r"embedding openai text-embedding-3-small input_tokens=[1-9]\d*"),
        re.compile(r"rerank cohere rerank-v3\.5 search_units=1 input_tokens=None"),
        re.compile(r"embedding openai text-embedding-3-small input_tokens=[1-9]\d*"),
        re.compile(r"embedding openai text-embedding-3-small input_tokens=[1-9]\d*"),
        re.compile(r"embedding mine m input_tokens=3"),
    ],
    # The cloud and local provider classes: each call's figures and how the ledger priced it.
    "Clouds and local servers": [
        re.compile(r"gcp\.gemini gemini-embedding-001 input_tokens=[1-9]\d* priced \S+"),
        re.compile(r"gcp\.vertex_ai gemini-embedding-001 input_tokens=[1-9]\d* priced \S+"),
        re.compile(r"gcp\.vertex_ai semantic-ranker-default-004 None estimated 0\.001"),
        re.compile(r"azure\.ai\.openai my-embedder input_tokens=[1-9]\d* priced \S+"),
        re.compile(r"mistral_ai mistral-embed input_tokens=[1-9]\d* priced \S+"),
        re.compile(r"ollama nomic-embed-text input_tokens=[1-9]\d* not_billed 0"),
    ],
    # The clouds' SDKs, each instrumented: one event per call with the figure the wire carried.
    "The clouds' and local servers' SDKs": [
        re.compile(r"embedding aws\.bedrock amazon\.titan-embed-text-v2:0 input_tokens=[1-9]\d*"),
        re.compile(r"embedding aws\.bedrock cohere\.embed-v4:0 input_tokens=[1-9]\d*"),
        re.compile(r"rerank aws\.bedrock amazon\.rerank-v1:0 None"),
        re.compile(r"embedding gcp\.gemini gemini-embedding-001 input_tokens=[1-9]\d*"),
        re.compile(r"embedding mistral_ai mistral-embed input_tokens=[1-9]\d*"),
        re.compile(r"embedding ollama nomic-embed-text input_tokens=[1-9]\d*"),
        re.compile(r"embedding azure\.ai\.openai my-embedder input_tokens=[1-9]\d*"),
    ],
    # Each framework recipe: what its request was billed and the share of context it cited.
    "Recipes: the frameworks": [
        re.compile(r"billed \d+ (tokens|search unit); cited token share \d+%"),
    ],
}
"""What a block in each README section must print: these lines, in order (each a full line)."""


@dataclass(frozen=True)
class Block:
    index: int
    line: int
    """The README line of the opening fence."""
    section: str
    """The ``## `` heading the block sits under."""
    code: str

    @property
    def first_line(self) -> str:
        return next((line for line in self.code.splitlines() if line.strip()), "")

    @property
    def test_count(self) -> int:
        """How many test functions it defines (a test module is run with pytest)."""
        return len(re.findall(r"^def test_\w*\(", self.code, re.MULTILINE))

    @property
    def name(self) -> str:
        return f"{self.index}-L{self.line}-{self.first_line}"


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, in order, each under its section heading."""
    blocks: list[Block] = []
    section = ""
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        opening = OPENING.match(line)
        if opening is None:
            if line.startswith("## "):
                section = line[3:].strip()
            number += 1
            continue
        end = number + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"README.md:{number + 1}: a fence that never closes"
        if opening["language"].lower() in PYTHON_LANGUAGES:
            code = textwrap.dedent("\n".join(lines[number + 1 : end])) + "\n"
            blocks.append(Block(len(blocks), number + 1, section, code))
        number = end + 1
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


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


def run_block(
    block: Block, directory: Path, proxy: str = _CLOSED_PORT
) -> subprocess.CompletedProcess[str]:
    script = directory / f"test_readme_block_{block.index}.py"
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
        timeout=60,
        check=False,
    )


def unexpected_stderr(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not CONSOLE_LINE.fullmatch(line)]


def test_the_readme_keeps_its_python_blocks() -> None:
    assert len(BLOCKS) >= PYTHON_BLOCKS_AT_LEAST
    sections = {block.section for block in BLOCKS}
    assert set(EXPECTED_STDOUT) <= sections, "an expected output names a section with no block"


def test_the_extraction_finds_blocks_in_order_with_their_sections() -> None:
    text = (
        "## One\n\n```python\nprint(1)\n```\n\n```sh\nls\n```\n\n"
        "## Two\n\n  ```py\n  print(2)\n  ```\n```toml\na = 1\n```\n"
    )
    blocks = python_blocks(text)
    assert [(b.index, b.line, b.section, b.code) for b in blocks] == [
        (0, 3, "One", "print(1)\n"),
        (1, 13, "Two", "print(2)\n"),
    ]


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


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_a_readme_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    done = run_block(block, tmp_path)
    where = f"README.md:{block.line} ({block.section})"
    assert "Traceback" not in done.stderr, f"{where}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{where}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert unexpected_stderr(done.stderr) == [], f"{where}\n{done.stderr[-3000:]}"
    printed = done.stdout.splitlines()
    if block.test_count:
        assert re.fullmatch(rf"{block.test_count} passed in .*", printed[-1]), done.stdout
    for pattern in EXPECTED_STDOUT.get(block.section, []):
        matched = next((n for n, line in enumerate(printed) if pattern.fullmatch(line)), None)
        assert matched is not None, f"{where}: no line {pattern.pattern!r} in\n{done.stdout}"
        printed = printed[matched + 1 :]
