"""What ``instrument(http=True)`` costs a request that is not a vendor call.

Every request through ``requests`` or an httpx client's default transport passes the patched
method, which only looks at the method and the path before handing the request on. Timed here:
a POST of JSON to a non-vendor route on the loopback stand-in, through a ``requests`` session
and through an ``httpx.Client``, with the switch off and on (switched outside the timing),
rounds interleaved, medians of the round-by-round ratios. Target: at most 1.02 x unpatched.

    python benchmarks/bench_http_switch.py [rounds] [calls]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import httpx
import requests

import spanledger
from spanledger.testing import StandIn


def timed(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    body = {"query": "not a vendor call", "limit": 10}
    with StandIn() as standin, requests.Session() as session, httpx.Client() as client:
        url = f"{standin.url}/elsewhere/v1/search"
        clients: dict[str, Callable[[], object]] = {
            "requests session": lambda: session.post(url, json=body),
            "httpx client": lambda: client.post(url, json=body),
        }
        ratios: dict[str, list[float]] = {name: [] for name in clients}
        for call in clients.values():
            timed(call, calls)  # warm-up
        for _ in range(rounds):
            for name, call in clients.items():
                off = timed(call, calls)
                spanledger.instrument(sdks=[], http=True)
                on = timed(call, calls)
                spanledger.uninstrument()
                off_again = timed(call, calls)
                ratios[name].append(on / statistics.mean([off, off_again]))
    print("a non-vendor request with instrument(http=True), against the same request unpatched")
    for name, found in ratios.items():
        print(f"{name:18s} {statistics.median(found):6.3f}x (target <= 1.02x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
