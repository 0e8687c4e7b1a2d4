"""Concurrency levels and context depths (as llama-benchy measures them): for each depth, the prompt preceded by
that many tokens of filler text (the server's own prompt count is reported, not the estimate), and for each
concurrency level, that many requests sent at once, `runs` rounds of them; a cell's time to first token and
decode rate are each request's own (bench's definitions), its total rate all tokens over the round's time."""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from olarespack.bench.run import Run, Settings, measure
from olarespack.core.errors import UsageError
from olarespack.engines.base import EngineBench
from olarespack.engines.client import BenchError, Limits, Server

MAX_LEVELS = 8
MAX_CONCURRENCY = 64
MAX_DEPTH = 262_144  # tokens: 1 MiB of filler text at most
CHARS_PER_TOKEN = 4  # the filler's estimate; the server's prompt_tokens say what it was
FILLER = (
    "The archive keeps a record of every ship that entered the harbour, its cargo, its crew and the weather "
    "on the day it arrived. "
)


def _body(settings: Settings, depth: int) -> dict[str, Any]:
    """One request of a cell: a prefix of its own before the filler, so neither llama.cpp's prompt cache nor
    vLLM's prefix caching serves the depth from an earlier request (the time to first token is a real prefill)."""
    body = settings.body()
    text = f"Request {secrets.token_hex(6)}.\n" + filler(depth) + settings.prompt
    body["messages"] = [{"role": "user", "content": text}]
    return body


def parse_levels(given: str, option: str, low: int, high: int) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in given.split(","))
    except ValueError:
        raise UsageError(f"{option} {given[:60]!r}: give whole numbers separated by commas, e.g. 1,2,4") from None
    if not 1 <= len(levels) <= MAX_LEVELS or any(not low <= level <= high for level in levels):
        raise UsageError(f"{option}: give 1 to {MAX_LEVELS} levels, each from {low} to {high}")
    if len(set(levels)) != len(levels):
        raise UsageError(f"{option}: a level is given twice")
    return levels


def filler(tokens: int) -> str:
    """About `tokens` tokens of plain text, the same for the same depth."""
    if tokens == 0:
        return ""
    chars = tokens * CHARS_PER_TOKEN
    return (FILLER * (chars // len(FILLER) + 1))[:chars].rsplit(" ", 1)[0] + "\n\n"


@dataclass
class Cell:
    depth: int
    concurrency: int
    runs: list[Run] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    round_rates: list[float] = field(default_factory=list)  # all tokens of a round over its time

    def summary(self) -> dict[str, Any]:
        ttfts = [run.ttft_ms for run in self.runs if run.ttft_ms is not None]
        return {
            "depth": self.depth,
            "concurrency": self.concurrency,
            "requests": len(self.runs),
            "prompt_tokens": round(statistics.fmean(self.prompt_tokens)) if self.prompt_tokens else None,
            "ttft_ms": statistics.fmean(ttfts) if ttfts else None,
            "tps_per_request": statistics.fmean(run.tps for run in self.runs),
            "tps_total": statistics.fmean(self.round_rates),
            "tps_source": self.runs[0].source,
        }


def run_grid(
    url: str,
    api_key: str | None,
    limits: Limits,
    settings: Settings,
    engine: EngineBench,
    concurrencies: tuple[int, ...],
    depths: tuple[int, ...],
    say: Callable[[str], None] = lambda _: None,
) -> tuple[list[Cell], str | None]:
    """Every cell measured in turn (depths outer, concurrency inner): the cells, and why the grid stopped at the
    first cell that failed (None when all were measured). BenchError from the warm-ups."""
    servers = [Server(url, api_key, limits) for _ in range(max(concurrencies))]
    try:
        shown = servers[0].shown
        for index in range(1, settings.warmups + 1):
            measure(servers[0].complete(settings.body()), engine, index, True, shown)
            say(f"warm-up {index}/{settings.warmups}")
        cells: list[Cell] = []
        with ThreadPoolExecutor(max_workers=max(concurrencies)) as pool:
            for depth in depths:
                for concurrency in concurrencies:
                    cell = Cell(depth, concurrency)
                    for round_index in range(1, settings.runs + 1):
                        bodies = [_body(settings, depth) for _ in range(concurrency)]
                        started = time.monotonic()
                        try:
                            replies = list(pool.map(Server.complete, servers[:concurrency], bodies))
                        except BenchError as exc:  # the cells measured so far are kept and printed
                            return cells, f"depth {depth}, concurrency {concurrency}: {exc}"
                        wall = time.monotonic() - started
                        for number, reply in enumerate(replies, start=1):
                            try:
                                run = measure(
                                    reply,
                                    engine,
                                    len(cell.runs) + 1,
                                    False,
                                    f"{shown} depth {depth}, concurrency {concurrency}, round "
                                    f"{round_index}, request {number}",
                                )
                            except BenchError as exc:
                                return cells, str(exc)
                            cell.runs.append(run)
                            if reply.prompt_tokens is not None:
                                cell.prompt_tokens.append(reply.prompt_tokens)
                        cell.round_rates.append(sum(r.completion_tokens for r in replies) / wall)
                    summary = cell.summary()
                    say(
                        f"depth {depth}, concurrency {concurrency}: {summary['tps_per_request']:.2f} t/s a request, "
                        f"{summary['tps_total']:.2f} t/s in all"
                    )
                    cells.append(cell)
        return cells, None
    finally:
        for server in servers:
            server.__exit__()


def grid_table(shown: str, settings: Settings, cells: list[Cell]) -> list[str]:
    lines = [
        f"bench {shown}: model {settings.model}, prompt {settings.prompt_name} after DEPTH tokens of filler, "
        f"max_tokens {settings.max_tokens}, {settings.runs} round(s) a cell",
        f"{'depth':>7} {'conc':>5} {'prompt tok':>10} {'ttft ms':>9} {'t/s each':>9} {'t/s total':>10}",
    ]
    for cell in cells:
        s = cell.summary()
        ttft = f"{s['ttft_ms']:.0f}" if s["ttft_ms"] is not None else "-"
        prompt = str(s["prompt_tokens"]) if s["prompt_tokens"] is not None else "-"
        lines.append(
            f"{cell.depth:>7} {cell.concurrency:>5} {prompt:>10} {ttft:>9} {s['tps_per_request']:>9.2f} "
            f"{s['tps_total']:>10.2f}"
        )
    lines.append(
        f"t/s each: a request's decode rate ({cells[0].runs[0].source}, as bench defines it); t/s total: "
        "all tokens of a round over its time; ttft: to the first event with text"
        if cells
        else "no cell"
    )
    return lines
