"""The bench method (the seed posts'): the standard prompt, warm-ups that are not counted, N measured runs one
after the other, each run's tokens per second, and their average, peak, minimum and spread; speculative
acceptance from the engine's own counters over the measured runs.

A run's rate is taken, in this order of preference (one definition for all runs of a bench):
  server   the server's own decode rate (llama.cpp's timings.predicted_per_second: tokens decoded over the decode
           time, b9101; decode steps, tokens - 1, over it in newer builds; prompt processing excluded, the
           server's clock)
  stream   (completion_tokens - 1) / (last streamed token - first streamed token): the decode rate vLLM's
           `bench serve` reports as 1/TPOT, on the client's clock, prompt processing excluded
  request  completion_tokens / the whole request, on the client's clock (no stream: prompt processing included)
completion_tokens is the server's usage, never a count of streamed events (one event may carry several
tokens under speculative decoding)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from olarespack.bench.phases import SlowPhase, slow_phase
from olarespack.engines.base import DraftCounts, EngineBench
from olarespack.engines.client import BenchError, Reply

PROMPT = "space-invaders"  # the shipped prompt of the seed posts
MAX_RATE = 1_000_000.0
DEFINITIONS = {
    "server": "the server's own decode rate (timings.predicted_per_second: tokens decoded, or decode steps in newer "
    "llama.cpp builds, over the decode time)",
    "stream": "(completion tokens - 1) / first to last streamed token, the client's clock (vLLM bench's 1/TPOT)",
    "request": "completion tokens / the whole request, the client's clock (prompt processing included)",
}


def shipped_prompt() -> str:
    return resources.files("olarespack.bench").joinpath(f"prompts/{PROMPT}.txt").read_text(encoding="utf-8").strip()


@dataclass(frozen=True)
class Settings:
    """One bench's method: what every request asks, and how many."""

    model: str
    prompt: str
    prompt_name: str
    max_tokens: int = 2000
    temperature: float = 0.6
    top_p: float = 0.95
    warmups: int = 2
    runs: int = 5
    stream: bool = True
    gpu_mode: str | None = None  # the GPU mode the app ran in (bench/phases.py GPU_MODES), where known

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": self.prompt}],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stream": self.stream,
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        return body


@dataclass(frozen=True)
class Run:
    """One request's measurement."""

    index: int  # 1-based, warm-ups and runs counted apart
    warmup: bool
    tokens: int  # completion tokens (the server's usage)
    tps: float
    source: str  # server, stream or request (DEFINITIONS)
    seconds: float  # the whole request, client's clock
    ttft_ms: float | None = None
    drafted: int | None = None
    accepted: int | None = None


def measure(reply: Reply, engine: EngineBench, index: int, warmup: bool, where: str) -> Run:
    """A reply's rate by the first definition it allows (see the module's docstring); BenchError for a rate
    that cannot be measured or cannot be."""
    label = f"{where}: {'warm-up' if warmup else 'run'} {index}"
    try:
        timings = engine.timings(reply.body)
    except ValueError as exc:
        raise BenchError(f"{label}: impossible timings: {exc}") from None
    tokens = reply.completion_tokens
    if tokens == 0:
        raise BenchError(f"{label}: the server generated no token (finished at once): nothing to time")
    ttft = reply.first_token_s * 1000 if reply.first_token_s is not None else None
    drafted = accepted = None
    if timings is not None and timings.tokens > 0:
        tps, source = timings.per_second, "server"
        drafted, accepted = timings.drafted, timings.accepted
    elif reply.first_token_s is not None and reply.last_token_s is not None:
        span = reply.last_token_s - reply.first_token_s
        if tokens < 2 or span <= 0:
            raise BenchError(
                f"{label}: {tokens} token(s) in one streamed event: no decode time to measure "
                "(raise --max-tokens, or measure with --no-stream)"
            )
        tps, source = (tokens - 1) / span, "stream"
    else:
        if reply.seconds <= 0:
            raise BenchError(f"{label}: impossible timing: the request took no time")
        tps, source = tokens / reply.seconds, "request"
    if not (math.isfinite(tps) and 0 < tps <= MAX_RATE):
        raise BenchError(f"{label}: impossible rate {tps:g} tokens/s")
    return Run(index, warmup, tokens, tps, source, reply.seconds, ttft, drafted, accepted)


