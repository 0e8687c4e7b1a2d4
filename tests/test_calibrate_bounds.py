"""calibrate refuses what no boot of the card printed: buffers past the card, a size that does not read as one
(never dropped: a dropped line makes a partial sum), and a log that does not say what it measured; a log
with CR line ends reads as the same log."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from olarespack.engines import read_boot_log
from olarespack.engines.llamacpp.bootlog import LlamaCppLog
from test_calibrate import LLAMA_LOG, VLLM_LOG

AUDIO = "apps/gemma4-audio.yaml"
VISION = "apps/gemma4-vision.yaml"
KV_256 = "CUDA0 KV buffer size =   256.00 MiB"


def calibrate(project: Path, spec: str, log: str) -> tuple[int, str, str]:
    (project / "boot.log").write_text(log, encoding="utf-8")
    before = (project / spec).read_bytes()
    code, out = run_cli(project, "calibrate", spec, "--log", "boot.log")
    if code != 0:
        assert (project / spec).read_bytes() == before  # nothing written
    return code, out, "boot.log"


def test_a_buffer_past_the_card_is_refused_at_its_line(project: Path) -> None:
    # 25.9 GB (24700 MiB) of model buffer on a card that registers 24463 MiB
    log = LLAMA_LOG.replace("CUDA0 model buffer size =  3223.75 MiB", "CUDA0 model buffer size = 24700.00 MiB")
    code, out, path = calibrate(project, AUDIO, log)
    assert code == 1, out
    assert f"{path}: line 6: the buffers on the GPU add up to 25634 MiB, more than the 24463 MiB" in out, out


@pytest.mark.parametrize("figure", ["-256.00", "1e3", "2.56e+02"])
def test_a_buffer_line_that_does_not_read_is_refused_not_dropped(project: Path, figure: str) -> None:
    # dropping it would record the SWA cache's 40 MiB as the KV of the boot instead of 296
    assert KV_256 in LLAMA_LOG
    code, out, path = calibrate(project, AUDIO, LLAMA_LOG.replace(KV_256, f"CUDA0 KV buffer size = {figure} MiB"))
    assert code == 1, out
    assert f"{path}: line 10: CUDA0 KV buffer size: the figure is not a size llama.cpp prints" in out, out


def test_a_vllm_size_that_does_not_read_is_refused(project: Path) -> None:
    log = VLLM_LOG.replace("Model loading \\\ntook 16.31 GiB", "Model loading took -16.31 GiB")
    log = log.replace("Available KV cache memory: \x1b[1m2.45\x1b[0m GiB", "Available KV cache memory: -2.45 GiB")
    code, out, path = calibrate(project, VISION, log)
    assert code == 1, out
    assert f"{path}: line 5: Available KV cache memory: the figure is not a size vLLM prints" in out, out


@pytest.mark.parametrize("newline", ["\r", "\r\n"], ids=["cr", "crlf"])
def test_a_log_with_cr_line_ends_reads_as_the_same_log(tmp_path: Path, newline: str) -> None:
    path = tmp_path / "boot.log"
    path.write_bytes(LLAMA_LOG.replace("\n", newline).encode())
    reading = read_boot_log(path).of("llamacpp", LlamaCppLog)
    assert reading.model_buffer_mib == {"CUDA0": 3223.75, "CPU_Mapped": 1512.0}
    assert reading.kv_buffer_mib == {"CUDA0": 296.0}
    assert reading.compute_buffer_mib == {"CUDA0": 637.5, "CUDA_Host": 24.01}
    assert (reading.n_ctx, reading.build, reading.lines["kv_buffer_mib CUDA0"]) == (32768, "9101", 12)


def test_a_cr_only_log_is_read_past_its_first_16_kib(tmp_path: Path) -> None:
    path = tmp_path / "boot.log"
    path.write_bytes(("progress 50%\r" * 4000 + LLAMA_LOG.replace("\n", "\r")).encode())
    assert read_boot_log(path).of("llamacpp", LlamaCppLog).kv_buffer_mib == {"CUDA0": 296.0}


def test_a_log_that_does_not_say_what_it_measured_is_refused(project: Path) -> None:
    # one line: no model, no release, no arguments; the spec's would be recorded as if the log said them
    code, out, path = calibrate(project, VISION, "Available KV cache memory: 2.45 GiB\n")
    assert code == 1, out
    for what in ("model", "version", "gpu memory utilization"):
        assert f"{path}: does not say its {what} (vLLM prints it in" in out, out
    code, out, path = calibrate(
        project, AUDIO, "\n".join(line for line in LLAMA_LOG.splitlines() if "build:" not in line)
    )
    assert code == 1 and f"{path}: does not say its build (llama.cpp prints it in" in out, out


def test_a_kv_line_repeated_past_one_boot_is_refused_not_summed(project: Path) -> None:
    """400 copies of one KV line summed to 16,256 MiB of KV cache: no boot prints a kind on one device more
    than a few times (two caches for iSWA, a drafter's), so the log is refused at the line past that."""
    lines = LLAMA_LOG.split("\n")
    at = next(i for i, line in enumerate(lines) if KV_256 in line)
    log = "\n".join([*lines[: at + 1], *[lines[at]] * 399, *lines[at + 1 :]])
    code, out, path = calibrate(project, AUDIO, log)
    assert code == 1, out
    assert f"{path}: line {at + 1 + 40}: CUDA0 KV buffer size: 41 such lines in one boot" in out, out
