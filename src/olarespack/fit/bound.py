"""What a measurement cannot be, whatever the server says: faster than the GPU's memory can feed the model, and
drafting counters that contradict each other or the tokens generated. Pure: the spec, the hardware and the
figures in, findings out.

Decoding one step reads every weight the step uses from GPU memory once, so steps per second are at most the
memory bandwidth (data/hardware.yaml `bandwidth_gb_s`) over the bytes one token reads: the weights on the GPU
(the fit arithmetic's `weights_bytes`, from the model data), of an MoE only the experts a token is routed to,
taken as if every weight were an expert's (top-k over the experts: the shared layers' reads left out, so the
bound only errs high). One step yields at most the drafted tokens + 1 (speculative decoding). The figure
refused is above MARGIN times that: the model's size may be an estimate, and caches can serve part of the
reads. Where the model's size or the drafting length is unknown the bound is not checked, and a warning says
so: it is never guessed."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from olarespack.core.hardware import profiles
from olarespack.engines.base import DraftCounts, EngineBench

if TYPE_CHECKING:
    from olarespack.bench.run import Result
    from olarespack.spec.models import AppSpec

MARGIN = 2.0
UNEVEN = 0.5  # the slowest run below half the median: the runs did not measure one steady state


@dataclass(frozen=True)
class DecodeBound:
    """The fastest decode the hardware allows for the spec's model and drafting."""

    tps: float  # MARGIN x bandwidth / bytes per token x tokens per step
    hardware: str
    bandwidth_gb_s: int
    bytes_per_token: int
    tokens_per_step: int

    def explained(self) -> str:
        return (
            f"{self.hardware}'s {self.bandwidth_gb_s} GB/s over the {self.bytes_per_token / 1e9:.2f} GB a token "
            f"reads, times {self.tokens_per_step} token(s) a step, times a margin of {MARGIN:g}: "
            f"{self.tps:,.0f} t/s at most"
        )


