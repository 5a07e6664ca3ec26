"""A real Prometheus (Debian's ``prometheus`` package) on 127.0.0.1, for the e2e tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

__all__ = ["PrometheusServer", "find_binary", "free_port"]


def find_binary(name: str) -> str | None:
    return shutil.which(name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PrometheusServer:
    """Scrapes ``targets`` every second and evaluates ``rule_files`` every second."""

    def __init__(self, binary: str, targets: list[str], rule_files: list[Path]) -> None:
        self.binary = binary
        self.port = free_port()
        self._workdir = Path(tempfile.mkdtemp(prefix="spanledger-prometheus-"))
        config = self._workdir / "prometheus.yml"
        rules = ", ".join(f'"{path}"' for path in rule_files)
        scrape = ", ".join(f'"{target}"' for target in targets)
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: [{rules}]\n"
            "scrape_configs:\n  - job_name: spanledger\n"
            f"    static_configs:\n      - targets: [{scrape}]\n"
        )
        self._log = (self._workdir / "prometheus.log").open("w")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self._workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self._client = httpx.Client(base_url=self.url, timeout=5.0, trust_env=False)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            try:
                if self._client.get("/-/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"Prometheus did not become ready:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = (self._workdir / "prometheus.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def query(self, expr: str) -> list[dict[str, Any]]:
        response = self._client.get("/api/v1/query", params={"query": expr})
        body = response.json()
        if body.get("status") != "success":
            raise AssertionError(f"query failed: {expr}: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self._client.get("/api/v1/alerts").json()["data"]["alerts"]
        return alerts

    def close(self) -> None:
        self._client.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._log.close()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