@dataclass
class Result:
    """A bench's measured runs and what they add up to."""

    url: str
    settings: Settings
    runs: list[Run]
    warmups: list[Run] = field(default_factory=list)
    counts: DraftCounts | None = None  # drafting over the measured runs
    counter_source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def rates(self) -> list[float]:
        return [run.tps for run in self.runs]

    @property
    def source(self) -> str:
        return self.runs[0].source

    @property
    def sigma(self) -> float:
        return statistics.stdev(self.rates) if len(self.rates) > 1 else 0.0

    @property
    def ttft_ms(self) -> float | None:
        found = [run.ttft_ms for run in self.runs if run.ttft_ms is not None]
        return statistics.fmean(found) if found else None

    @property
    def slow(self) -> SlowPhase | None:
        """A stretch of slow runs, with each run's drafting where the engine gives it."""
        drafts = [(run.drafted, run.accepted or 0) if run.drafted is not None else None for run in self.runs]
        return slow_phase(self.rates, drafts)

    @property
    def acceptance(self) -> float | None:
        counts = self.counts
        return 100 * counts.accepted / counts.drafted if counts and counts.drafted else None

    def summary(self) -> dict[str, Any]:
        rates = self.rates
        return {
            "tps_avg": statistics.fmean(rates),
            "tps_peak": max(rates),
            "tps_min": min(rates),
            "tps_sigma": self.sigma,
            "tps_source": self.source,
            "runs": len(rates),
            "ttft_ms": self.ttft_ms,
            "acceptance": self.acceptance,
            "drafted": self.counts.drafted if self.counts else None,
            "accepted": self.counts.accepted if self.counts else None,
        }

    def as_dict(self) -> dict[str, Any]:
        settings = asdict(self.settings)
        settings.pop("prompt")
        return {
            "url": self.url,
            "settings": settings,
            "definition": DEFINITIONS[self.source],
            "summary": self.summary(),
            "runs": [asdict(run) for run in self.runs],
            "warmups": [asdict(run) for run in self.warmups],
            "acceptance_source": self.counter_source or None,
            "slow_phase": self.slow.as_dict() if self.slow else None,
            "notes": self.notes,
        }

    def table(self) -> list[str]:
        s = self.settings
        lines = [
            f"bench {self.url}: model {s.model}, prompt {s.prompt_name}, max_tokens {s.max_tokens}, temperature "
            f"{s.temperature:g}, top_p {s.top_p:g}, {len(self.warmups)} warm-up(s), {len(self.runs)} run(s)"
            + ("" if s.stream else ", not streamed")
            + (f", GPU {s.gpu_mode}" if s.gpu_mode else ""),
            f"{'run':>4} {'tokens':>7} {'t/s':>9} {'ttft ms':>8} {'seconds':>8}",
        ]
        for run in self.runs:
            ttft = f"{run.ttft_ms:.0f}" if run.ttft_ms is not None else "-"
            lines.append(f"{run.index:>4} {run.tokens:>7} {run.tps:>9.2f} {ttft:>8} {run.seconds:>8.2f}")
        summary = self.summary()
        lines.append(
            f"average {summary['tps_avg']:.2f} t/s, peak {summary['tps_peak']:.2f}, min "
            f"{summary['tps_min']:.2f}, sigma {summary['tps_sigma']:.2f} (sample), range "
            f"{summary['tps_peak'] - summary['tps_min']:.2f}"
        )
        if summary["ttft_ms"] is not None:
            lines.append(f"time to first token {summary['ttft_ms']:.0f} ms on average (to the first event with text)")
        if self.counts is not None and self.counts.drafted:
            lines.append(
                f"speculative acceptance {summary['acceptance']:.1f}% ({self.counts.accepted} accepted of "
                f"{self.counts.drafted} drafted, from {self.counter_source})"
            )
        lines.append(f"t/s: {DEFINITIONS[self.source]}")
        if self.slow is not None:
            lines.append(f"warning: slow phase: {self.slow.describe()}")
        if s.gpu_mode == "time-slicing":
            lines.append(
                "warning: measured under GPU time slicing, which cuts speculative decoding's speed "
                "(beclab/Olares #3213): exclusive mode measures the app alone"
            )
        return lines + [note if note.startswith("warning: ") else f"note: {note}" for note in self.notes]


Progress = Callable[[Run], None]  # told of each run as soon as it is measured


def one_definition(runs: list[Run], where: str) -> None:
    """Every run measured by one definition, or the figures would not compare."""
    sources = {run.source for run in runs}
    if len(sources) > 1:
        first = runs[0]
        other = next(run for run in runs if run.source != first.source)
        raise BenchError(
            f"{where}: {'warm-up' if other.warmup else 'run'} {other.index} was timed by {other.source}, "
            f"the first by {first.source}: the server changed what it reports mid-bench"
        )


def summed_drafts(runs: list[Run]) -> DraftCounts | None:
    """Drafting over runs whose server timed each completion's drafts (llama.cpp)."""
    counted = [run for run in runs if run.drafted is not None]
    if not counted:
        return None
    return DraftCounts(sum(run.drafted or 0 for run in counted), sum(run.accepted or 0 for run in counted))


def drafts_between(before: DraftCounts | None, after: DraftCounts | None, where: str) -> DraftCounts | None:
    """Drafting between two readings of the server's counters (vLLM's /metrics)."""
    if before is None or after is None:
        return None
    counts = after.since(before)
    if counts.drafted < 0 or counts.accepted < 0 or counts.accepted > counts.drafted:
        raise BenchError(
            f"{where}: the drafting counters went from {before.accepted}/{before.drafted} to "
            f"{after.accepted}/{after.drafted} (accepted/drafted): the server restarted mid-bench, or "
            "its counters cannot be"
        )
    return counts
