"""fit against CUDA boots of configurations it was not fitted to (tests/fixtures/llama-boots/h100-b11434-held-out
.json, written by `tools/llamacpp_cuda/boot_table.py --held-out` from `measure.sh build heldout` on an H100,
December 2026): K and V caches of different types, quantized caches over 2 and 8 slots, micro-batches of 2048
and 4096 tokens, for Gemma 4 E4B's and a dense Llama-3.1-8B's shapes. The compute estimate was fitted to the
boots of h200-b11434.json (512-token micro-batches, one cache type or K alone); these check that it holds past
them: the process's own GPU memory (nvidia-smi, after a 500-token request) is what fit must never be below, and
at most 10% above, and the KV cache is the server's own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import ROOT
from olarespack.engines.llamacpp.kv import llamacpp_kv_bytes
from test_llamacpp_boots import ABOVE, MIB, arch_of, fit_of_boot, gpu_total

HELD_OUT: list[dict[str, Any]] = json.loads(
    (ROOT / "tests" / "fixtures" / "llama-boots" / "h100-b11434-held-out.json").read_text(encoding="utf-8")
)
BY_NAME = {row["name"]: row for row in HELD_OUT}


def test_the_held_out_boots_are_what_fit_was_not_fitted_to() -> None:
    assert any(row["type_k"] != row["type_v"] and row["type_v"] != "f16" for row in HELD_OUT)  # mixed, V quantized
    assert {row["parallel"] for row in HELD_OUT if row["type_k"] != "f16"} >= {2, 8}
    assert {row["ubatch"] for row in HELD_OUT} >= {2048, 4096}
    assert {row["model"] for row in HELD_OUT} == {"e4b", "llama8b"} and len(HELD_OUT) == 16


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_fit_holds_on_a_configuration_it_was_not_fitted_to(name: str) -> None:
    row = BY_NAME[name]
    measured = row["process_mib"] * MIB
    estimate = gpu_total(fit_of_boot(row))
    assert measured <= estimate <= measured * (1 + ABOVE), f"{estimate / measured - 1:+.1%}"


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_the_kv_cache_of_a_held_out_boot_is_the_servers_own(name: str) -> None:
    row = BY_NAME[name]
    kv = llamacpp_kv_bytes(
        arch_of(row["model"]),
        row["ctx"],
        parallel=row["parallel"],
        batch_size=row["batch"],
        ubatch_size=row["ubatch"],
        type_k=row["type_k"],
        type_v=row["type_v"],
    )
    assert abs(kv / MIB - row["buffers_mib"]["kv"]) <= 0.01


DRAFTED: list[dict[str, Any]] = json.loads(
    (ROOT / "tests" / "fixtures" / "llama-boots" / "h100-b11434-drafter.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("row", DRAFTED, ids=lambda row: row["name"])
def test_fit_holds_with_a_separate_drafter(row: dict[str, Any]) -> None:
    """The same shapes booted with themselves as a separate drafter (`-md`, `--spec-type draft-simple`, every draft
    layer on the GPU; measure.sh drafter): the drafter's weights, KV cache, compute buffer and context come on top
    of the target's, and fit counts each (the process grew by 3780 MiB for E4B at 32K)."""
    from olarespack.engines.fit import FitRequest
    from olarespack.engines.llamacpp.fit import fit
    from olarespack.engines.llamacpp.spec import LlamaCppEngine
    from test_llamacpp_boots import IMAGE, synthetic

    info = synthetic(row["model"])
    file = f"{row['model']}.gguf"
    engine = LlamaCppEngine.model_validate({
        "kind": "llamacpp", "image": IMAGE, "alias": "boot", "model": {"repo": info.repo, "file": file},
        "ctx_size": row["ctx"], "parallel": row["parallel"], "batch_size": row["batch"], "ubatch_size": row["ubatch"],
        "flash_attn": "on", "speculative": {"type": "draft", "drafter": {"repo": info.repo, "file": file}},
    })  # fmt: skip
    report = fit(engine, FitRequest(total=140 << 30, registry={info.repo: info}))
    measured = row["process_mib"] * MIB
    estimate = gpu_total(report)
    assert report.drafter_kv_bytes * 2 == report.kv_cache_needed_bytes  # the drafter is the target: the same KV
    assert measured <= estimate <= measured * (1 + ABOVE), f"{estimate / measured - 1:+.1%}"
