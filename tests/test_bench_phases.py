"""Slow phases: a server that stops accepting drafts for a few runs (as the seed author's bench showed: five
fast runs, then slow ones at a quarter of the speed, recovered) is named as such, with each run's acceptance
read from vLLM's counters between runs; the GPU mode the figures were measured in is stated and recorded."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from olarespack.bench.phases import slow_phase
from test_bench_client import FakeServer, bench, chunk, event, fake, metrics, models, sse  # noqa: F401


def falling_back(
    counts: dict[str, int], slow_runs: set[int]
) -> Callable[[BaseHTTPRequestHandler, dict[str, Any]], None]:
    """vLLM's stream shape; during `slow_runs` (counting every request, warm-ups first) the drafts are refused:
    one token per event, four times slower, 3 drafted and none accepted."""
    seen = {"requests": 0}

    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        seen["requests"] += 1
        slow = seen["requests"] in slow_runs
        tokens = int(body["max_tokens"])
        per_event = 1 if slow else 3
        sse(handler)
        event(handler, {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        for _ in range(tokens // per_event):
            time.sleep(0.012 if slow else 0.004)  # about nine times slower: load on the machine cannot hide it
            event(handler, chunk("a" * per_event))
            counts["drafted"] += 3
            counts["accepted"] += 0 if slow else 2
        event(handler, chunk(finish="length"))
        usage = {"prompt_tokens": 180, "completion_tokens": tokens, "total_tokens": 180 + tokens}
        event(handler, {"object": "chat.completion.chunk", "choices": [], "usage": usage})
        event(handler, "[DONE]")

    return answer


def test_a_server_that_stops_accepting_drafts_for_a_few_runs_is_named(fake: Callable[..., FakeServer]) -> None:  # noqa: F811
    counts = {"drafted": 0, "accepted": 0}
    # one warm-up, then runs 1-8: runs 5-7 (requests 6-8) fall back
    server = fake(
        {
            "GET /v1/models": models(),
            "POST /v1/chat/completions": falling_back(counts, {6, 7, 8}),
            "GET /metrics": metrics(counts),
        }
    )
    code, out, _ = bench(
        "--url",
        server.url,
        "--runs",
        "8",
        "--warmups",
        "1",
        "--max-tokens",
        "60",
        "--gpu-mode",
        "time-slicing",
        "--json",
    )
    assert code == 0, out
    data = json.loads(out[out.index("{") : out.rindex("}") + 1])
    phase = data["slow_phase"]
    # runs 5-7 fell back (a run beside them slowed by this machine's load may join the stretch)
    assert phase is not None and {5, 6, 7} <= set(phase["runs"]) and len(phase["runs"]) <= 4, phase
    assert phase["fell_back"] and phase["acceptance"] < 20 and round(phase["acceptance_others"]) == 67
    assert phase["said"].endswith("speculative decoding fell back")
    # each run's drafting comes from the counters read between runs
    assert [run["accepted"] for run in data["runs"]][4:7] == [0, 0, 0]
    assert all(run["drafted"] for run in data["runs"])
    assert data["settings"]["gpu_mode"] == "time-slicing"
    code, out, _ = bench(
        "--url", server.url, "--runs", "3", "--warmups", "0", "--max-tokens", "30", "--gpu-mode", "time-slicing"
    )
    assert code == 0 and "GPU time-slicing" in out and "measured under GPU time slicing" in out, out


def test_the_longest_slow_stretch_and_its_acceptance() -> None:
    rates = [250.0, 251, 249, 250, 252, 60, 70, 65, 66, 250]
    drafts: list[tuple[int, int] | None] = [(300, 260)] * 5 + [(300, 12)] * 4 + [(300, 258)]
    phase = slow_phase(rates, drafts)
    assert phase is not None and phase.runs == [6, 7, 8, 9] and phase.fell_back
    assert phase.describe().startswith("runs 6-9 at 26% of the median, acceptance 4% against 87%")
    # without drafting known, a slow stretch is named but not explained by drafting
    plain = slow_phase(rates, [None] * len(rates))
    assert plain is not None and not plain.fell_back and "a slow phase" in plain.describe()
    assert slow_phase([100.0, 98, 101, 99], [None] * 4) is None
