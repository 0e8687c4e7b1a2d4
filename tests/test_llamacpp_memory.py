"""llama.cpp's memory as the engine allocates it, against real llama-server logs (tests/fixtures/llama-logs/,
written by tools/llamacpp_cuda/cpu_logs.sh and measure.sh): the boot's buffers as calibrate reads them, fit's KV
bytes equal to the server's own KV lines, and the compute and runtime figures at or above what CUDA allocated."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from olarespack.engines import read_boot_log
from olarespack.engines.llamacpp.bootlog import LlamaCppLog

LOGS = ROOT / "tests" / "fixtures" / "llama-logs"
H200_V = LOGS / "h200-src11434-e4b-c32k-v.log"  # Gemma 4 E4B's shapes, CUDA, the audio chart's arguments, -v


def reading(name: str | Path) -> LlamaCppLog:
    log = read_boot_log(LOGS / name)
    assert log.engine == "llamacpp"
    return log.of("llamacpp", LlamaCppLog)


@pytest.mark.parametrize(("name", "compute"), [("b9101-cpu-v.log", 99.9), ("b9101-cpu-default.log", 99.9),
                                               ("b11434-cpu-v.log", 34.78)])
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


@pytest.mark.parametrize(("name", "version"), [("b9101-cpu-v.log", "b9101"), ("b9101-cpu-default.log", "b9101"),
                                               ("b11434-cpu-v.log", "b11434")])
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
    assert ("is a boot on NVIDIA H200, but apps/gemma4-audio.yaml's hardware rtx5090-laptop is NVIDIA GeForce "
            "RTX 5090 Laptop GPU") in output


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
