"""Matching a request's frames against a model call, against ``json.loads`` of that call's
request body in the same run.

50 frames of 1 KB are served; a prompt of 64 KB (and of 4 x that size, to show the cost grows
with the prompt) holds them after ``Source n:`` label lines, among instructions and other
text; a 2 KB answer cites some by label and copies a few sentences. Measured: indexing the
frames, matching the prompt (rendered parts and labels), reading the answer's labels, and
finding the copied runs; the baseline is one ``json.loads`` of the chat request body that
carried the prompt. Two totals are printed: ``prompt``, what each model call of a request costs
once the request's frames are indexed (matching, labels, copied runs), and ``all``, a request's
first call, which also indexes the frames and splits their sentences. Targets: the whole
matching <= 1 ms and <= 2 x the baseline; 4 x the prompt <= 4.4 x the time.

Times are the CPU time of this thread (``time.thread_time``), medians of many rounds, so that
other work on a shared machine does not land in them.

    python benchmarks/bench_matching.py [rounds]
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable

from spanledger.attribution.frames import FrameId
from spanledger.attribution.matching import FrameIndex, FrameText, answer_labels

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
FRAMES = 50


def sentence(rng: random.Random, words: list[str]) -> str:
    chosen = rng.choices(words, k=rng.randint(8, 20))
    return " ".join(chosen).capitalize() + "."


def passage(rng: random.Random, words: list[str], size: int) -> str:
    text = ""
    while len(text) < size:
        text += sentence(rng, words) + " "
    return text[:size].rsplit(" ", 1)[0]


def workload(prompt_kb: int) -> tuple[list[FrameText], str, str]:
    rng = random.Random(7)
    words = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(3000)
    ]
    texts = [passage(rng, words, 1024) for _ in range(FRAMES)]
    frames = [FrameText(FrameId.of("search", str(i), text), text) for i, text in enumerate(texts)]
    sources = "\n\n".join(f"Source {i + 1}:\n{text}" for i, text in enumerate(texts))
    other = max(0, prompt_kb * 1024 - len(sources))
    history = "\n".join(sentence(rng, words) for _ in range(other // 90))
    prompt = f"Answer from the sources, citing them as [n].\n\n{history}\n\n{sources}\n\nQ: why?"
    claims = [f"{sentence(rng, words)[:-1]} [{rng.randint(1, FRAMES)}]." for _ in range(14)]
    copied = [texts[3].split(". ")[1] + ".", texts[9].split(". ")[2] + "."]
    answer = " ".join(claims[:7] + copied + claims[7:])[:2048]
    return frames, prompt, answer


def best(work: Callable[[], object]) -> float:
    gc.collect()
    timings = []
    for _ in range(ROUNDS):
        started = time.thread_time()
        work()
        timings.append(time.thread_time() - started)
    return statistics.median(timings)


def measure(kb: int) -> tuple[dict[str, float], float]:
    """Each part's median time and the whole matching's, and one ``json.loads``'s."""
    frames, prompt, answer = workload(kb)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]})
    index = FrameIndex(frames)
    found = index.match(prompt)
    assert len(found.spans) == FRAMES
    assert len(found.labels) == FRAMES
    rendered = list(found.spans)

    def everything() -> None:
        fresh = FrameIndex(frames)
        matched = fresh.match(prompt)
        answer_labels(answer, matched.labels)
        fresh.quoted(answer, list(matched.spans))

    def one_prompt() -> None:
        matched = index.match(prompt)
        answer_labels(answer, matched.labels)
        index.quoted(answer, list(matched.spans))

    parts = {
        "index": best(lambda: FrameIndex(frames)),
        "match": best(lambda: index.match(prompt)),
        "labels": best(lambda: answer_labels(answer, found.labels)),
        "quoted": best(lambda: index.quoted(answer, rendered)),
        "prompt": best(one_prompt),
        "all": best(everything),
    }
    return parts, best(lambda: json.loads(body))


def main() -> None:
    print("matching 50 frames of 1 KB and a 2 KB answer, against json.loads of the request body")
    names = ("index", "match", "labels", "quoted", "prompt", "all")
    print(
        f"{'prompt':>7} "
        + " ".join(f"{name:>7}" for name in names)
        + f" {'loads':>7} {'prompt/loads':>12} {'all/loads':>9}"
    )
    totals = {}
    for kb in (64, 256):
        parts, loads = measure(kb)
        totals[kb] = parts["all"]
        row = " ".join(f"{parts[name] * 1e6:>6.0f}u" for name in names)
        print(
            f"{kb:>5}KB {row} {loads * 1e6:>6.0f}u {parts['prompt'] / loads:>12.2f}"
            f" {parts['all'] / loads:>9.2f}"
        )
    print(f"4 x the prompt: {totals[256] / totals[64]:.2f} x the time (target <= 4.4)")
    print("targets: all <= 1 ms and <= 2 x loads")


if __name__ == "__main__":
    main()
