"""A real Arize Phoenix server on 127.0.0.1, run as a subprocess for the end-to-end tests.

Phoenix lives in its own virtualenv (``.ci/install-phoenix.sh`` makes ``<repo>/.venv-phoenix``)
so its many dependencies never meet the project's. ``PhoenixServer`` starts ``phoenix serve``
on free loopback ports with a throwaway working directory (its SQLite database lives there),
with telemetry, external resources, the agent assistant and the MCP server turned off, waits
for ``/readyz``, and reads spans back through the REST API
(``GET /v1/projects/{project}/spans``, cursor-paginated). Every request it makes goes to
127.0.0.1, with proxy variables ignored. On exit it ends the server's process group.

Phoenix's gRPC OTLP receiver binds ``[::]:<grpc port>`` whatever ``PHOENIX_HOST`` says (the
address is hard-coded in ``phoenix/server/grpc_server.py``); it is only listened on, never used.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

__all__ = [
    "DEFAULT_PHOENIX_BIN",
    "HOST",
    "PhoenixServer",
    "PhoenixStartupError",
    "find_phoenix_binary",
    "free_ports",
]

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PHOENIX_BIN = REPO_ROOT / ".venv-phoenix" / "bin" / "phoenix"
PHOENIX_BIN_ENV = "SPANLEDGER_PHOENIX_BIN"

STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.25
PAGE_LIMIT = 1000
MAX_PAGES = 50
LOG_TAIL_LINES = 60

# Settings that keep the server on loopback, offline and quiet. Names and meanings are from
# phoenix/config.py of the installed arize-phoenix.
_QUIET_OFFLINE_ENV = {
    "PHOENIX_TELEMETRY_ENABLED": "false",  # no FullStory / Scarf pixels
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",  # no fonts, telemetry, WASM download
    "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    "PHOENIX_AGENTS_DISABLE_WEB_ACCESS": "true",
    "PHOENIX_AGENTS_DISABLE_GITHUB": "true",
    "PHOENIX_AGENTS_DISABLE_BASH": "true",
    "PHOENIX_ENABLE_MCP_SERVER": "false",
    "PHOENIX_ENABLE_PROMETHEUS": "false",
    "PHOENIX_ENABLE_AUTH": "false",
    "PHOENIX_LOG_MIGRATIONS": "false",
    "PHOENIX_LOGGING_LEVEL": "warning",
    "PYTHONUNBUFFERED": "1",
}
# Inherited variables that could point the server (or its own instrumentation) elsewhere.
_STRIPPED_PREFIXES = ("PHOENIX_", "OTEL_")


class PhoenixStartupError(RuntimeError):
    """``phoenix serve`` exited or did not become ready in time; the message has its log tail."""


def find_phoenix_binary() -> Path | None:
    """``$SPANLEDGER_PHOENIX_BIN``, else ``<repo>/.venv-phoenix/bin/phoenix``, if executable."""
    configured = os.environ.get(PHOENIX_BIN_ENV)
    candidate = Path(configured) if configured else DEFAULT_PHOENIX_BIN
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that were free on 127.0.0.1 a moment ago (all probes are
    held open together, so the OS cannot hand out the same port twice)."""
    with contextlib.ExitStack() as stack:
        probes = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            for _ in range(count)
        ]
        for probe in probes:
            probe.bind((HOST, 0))
        return [int(probe.getsockname()[1]) for probe in probes]


