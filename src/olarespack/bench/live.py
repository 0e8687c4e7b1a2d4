"""The bench against a server this machine reaches (`olarespack bench run APP --url URL`): check it speaks the
OpenAI API, pick the model, send the warm-ups and the runs one after the other, and read the engine's drafting
counters around the measured runs."""

from __future__ import annotations

from dataclasses import replace

from olarespack.bench.run import (
    Progress,
    Result,
    Run,
    Settings,
    drafts_between,
    measure,
    one_definition,
    summed_drafts,
)
from olarespack.core.text import printable
from olarespack.engines.base import DraftCounts, EngineBench, TruncatedMetrics
from olarespack.engines.client import MAX_TEXT as MAX_METRICS
from olarespack.engines.client import BenchError, Server


def pick_model(listed: list[str], wanted: str | None, served: str | None, where: str) -> tuple[str, list[str]]:
    """The model to ask for: --model, else the spec's served name, else the only one the server lists; notes on
    what was chosen for the reader."""
    if wanted:
        notes = [] if wanted in listed else [f"{where} lists {_names(listed[:5])}, not {wanted}; asked anyway"]
        return wanted, notes
    if served and served in listed:
        return served, []
    if len(listed) == 1:
        notes = [f"the server serves {_names(listed)}, not the spec's {served}"] if served else []
        return listed[0], notes
    raise BenchError(
        f"{where}: serves {_names(listed[:10])}, none of them the spec's {served or 'model'}: say which with --model"
    )


def _names(listed: list[str]) -> str:
    """Model ids as the server sent them, printed as text (each cut at 200 characters)."""
    return ", ".join(printable(name[:200]) for name in listed)


class _Partial(Exception):
    """A reading of the counters cut short: no acceptance is reported for the bench."""


def _counters(server: Server, engine: EngineBench, notes: list[str]) -> DraftCounts | None:
    if engine.metrics_path is None:
        return None
    text, whole = server.text(engine.metrics_path)
    if text is None:
        note = f"no {engine.metrics_path} on the server: no speculative acceptance"
        if note not in notes:
            notes.append(note)
        return None
    try:
        if not whole:
            raise TruncatedMetrics(f"over {MAX_METRICS >> 20} MiB")
        return engine.draft_counts(text)
    except TruncatedMetrics as exc:
        note = (
            f"GET {engine.metrics_path}: {exc}, read only in part: no speculative acceptance (a sum of part of "
            "the counters is not the acceptance)"
        )
        if note not in notes:
            notes.append(note)
        raise _Partial from None
    except ValueError as exc:
        raise BenchError(f"{server.shown}: GET {engine.metrics_path}: impossible counters: {exc}") from None


def bench_live(server: Server, engine: EngineBench, settings: Settings, progress: Progress | None = None) -> Result:
    body = settings.body()
    notes: list[str] = []

    def one(index: int, warmup: bool) -> Run:
        run = measure(server.complete(body), engine, index, warmup, server.shown)
        if progress is not None:
            progress(run)
        return run

    partial = False

    def read() -> DraftCounts | None:
        nonlocal partial
        try:
            return _counters(server, engine, notes)
        except _Partial:
            partial = True
            return None

    warmups = [one(i, True) for i in range(1, settings.warmups + 1)]
    before = read()
    readings = [before]
    runs = []
    for index in range(1, settings.runs + 1):
        run = one(index, False)
        if engine.metrics_path is not None and not partial:
            # the counters between two runs are that run's drafting: a slow phase is told by its acceptance
            readings.append(read())
            between = drafts_between(readings[-2], readings[-1], server.shown)
            if between is not None:
                run = replace(run, drafted=between.drafted, accepted=between.accepted)
        runs.append(run)
    after = readings[-1] if engine.metrics_path is not None and len(readings) > 1 else read()
    one_definition(warmups + runs, server.shown)
    counted = engine.metrics_path is not None  # by the server's counters, else by each run's timings
    counts = None if partial else drafts_between(before, after, server.shown) if counted else summed_drafts(runs)
    if counts is None and not partial and engine.metrics_path is not None and before is None and after is not None:
        notes.append("the drafting counters appeared during the runs: no acceptance")
    return Result(server.shown, settings, runs, warmups, counts, engine.counter_source if counts else "", notes)
