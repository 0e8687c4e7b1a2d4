"""llama.cpp's memory as the engine allocates it, against real llama-server logs (tests/fixtures/llama-logs/,
written by tools/llamacpp_cuda/cpu_logs.sh and measure.sh): the boot's buffers as calibrate reads them, fit's KV
bytes equal to the server's own KV lines, and the compute and runtime figures at or above what CUDA allocated."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from olarespack.engines import read_boot_log
from olarespack.engines.llamacpp.bootlog import LlamaCppLog
from olarespack.engines.llamacpp.kv import (
    LLAMACPP_COMPUTE_MARGIN,
    LLAMACPP_RUNTIME_BYTES,
    llamacpp_compute_bytes,
    llamacpp_host_compute_bytes,
    llamacpp_kv_bytes,
)
from olarespack.models.arch import ModelArch
from olarespack.models.registry import models

MIB = 2**20

LOGS = ROOT / "tests" / "fixtures" / "llama-logs"
H200_V = LOGS / "h200-src11434-e4b-c32k-v.log"  # Gemma 4 E4B's shapes, CUDA, the audio chart's arguments, -v


def reading(name: str | Path) -> LlamaCppLog:
    log = read_boot_log(LOGS / name)
    assert log.engine == "llamacpp"
    return log.of("llamacpp", LlamaCppLog)


@pytest.mark.parametrize(
    ("name", "compute"), [("b9101-cpu-v.log", 99.9), ("b9101-cpu-default.log", 99.9), ("b11434-cpu-v.log", 34.78)]
)
def test_the_fit_dry_pass_is_not_added_to_the_boot(name: str, compute: float) -> None:
    # --fit's dry pass prints model 0.00, KV 0.00 and the full compute buffer before the boot prints its own
    found = reading(name)
    assert found.compute_buffer_mib == {"CPU": compute}
    assert found.model_buffer_mib == {"CPU_Mapped": 1.09}
    assert found.kv_buffer_mib == {"CPU": 8.25}  # the full-attention cache and the SWA one
    assert found.n_ctx == 32768


def test_a_cuda_boot_is_read_once_with_its_device() -> None:
    found = reading(H200_V)
    assert found.compute_buffer_mib == {"CUDA0": 134.02, "CUDA_Host": 79.03}  # not 268.04: no dry pass added
    assert found.model_buffer_mib == {"CUDA0": 2975.79, "CPU_Mapped": 2037.0}
    assert found.kv_buffer_mib == {"CUDA0": 552.0}
    assert found.device == "NVIDIA H200"
    assert found.version is None  # a source build without git metadata says `build 0`: unknown


@pytest.mark.parametrize(
    ("name", "version"),
    [("b9101-cpu-v.log", "b9101"), ("b9101-cpu-default.log", "b9101"), ("b11434-cpu-v.log", "b11434")],
)
def test_the_build_is_read(name: str, version: str) -> None:
    assert reading(name).version == version


def _calibrate(project: Path, log: str) -> tuple[int, str, bool]:
    spec = project / "apps" / "gemma4-audio.yaml"
    before = spec.read_bytes()
    code, output = run_cli(project, "calibrate", "apps/gemma4-audio.yaml", "--log", str(LOGS / log))
    assert "Traceback" not in output
    return code, output, spec.read_bytes() == before


def test_a_log_of_another_build_is_refused_naming_both(project: Path) -> None:
    code, output, unchanged = _calibrate(project, "b11434-cpu-v.log")
    assert code == 1 and unchanged
    assert "is a boot of llama.cpp b11434, but apps/gemma4-audio.yaml's image has llama.cpp b9101" in output


def test_a_log_of_another_gpu_is_refused_naming_both(project: Path) -> None:
    code, output, unchanged = _calibrate(project, H200_V.name)
    assert code == 1 and unchanged
    assert (
        "is a boot on NVIDIA H200, but apps/gemma4-audio.yaml's hardware rtx5090-laptop is NVIDIA GeForce "
        "RTX 5090 Laptop GPU"
    ) in output


@pytest.mark.parametrize("name", ["b11434-cpu-default.log", "h200-src11434-e4b-c32k-default.log"])
def test_a_default_verbosity_log_says_to_boot_with_v(project: Path, name: str) -> None:
    code, output, unchanged = _calibrate(project, name)
    assert code == 1 and unchanged
    assert "no buffer size line found" in output
    assert '"-v" added to engine.extra_args' in output


def test_a_cpu_boot_is_refused(project: Path) -> None:
    code, output, unchanged = _calibrate(project, "b9101-cpu-default.log")
    assert code == 1 and unchanged
    assert "the boot put no model buffer on a GPU (only CPU_Mapped)" in output


# CUDA boots of Gemma 4 E4B's shapes, b11434 from source on an H200 (measured.md):
# (flash attention, ubatch, context) -> (KV MiB, CUDA0 compute MiB, CUDA_Host compute MiB, exit `unaccounted` MiB);
# the first row's log is H200_V; unaccounted None where the boot answered only an 8-token prompt
CUDA_BOOTS = {
    (True, 512, 32768): (552.0, 134.02, 79.03, 717),
    (True, 512, 131072): (2088.0, 230.02, 175.03, 717),
    (True, 512, 4096): (104.0, 106.02, 51.03, None),
    (True, 512, 16384): (296.0, 118.02, 63.03, None),
    (True, 256, 32768): (542.0, 66.88, 39.39, 716),
    (True, 1024, 32768): (572.0, 269.04, 159.06, 715),
    (True, 2048, 32768): (612.0, 542.07, 322.12, 716),
    (True, 2048, 131072): (2148.0, 926.07, 706.12, 716),
    (False, 512, 32768): (572.0, 638.51, 120.02, 712),
    (False, 512, 131072): (2108.0, 2366.51, 312.02, 712),
}
NON_KV_WITHIN = 0.15  # fit's non-KV GPU memory may exceed the measured one by this much, never fall below it


def _e4b() -> ModelArch:
    found = models()["unsloth/gemma-4-E4B-it-GGUF"].arch
    assert found is not None
    return found


@pytest.mark.parametrize(("flash", "ubatch", "context"), sorted(CUDA_BOOTS))
def test_fit_is_at_or_above_every_measured_cuda_boot(flash: bool, ubatch: int, context: int) -> None:
    kv, compute, host, unaccounted = CUDA_BOOTS[(flash, ubatch, context)]
    arch = _e4b()
    # -b 2048 where the ubatch is larger than 512, as the boots ran; a batch >= ubatch changes nothing else
    assert (
        llamacpp_kv_bytes(arch, context, parallel=1, batch_size=2048, ubatch_size=ubatch, flash_attn=flash) == kv * MIB
    )
    gpu = llamacpp_compute_bytes(arch, ubatch, context, flash_attn=flash)
    pinned = llamacpp_host_compute_bytes(arch, ubatch, context, flash_attn=flash)
    # the GPU buffer never below what CUDA allocated, and no more than the margin and the fit's error above it
    # (the sum of activations and scores over-counts what the graph allocator reuses without flash attention)
    assert compute * MIB <= gpu <= compute * MIB * (LLAMACPP_COMPUTE_MARGIN + (0.02 if flash else 0.07))
    assert host * MIB <= pinned <= host * MIB * (LLAMACPP_COMPUTE_MARGIN + 0.02)
    if unaccounted is not None:  # the whole non-KV GPU memory: compute buffer and CUDA runtime
        measured = (compute + unaccounted) * MIB
        estimate = gpu + LLAMACPP_RUNTIME_BYTES
        assert measured <= estimate <= measured * (1 + NON_KV_WITHIN), estimate / measured


def test_the_runtime_allowance_covers_the_measured_cuda_context() -> None:
    # the exit breakdown's `unaccounted`: what the process holds beyond its buffers, after a 502-token request
    rows = [line for line in H200_V.read_text(encoding="utf-8").splitlines() if "- CUDA0 (H200)" in line]
    unaccounted = int(rows[-1].rsplit("+", 1)[1].strip(" |"))
    assert unaccounted == 717
    assert unaccounted * MIB <= LLAMACPP_RUNTIME_BYTES


def test_the_e4b_kv_cache_is_the_servers_own() -> None:
    # the server's KV lines at 32K (512 full + 40 SWA MiB) and 128K, in bytes
    arch = _e4b()
    assert llamacpp_kv_bytes(arch, 32768, parallel=1, batch_size=512, ubatch_size=512) == 578_813_952
    assert llamacpp_kv_bytes(arch, 131072, parallel=1, batch_size=512, ubatch_size=512) == 2_189_426_688
    assert sum(reading(H200_V).kv_buffer_mib.values()) * MIB == 578_813_952


def test_a_drafters_buffers_join_the_boot_they_belong_to() -> None:
    """A boot with a separate drafter (the H100's E4B drafting with itself, b11434): the drafter's model, KV and
    compute lines come after its model load and are the same boot's, not a new pass that would drop the target's."""
    log = read_boot_log(LOGS / "h100-b11434-e4b-drafter.log").of("llamacpp", LlamaCppLog)
    assert log.model_buffer_mib["CUDA0"] == round(2 * 2975.79, 2)
    assert log.kv_buffer_mib["CUDA0"] == 2 * (512 + 40)
    assert log.compute_buffer_mib["CUDA0"] == round(2 * 134.02, 2)
    assert log.n_ctx == 32768 and not log.impossible
