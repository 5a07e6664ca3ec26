"""The walk one call takes through spanledger's modules: which rooms it visits, in what order.

A tracer notes the spanledger module that runs after every Python call and return; runs of the
same module are one stop. A *room* is a module; its *layer* is its top-level part's place in
the import-linter layers contract (pyproject.toml). A *climb* is a stop in a higher layer than
the stop before it (control going back up); a *return* is a stop in a room the walk had already
left. ``python -m tests.walk`` prints the walk of one request through the recording transport.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "spanledger"


def layers() -> dict[str, int]:
    """Each top-level part of spanledger and its height (0: the ground floor)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    height: dict[str, int] = {}
    for level, line in enumerate(reversed(contract["layers"])):
        for part in line.replace(":", "|").split("|"):
            height[part.strip()] = level
    return height


def _room(frame: FrameType) -> str | None:
    path = Path(frame.f_code.co_filename)
    try:
        relative = path.resolve().relative_to(PACKAGE)
    except ValueError:
        return None
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["spanledger", *parts])


@dataclass
class Walk:
    """The stops of one walk, in order."""

    stops: list[str] = field(default_factory=list)

    def note(self, room: str | None) -> None:
        if room is not None and (not self.stops or self.stops[-1] != room):
            self.stops.append(room)

    @property
    def rooms(self) -> list[str]:
        return list(dict.fromkeys(self.stops))

    def climbs(self, height: dict[str, int]) -> list[tuple[str, str]]:
        def level(room: str) -> int:
            parts = room.split(".")
            return height.get(parts[1] if len(parts) > 1 else "", len(height))

        return [
            (before, after)
            for before, after in zip(self.stops, self.stops[1:], strict=False)
            if level(after) > level(before)
        ]

    def returns(self) -> list[str]:
        seen: set[str] = set()
        found: list[str] = []
        for index, room in enumerate(self.stops):
            if room in seen:
                found.append(room)
            if index:
                seen.add(self.stops[index - 1])
        return found

    def summary(self, height: dict[str, int]) -> str:
        return (
            f"{len(self.stops)} stops in {len(self.rooms)} rooms, "
            f"{len(self.climbs(height))} climbs back up, {len(self.returns())} returns"
        )


@contextmanager
def walking() -> Iterator[Walk]:
    """Trace the spanledger modules that run inside the block."""
    walk = Walk()

    def tracer(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "call":
            walk.note(_room(frame))
            return local
        return None

    def local(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "return" and frame.f_back is not None:
            walk.note(_room(frame.f_back))
        return local

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield walk
    finally:
        sys.settrace(previous)


def transport_request_walk() -> tuple[Walk, Walk]:
    """One Cohere rerank through the recording transport (answered in process): the walk of
    reading its facts (recognition and the request's facts), and of the whole request."""
    import httpx

    import spanledger
    from spanledger.capture import http as http_capture

    body = (
        b'{"id":"r1","results":[{"index":1,"relevance_score":0.9},'
        b'{"index":0,"relevance_score":0.2}],"meta":{"billed_units":{"search_units":1}}}'
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    recorder = spanledger.Recorder([lambda event: None])
    client = httpx.Client(
        transport=spanledger.instrumentation.transport(httpx.MockTransport(answer))
    )
    request = {"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"], "top_n": 2}
    facts_walk = Walk()
    original = http_capture.watch_for

    def watched(*args: Any, **kwargs: Any) -> Any:
        with walking() as inner:
            found = original(*args, **kwargs)
        facts_walk.stops = inner.stops
        return found

    with spanledger.use(recorder):
        client.post("https://api.cohere.com/v2/rerank", json=request)  # warm caches
        with walking() as whole:
            client.post("https://api.cohere.com/v2/rerank", json=request)
        vars(http_capture)["watch_for"] = watched
        try:
            client.post("https://api.cohere.com/v2/rerank", json=request)
        finally:
            vars(http_capture)["watch_for"] = original
    client.close()
    recorder.shutdown()
    return facts_walk, whole


def main() -> None:
    height = layers()
    facts, whole = transport_request_walk()
    for title, walk in (("reading the request's facts", facts), ("the whole request", whole)):
        print(f"{title}: {walk.summary(height)}")
        print("  rooms:", ", ".join(walk.rooms))
        print("  stops:", " > ".join(stop.removeprefix("spanledger.") for stop in walk.stops))
        print("  climbs:", ", ".join(f"{a}->{b}" for a, b in walk.climbs(height)))


if __name__ == "__main__":
    main()