def _bytes_per_token(spec: AppSpec) -> int | str:
    """The bytes one token reads, or why they are unknown."""
    from olarespack.core.errors import OlaresPackError
    from olarespack.engines import engine_for
    from olarespack.fit.budget import fit_report
    from olarespack.models.registry import find_model

    engine = engine_for(spec.engine)
    try:
        weights = fit_report(spec).weights_bytes
        arch = find_model(engine.model_repo(), gguf_files=engine.model_files()).arch
    except (OlaresPackError, ValueError) as exc:
        return f"the model's size is unknown ({str(exc)[:160]})"
    if weights <= 0:
        return "the model data gives no size of the weights on the GPU"
    if arch is not None and arch.experts_per_token:
        if not arch.num_experts or arch.num_experts < arch.experts_per_token:
            return "the model is a mixture of experts whose expert count the model data does not give"
        return max(1, weights * arch.experts_per_token // arch.num_experts)
    return weights


def decode_bound(spec: AppSpec, hardware: str, drafted_per_step: int | None) -> DecodeBound | str:
    """The bound on `hardware` (a data/hardware.yaml name), or why it cannot be checked."""
    if drafted_per_step is None:
        return (
            "the spec sets drafting outside its typed fields (extra_args or command), so the tokens a step "
            "yields are unknown"
        )
    per_token = _bytes_per_token(spec)
    if isinstance(per_token, str):
        return per_token
    profile = profiles()[hardware]
    steps = profile.bandwidth_gb_s * 1e9 / per_token
    return DecodeBound(
        MARGIN * steps * (drafted_per_step + 1), hardware, profile.bandwidth_gb_s, per_token, drafted_per_step + 1
    )


def over_bound(rates: list[float], bound: DecodeBound) -> str | None:
    """Why the fastest rate cannot be, or None."""
    fastest = max(rates)
    if fastest <= bound.tps:
        return None
    return (
        f"{fastest:,.2f} tokens/s is more than the hardware can decode ({bound.explained()}): the server "
        "reports timings that cannot be, or it does not run on that hardware"
    )


def counter_contradiction(counts: DraftCounts, generated: int, requests: int, most_per_step: int) -> str | None:
    """Why drafting counters over `requests` completions of `generated` tokens in all cannot be, or None. A
    completion's first token comes from the prompt's pass and each step yields one token the target chose, so
    accepted drafts are fewer than the tokens generated less one a request; a step drafts at most
    most_per_step tokens and there is at most one step a generated token."""
    if counts.drafted < 0 or counts.accepted < 0:
        return f"negative drafting counts ({counts.accepted} accepted, {counts.drafted} drafted)"
    if counts.accepted > counts.drafted:
        return f"{counts.accepted} draft tokens accepted of {counts.drafted} drafted"
    if counts.accepted and counts.accepted > generated - requests:
        return (
            f"{counts.accepted} draft tokens accepted for {generated} tokens generated in {requests} "
            "request(s): each request's first token and each step's last are the target's own"
        )
    if counts.drafted > generated * most_per_step:
        return (
            f"{counts.drafted:,} draft tokens for {generated:,} generated: at most {most_per_step} drafted a "
            "step, and at most one step a generated token"
        )
    return None


def uneven_runs(rates: list[float]) -> str | None:
    """A warning when the runs' spread says they did not measure one steady state, or None."""
    if len(rates) < 2:
        return None
    median = statistics.median(rates)
    slowest = min(rates)
    if slowest >= UNEVEN * median:
        return None
    return (
        f"uneven runs: the slowest ({slowest:.2f} t/s) is below {UNEVEN:.0%} of the median ({median:.2f}): "
        "something else ran on the server or the box, or it throttled; the average mixes two states "
        "(measure again, or with more runs)"
    )


@dataclass
class Findings:
    """What a bench's figures say about themselves: errors (they cannot be: nothing is recorded) and warnings
    (printed with the result, and marked in the record)."""

    errors: list[str]
    warnings: list[str]
    uneven: bool = False


def findings(result: Result, spec: AppSpec, hardware: str | None, bench: EngineBench) -> Findings:
    """The checks of a result against the spec's model and drafting and, when the hardware it ran on is known,
    that hardware."""
    found = Findings([], [])
    per_step = bench.draft_tokens(spec.engine)
    most = per_step or bench.max_draft_tokens  # a server drafting where the spec does not: the engine's bound
    measured = [run for run in result.runs if run.drafted is not None and run.accepted is not None]
    for run in measured:  # the server's own count for each completion (llama.cpp)
        said = counter_contradiction(DraftCounts(run.drafted or 0, run.accepted or 0), run.tokens, 1, most)
        if said:
            found.errors.append(f"run {run.index}: impossible drafting counters: {said}")
            break
    if result.counts is not None and not measured:  # the server's counters around the runs (vLLM)
        generated = sum(run.tokens for run in result.runs)
        said = counter_contradiction(result.counts, generated, len(result.runs), most)
        if said:
            found.errors.append(
                f"impossible drafting counters over the measured runs: {said} (or other requests "
                "ran on the server during the bench)"
            )
    if hardware is None:
        found.warnings.append(
            "the figures are not checked against a GPU's memory bandwidth: give the hardware the "
            "server runs on with --hardware NAME"
        )
    elif per_step == 0 and result.counts is not None and result.counts.drafted > 0:
        found.warnings.append(
            "the server drafts, the spec does not: the decode bound was not checked (is it the spec's server?)"
        )
    else:
        bound = decode_bound(spec, hardware, per_step)
        if isinstance(bound, str):
            found.warnings.append(f"the decode bound could not be checked: {bound}")
        elif said := over_bound(result.rates, bound):
            found.errors.append(said)
    if uneven := uneven_runs(result.rates):
        found.warnings.append(uneven)
        found.uneven = True
    return found