class PhoenixServer:
    """``phoenix serve`` on 127.0.0.1 for the length of a ``with`` block."""

    def __init__(self, binary: Path, *, startup_timeout: float = STARTUP_TIMEOUT_S) -> None:
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.port, self.grpc_port = free_ports(2)
        self.startup_seconds: float | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._client = httpx.Client(base_url=self.base_url, timeout=10.0, trust_env=False)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def otlp_traces_endpoint(self) -> str:
        """Phoenix's OTLP/HTTP (protobuf) traces receiver."""
        return f"{self.base_url}/v1/traces"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        self._workdir = tempfile.TemporaryDirectory(prefix="spanledger-phoenix-")
        workdir = Path(self._workdir.name)
        self._log_path = workdir / "phoenix-server.log"
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(_STRIPPED_PREFIXES)
        }
        env.update(_QUIET_OFFLINE_ENV)
        env.update(
            {
                "PHOENIX_HOST": HOST,
                "PHOENIX_PORT": str(self.port),
                "PHOENIX_GRPC_PORT": str(self.grpc_port),
                "PHOENIX_WORKING_DIR": str(workdir),
                "HOME": str(workdir),
                "NO_PROXY": HOST,
                "no_proxy": HOST,
            }
        )
        began = time.monotonic()
        with self._log_path.open("wb") as log:
            self._process = subprocess.Popen(  # a fixed argv, no shell
                [str(self.binary), "serve"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env=env,
                start_new_session=True,  # its own process group, ended as one in stop()
            )
        try:
            self._wait_ready(began)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_ready(self, began: float) -> None:
        assert self._process is not None
        deadline = began + self.startup_timeout
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise PhoenixStartupError(
                    f"phoenix serve exited with code {code} before it was ready\n{self.log_tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if self._client.get("/readyz", timeout=2.0).status_code == 200:
                    return
            time.sleep(POLL_INTERVAL_S)
        raise PhoenixStartupError(
            f"phoenix serve was not ready on {self.base_url} within {self.startup_timeout:g} s\n"
            f"{self.log_tail()}"
        )

    def stop(self) -> None:
        """End the server's process group (SIGTERM, then SIGKILL) and remove its directory."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                self._signal_group(process, signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._signal_group(process, signal.SIGKILL)
                    process.wait(timeout=STOP_TIMEOUT_S)
            # Children left in the group after the leader exited.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        self._client.close()
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)  # the group id is the leader's pid (start_new_session)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server's combined stdout and stderr."""
        if self._log_path is None or not self._log_path.exists():
            return "(no phoenix server log)"
        text = self._log_path.read_text(encoding="utf-8", errors="replace")
        tail = "\n".join(text.splitlines()[-lines:])
        return f"--- phoenix serve log (last {lines} lines) ---\n{tail}\n--- end of log ---"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ reading spans back

    def span_pages(self, project: str = "default") -> list[dict[str, Any]] | None:
        """Every page of ``GET /v1/projects/{project}/spans`` as returned, newest span first;
        ``None`` while the project does not exist yet (Phoenix creates it on its first span)."""
        pages: list[dict[str, Any]] = []
        params: dict[str, str | int] = {"limit": PAGE_LIMIT}
        for _ in range(MAX_PAGES):
            response = self._client.get(f"/v1/projects/{project}/spans", params=params)
            if response.status_code == 404:
                return None
            response.raise_for_status()
            page: dict[str, Any] = response.json()
            pages.append(page)
            cursor = page.get("next_cursor")
            if not cursor:
                return pages
            params = {"limit": PAGE_LIMIT, "cursor": cursor}
        raise AssertionError(f"more than {MAX_PAGES * PAGE_LIMIT} spans in project {project!r}")

    def spans(
        self, project: str = "default", expected: int = 1, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """The project's spans once at least ``expected`` are stored (ingestion is async)."""
        return [
            span
            for page in self.wait_for_pages(project, expected, timeout)
            for span in page["data"]
        ]

    def wait_for_pages(
        self, project: str = "default", expected: int = 1, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """Like ``spans`` but the raw response bodies, for checks on everything Phoenix says."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            pages = self.span_pages(project)
            if pages is not None:
                seen = sum(len(page["data"]) for page in pages)
                if seen >= expected:
                    return pages
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"Phoenix project {project!r} holds {seen} span(s) after {timeout:g} s; "
                    f"expected at least {expected}\n{self.log_tail()}"
                )
            time.sleep(POLL_INTERVAL_S)
