"""olarespack calibrate: boot logs (vLLM and llama.cpp, as kubectl prints them) become engine.calibration,
written in place; the log is hostile input; a calibration is tied to what it was measured on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from olarespack.engines import read_boot_log as read_log
from olarespack.engines.llamacpp import LlamaCppCalibration
from olarespack.engines.llamacpp.bootlog import LlamaCppLog
from olarespack.engines.vllm import VllmEngine
from olarespack.engines.vllm.bootlog import VllmLog
from olarespack.spec.load import load_spec

ESC = "\x1b"
# vLLM 0.21 on the box, as `kubectl logs --timestamps` prints it (colour codes included)
VLLM_LOG = f"""\
2026-05-15T21:02:11.120394512Z INFO 05-15 21:02:11 [api_server.py:1880] vLLM API server version 0.21.0
2026-05-15T21:02:11.121002345Z INFO 05-15 21:02:11 [utils.py:326] non-default args: {{'model_tag': \
'cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit', 'host': '0.0.0.0', 'model': 'cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit', \
'trust_remote_code': True, 'max_model_len': 131072, 'gpu_memory_utilization': 0.94, 'kv_cache_dtype': 'fp8'}}
2026-05-15T21:02:40.003Z (EngineCore_DP0 pid=212) INFO 05-15 21:02:40 [gpu_model_runner.py:2602] Starting to \
load model cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit...
2026-05-15T21:03:22.511Z (EngineCore_DP0 pid=212) INFO 05-15 21:03:22 [gpu_model_runner.py:2653] Model loading \
took 16.31 GiB memory and 41.870134 seconds
2026-05-15T21:03:58.900Z (EngineCore_DP0 pid=212) {ESC}[1;36mINFO{ESC}[0m 05-15 21:03:58 [gpu_worker.py:298] \
Available KV cache memory: {ESC}[1m2.45{ESC}[0m GiB
2026-05-15T21:03:59.100Z (EngineCore_DP0 pid=212) INFO 05-15 21:03:59 [kv_cache_utils.py:1087] GPU KV cache \
size: 187,904 tokens
2026-05-15T21:04:20.700Z (EngineCore_DP0 pid=212) INFO 05-15 21:04:20 [gpu_model_runner.py:3480] Graph capturing \
finished in 21 secs, took 0.47 GiB
2026-05-15T21:04:20.800Z (EngineCore_DP0 pid=212) INFO 05-15 21:04:20 [gpu_worker.py:391] Free memory on device \
(23.22/23.44 GiB) on startup. Desired GPU memory utilization is (0.94, 22.03 GiB). Actual usage is 16.31 GiB for \
weight, 2.71 GiB for peak activation, 0.09 GiB for non-torch memory, and 0.47 GiB for CUDAGraph memory.
2026-05-15T21:04:31.000Z INFO 05-15 21:04:31 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
"""

# llama.cpp b9101 (Gemma 4 E4B with its BF16 projector): iSWA prints one KV line per cache
LLAMA_LOG = f"""\
[pod/llamacppgemma4audione-5c7d9/llamacpp] ggml_cuda_init: found 1 CUDA devices:
[pod/llamacppgemma4audione-5c7d9/llamacpp]   Device 0: NVIDIA GeForce RTX 5090 Laptop GPU, compute capability 12.0
[pod/llamacppgemma4audione-5c7d9/llamacpp] build: 9101 (0a1b2c3d) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu
[pod/llamacppgemma4audione-5c7d9/llamacpp] llama_model_loader: loaded meta data with 44 key-value pairs
[pod/llamacppgemma4audione-5c7d9/llamacpp] load_tensors: offloaded 43/43 layers to GPU
[pod/llamacppgemma4audione-5c7d9/llamacpp] load_tensors:        CUDA0 model buffer size =  3223.75 MiB
[pod/llamacppgemma4audione-5c7d9/llamacpp] load_tensors:   CPU_Mapped model buffer size =  1512.00 MiB
[pod/llamacppgemma4audione-5c7d9/llamacpp] llama_context: n_ctx         = 32768
[pod/llamacppgemma4audione-5c7d9/llamacpp] llama_context:  CUDA_Host  output buffer size =     1.00 MiB
[pod/llamacppgemma4audione-5c7d9/llamacpp] llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB
[pod/llamacppgemma4audione-5c7d9/llamacpp] llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells
[pod/llamacppgemma4audione-5c7d9/llamacpp] llama_kv_cache:      CUDA0 KV buffer size =    40.00 MiB
[pod/llamacppgemma4audione-5c7d9/llamacpp] {ESC}[32mllama_context:      CUDA0 compute buffer size =   517.00 MiB{ESC}[0m
[pod/llamacppgemma4audione-5c7d9/llamacpp] llama_context:  CUDA_Host compute buffer size =    24.01 MiB
[pod/llamacppgemma4audione-5c7d9/llamacpp] alloc_compute_meta:      CUDA0 compute buffer size =   120.50 MiB
[pod/llamacppgemma4audione-5c7d9/llamacpp] main: server is listening on http://0.0.0.0:8080
"""


def _engine(spec: Path) -> VllmEngine:
    engine = load_spec(spec).engine
    assert isinstance(engine, VllmEngine)
    return engine


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.helm  # its lint reaches helm
def test_a_vllm_log_becomes_the_calibration_in_place(project: Path) -> None:
    spec = project / "apps" / "gemma4-vision.yaml"
    before = spec.read_text(encoding="utf-8")
    log = _write(project, "boot.log", VLLM_LOG)
    code, output = run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(log))
    assert code == 0, output
    after = spec.read_text(encoding="utf-8")
    calibration = _engine(spec).calibration
    assert calibration is not None
    assert (calibration.model, calibration.image, calibration.hardware) == (
        "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
        "vllm/vllm-openai:v0.21.0-cu129",
        "rtx5090-laptop",
    )
    assert calibration.available_kv_cache_gib == 2.45
    assert calibration.gpu_memory_utilization == 0.94
    assert calibration.gpu_memory_mib == 24000  # the booking: the log's 23.44 GiB is that, to two decimals
    assert (calibration.model_loading_gib, calibration.cuda_graph_gib) == (16.31, 0.47)
    # only the calibration block changed: every other line, comments included, is where it was
    old_lines, new_lines = before.splitlines(), after.splitlines()
    start = next(i for i, line in enumerate(old_lines) if line.strip() == "calibration:")
    assert new_lines[: start + 1] == old_lines[: start + 1]
    old_end = next(i for i in range(start + 1, len(old_lines)) if not old_lines[i].startswith("    "))
    new_end = next(i for i in range(start + 1, len(new_lines)) if not new_lines[i].startswith("    "))
    assert new_lines[new_end:] == old_lines[old_end:]

    code, output = run_cli(project, "lint", "apps/gemma4-vision.yaml", "--no-helm4")
    assert code == 0, output
    code, output = run_cli(project, "fit", "apps/gemma4-vision.yaml", "--json")
    assert code == 0, output
    report = json.loads(output)
    assert report["overhead_source"] == "calibrated"

    # idempotent: a second run leaves the file byte for byte
    code, output = run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(log))
    assert code == 0 and "unchanged" in output, output
    assert spec.read_text(encoding="utf-8") == after


def test_a_spec_without_calibration_gets_one_at_the_end_of_engine(project: Path) -> None:
    spec = project / "apps" / "gemma4-dflash.yaml"
    before = spec.read_text(encoding="utf-8")
    log = (
        VLLM_LOG.replace("cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit", "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit")
        .replace("vLLM API server version 0.21.0", "vLLM API server version 0.20.2rc1.dev67+g58c8a5eaa")
        .replace("'gpu_memory_utilization': 0.94", "'gpu_memory_utilization': 0.92")
    )
    code, output = run_cli(project, "calibrate", "apps/gemma4-dflash.yaml", "--log", str(_write(project, "b", log)))
    assert code == 0, output
    after = spec.read_text(encoding="utf-8")
    assert after.startswith(before.split("\nresources:")[0])
    assert after.endswith("\nresources:" + before.split("\nresources:")[1])
    calibration = _engine(spec).calibration
    assert calibration is not None and calibration.gpu_memory_utilization == 0.92
    assert calibration.image == "vllm/vllm-openai:tokenspeed-preview-x86_64-ubuntu2404"


def test_a_llama_cpp_log_is_refused_for_a_vllm_spec(project: Path) -> None:
    spec = project / "apps" / "gemma4-vision.yaml"
    before = spec.read_bytes()
    log = _write(project, "llama.log", LLAMA_LOG)
    code, output = run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(log))
    assert code == 1
    assert f"{log}: looks like a llama.cpp boot log, but apps/gemma4-vision.yaml runs vLLM" in output
    assert "Traceback" not in output
    assert spec.read_bytes() == before


@pytest.mark.parametrize("text", ["", "just some words\n", "\x00\xff binary \x1b[2J garbage\n" * 50])
def test_a_log_without_calibration_lines_names_the_log(project: Path, text: str) -> None:
    log = _write(project, "empty.log", text)
    code, output = run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(log))
    assert code == 1
    assert f"{log}: no calibration line found" in output
    assert "neither a vLLM nor a llama.cpp log" in output
    assert "[calibration-log]" in output


def test_a_log_of_another_model_or_release_is_refused(project: Path) -> None:
    other = VLLM_LOG.replace("'model': 'cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit'", "'model': 'Qwen/Qwen3-8B-AWQ'").replace(
        "'model_tag': 'cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit'", "'model_tag': 'Qwen/Qwen3-8B-AWQ'"
    )
    code, output = run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(_write(project, "q", other)))
    assert code == 1 and "is a boot of Qwen/Qwen3-8B-AWQ" in output, output
    older = VLLM_LOG.replace("version 0.21.0", "version 0.20.2")
    code, output = run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(_write(project, "o", older)))
    assert code == 1 and "is a boot of vLLM 0.20.2" in output, output


def test_a_calibration_from_another_image_is_refused_by_lint(project: Path) -> None:
    log = _write(project, "boot.log", VLLM_LOG)
    assert run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(log))[0] == 0
    spec = project / "apps" / "gemma4-vision.yaml"
    text = spec.read_text(encoding="utf-8")
    old, new = "\n  image: vllm/vllm-openai:v0.21.0-cu129\n", "\n  image: vllm/vllm-openai:v0.21.1\n"
    spec.write_text(text.replace(old, new), encoding="utf-8")
    code, output = run_cli(project, "lint", "apps/gemma4-vision.yaml", "--no-helm4")
    assert code == 1
    assert (
        "apps/gemma4-vision.yaml: engine.calibration: was measured with another image: image "
        "vllm/vllm-openai:v0.21.0-cu129 (the spec has vllm/vllm-openai:v0.21.1)"
    ) in output
    assert "olarespack calibrate apps/gemma4-vision.yaml --log boot.log" in output


def test_the_log_is_read_bounded(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    with log.open("wb") as handle:
        handle.write(b"x" * (3 * 2**20))  # one 3 MiB line: cut, its tail skipped
        handle.write(b" Available KV cache memory: 9.99 GiB\n")  # the tail of that line: not a line of its own
        handle.write(b"INFO [gpu_worker.py:298] Available KV cache memory: 2.45 GiB\n")
    reading = read_log(log)
    assert reading.of("vllm", VllmLog).available_kv_cache_gib == 2.45
    assert reading.engine == "vllm"
    assert not reading.truncated


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        read_log(fifo)


def test_llama_cpp_buffers_per_device(tmp_path: Path) -> None:
    log = read_log(_write(tmp_path, "llama.log", LLAMA_LOG))
    assert log.engine == "llamacpp"
    reading = log.of("llamacpp", LlamaCppLog)
    assert reading.model_buffer_mib == {"CUDA0": 3223.75, "CPU_Mapped": 1512.0}
    assert reading.kv_buffer_mib == {"CUDA0": 296.0}  # the full-attention and the SWA cache
    assert reading.compute_buffer_mib == {"CUDA0": 637.5, "CUDA_Host": 24.01}  # the model's and the projector's
    assert (reading.n_ctx, reading.build) == (32768, "9101")
    calibration = LlamaCppCalibration(
        model="unsloth/gemma-4-E4B-it-GGUF",
        image="ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101",
        hardware="rtx5090-laptop",
        model_buffer_mib=reading.model_buffer_mib,
        kv_buffer_mib=reading.kv_buffer_mib,
        compute_buffer_mib=reading.compute_buffer_mib,
        n_ctx=reading.n_ctx,
    )
    assert calibration.gpu_mib(calibration.model_buffer_mib) == 3223.75
    assert calibration.gpu_mib(calibration.compute_buffer_mib) == 637.5


KV_LINE = f"Available KV cache memory: {ESC}[1m2.45{ESC}[0m GiB"


@pytest.mark.parametrize(
    ("figure", "message", "fix"),
    [
        (
            "0.00",
            "available_kv_cache_gib: 0 is out of range (engine.calibration.available_kv_cache_gib is more than 0)",
            "that boot left no memory for the KV cache",
        ),
        (
            "9999999",
            "available_kv_cache_gib: 9999999 is out of range (engine.calibration.available_kv_cache_gib is "
            "at most 4096)",
            "give the unedited log of one complete boot of this app",
        ),
    ],
)
def test_a_measured_value_out_of_range_is_refused_at_its_line(
    project: Path, figure: str, message: str, fix: str
) -> None:
    spec = project / "apps" / "gemma4-vision.yaml"
    before = spec.read_bytes()
    assert KV_LINE in VLLM_LOG
    log = _write(project, "boot.log", VLLM_LOG.replace(KV_LINE, f"Available KV cache memory: {figure} GiB"))
    code, output = run_cli(project, "calibrate", "apps/gemma4-vision.yaml", "--log", str(log))
    assert code == 1, output
    assert f"{log}: line 5: {message} (fix: {fix}" in output, output
    assert "pydantic" not in output and "Input should be" not in output and "Traceback" not in output
    assert spec.read_bytes() == before


def test_a_llama_cpp_buffer_out_of_range_is_refused_at_its_line(project: Path) -> None:
    spec = project / "apps" / "gemma4-audio.yaml"
    before = spec.read_bytes()
    huge = LLAMA_LOG.replace("CUDA0 KV buffer size =    40.00 MiB", "CUDA0 KV buffer size = 9999999.00 MiB").replace(
        "CUDA0 KV buffer size =   256.00 MiB", "CUDA0 KV buffer size = 9999999.00 MiB"
    )  # summed: 19 TiB
    log = _write(project, "llama.log", huge.replace("CPU_Mapped model buffer", "_hidden model buffer"))
    code, output = run_cli(project, "calibrate", "apps/gemma4-audio.yaml", "--log", str(log))
    assert code == 1, output
    assert f"{log}: line 12: kv_buffer_mib.CUDA0: 19999998 is out of range" in output, output
    assert f"{log}: line 7: model_buffer_mib._hidden: the device name '_hidden' is not one" in output, output
    assert spec.read_bytes() == before
