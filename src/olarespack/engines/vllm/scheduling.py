"""What vLLM's scheduler takes of a spec's batching: max_num_batched_tokens against max_num_seqs and the
speculative slots, and against max_model_len with chunked prefill off (SchedulerConfig.verify_max_model_len,
vllm/config/scheduler.py 0.21 to 0.33)."""

from __future__ import annotations

from collections.abc import Iterator

from olarespack.core.errors import Problem
from olarespack.engines.vllm.spec import VllmEngine


def batching_problems(file: str, engine: VllmEngine) -> Iterator[Problem]:
    if engine.max_num_batched_tokens is None:
        return
    seqs = engine.max_num_seqs or 1
    slots = 1 + (engine.speculative.num_speculative_tokens if engine.speculative else 0)
    if engine.max_num_batched_tokens < seqs:
        # SchedulerConfig's validator (vllm/config/scheduler.py, 0.21 to 0.33)
        yield Problem(
            file,
            "engine.max_num_batched_tokens",
            f"{engine.max_num_batched_tokens} is below max_num_seqs ({seqs}): vLLM refuses to start",
            f"use at least {seqs}",
            rule="batched-tokens",
        )
    elif engine.max_num_batched_tokens < seqs * slots:
        # vLLM accepts it and schedules fewer of the sequences' drafted tokens in a step: slower, not refused
        yield Problem(
            file,
            "engine.max_num_batched_tokens",
            f"{engine.max_num_batched_tokens} cannot schedule {seqs} sequence(s) x {slots} token(s) "
            "per step (decode plus speculative slots): vLLM runs, scheduling fewer drafted tokens a step",
            f"use at least {seqs * slots}",
            rule="batched-tokens",
            severity="warning",
        )
    if engine.enable_chunked_prefill is False and engine.max_num_batched_tokens < engine.context_length:
        yield Problem(
            file,
            "engine.max_num_batched_tokens",
            f"with chunked prefill off it must be >= max_model_len ({engine.context_length}); vLLM refuses to boot",
            "raise it, or drop enable_chunked_prefill: false",
            rule="chunked-prefill",
        )
