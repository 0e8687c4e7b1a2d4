"""Calibrations: what one boot of an engine measured on the box, and what it was measured on.

A calibration replaces fit's estimates with measured memory, so it holds only for the boot it came from: the
model, the image (the engine release) and the GPU profile are recorded with it, and a spec whose model, image or
hardware differs from them is refused (`calibration_problems`, shared by both engines).

Boot logs are read here (`read_log`): the lines vLLM and llama.cpp print while they size their memory.
vLLM (vllm/v1/worker/gpu_worker.py, gpu_model_runner.py, entrypoints/serve/utils/api_utils.py):
    Available KV cache memory: 2.82 GiB
    ... larger than the available KV cache memory (2.82 GiB).          (a boot refused for its context)
    Model loading took 16.31 GiB memory and 41.2 seconds
    Graph capturing finished in 12 secs, took 0.52 GiB
    Free memory on device (23.51/23.83 GiB) on startup. Desired GPU memory utilization is (0.94, 22.40 GiB) ...
    non-default args: {'model': '...', 'gpu_memory_utilization': 0.94, ...}
    vLLM API server version 0.21.0
llama.cpp (src/llama-model.cpp, llama-kv-cache.cpp, llama-context.cpp, tools/mtmd/clip.cpp):
    load_tensors:        CUDA0 model buffer size =  4403.49 MiB
    llama_kv_cache:      CUDA0 KV buffer size =   208.00 MiB          (one line per cache: iSWA prints two)
    llama_context:       CUDA0 compute buffer size =   517.00 MiB
    llama_context: n_ctx         = 32768
    build: 9101 (a1b2c3d4) with cc ...
A log is hostile input: at most MAX_LOG_BYTES are read, line by line, each line cut at MAX_LINE_BYTES; ANSI
colours and kubectl prefixes are ignored; every pattern is a literal anchor with bounded numbers.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, BinaryIO

from pydantic import Field, StringConstraints

from olarespack.core.errors import Problem
from olarespack.core.types import HfRepo, Image, StrictModel

MAX_LOG_BYTES = 64 * 2**20
MAX_LINE_BYTES = 16 * 2**10

ProfileName = Annotated[str, StringConstraints(max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
DeviceName = Annotated[str, StringConstraints(max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
MiB = Annotated[float, Field(ge=0, le=16_777_216)]
MEASURED_ON = ("model", "image", "hardware")


class MeasuredOn(StrictModel):
    """What a boot was measured on; a calibration holds for these and nothing else."""

    model: HfRepo | None = Field(None, description="The model repository of the measured boot.")
    image: Image | None = Field(None, description="The engine image of the measured boot.")
    hardware: ProfileName | None = Field(None, description="The hardware profile (GPU) of the measured boot.")


class VllmCalibration(MeasuredOn):
    """What vLLM printed at one boot, so fit checks use this app's real non-KV memory."""

    available_kv_cache_gib: float = Field(
        gt=0, le=4096, description="From the boot log line `Available KV cache memory: X GiB`."
    )
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="The utilization of that boot; defaults to engine.gpu_memory_utilization."
    )
    gpu_memory_mib: int | None = Field(
        None, gt=0, le=1_048_576, description="The GPU memory the engine saw at that boot (its HAMi limit), in MiB; "
        "defaults to the app's GPU memory.")
    model_loading_gib: float | None = Field(
        None, ge=0, le=4096, description="For the record: `Model loading took X GiB` (weights on the GPU).")
    cuda_graph_gib: float | None = Field(
        None, ge=-64, le=4096, description="For the record: `Graph capturing finished in ... took X GiB`.")


class LlamaCppCalibration(MeasuredOn):
    """The buffers llama.cpp allocated at one boot, per device (CUDA0, CUDA_Host, CPU_Mapped, ...), in MiB."""

    model_buffer_mib: dict[DeviceName, MiB] = Field(
        default_factory=dict, max_length=16, description="`<device> model buffer size = X MiB` (weights).")
    kv_buffer_mib: dict[DeviceName, MiB] = Field(
        default_factory=dict, max_length=16, description="`<device> KV buffer size = X MiB`, summed over caches.")
    compute_buffer_mib: dict[DeviceName, MiB] = Field(
        default_factory=dict, max_length=16,
        description="`<device> compute buffer size = X MiB`, summed over the model's and the projector's.")
    n_ctx: int | None = Field(None, gt=0, le=16_777_216, description="The context of that boot (`n_ctx = N`).")

    def gpu_mib(self, buffers: dict[str, float]) -> float:
        """The part of a buffer map on GPUs (CUDA0, ROCm0, Vulkan0: a device name ending in its number)."""
        return sum(mib for device, mib in buffers.items() if re.fullmatch(r"[A-Za-z]{1,32}[0-9]{1,3}", device))


# ------------------------------------------------------------------------------------- rules


def calibration_problems(file: str, spec_engine_model_repo: str, image: str, hardware: str,
                         calibration: MeasuredOn | None) -> Iterator[Problem]:
    """A calibration must say what it was measured on, and that must be what the spec runs now."""
    if calibration is None:
        return
    path = "engine.calibration"
    remeasure = (f"boot the app on the box and run `olarespack calibrate {file} --log boot.log` with its log "
                 "(kubectl logs), or remove engine.calibration to fall back to the estimate")
    missing = [name for name in MEASURED_ON if getattr(calibration, name) is None]
    if missing:
        yield Problem(file, path, f"does not say what it was measured on ({', '.join(missing)} missing); a "
                      "measurement holds only for the model, image and GPU of its boot",
                      f"add {', '.join(f'{name}:' for name in missing)} as they were at that boot, or {remeasure}",
                      rule="calibration-provenance")
    now = {"model": spec_engine_model_repo, "image": image, "hardware": hardware}
    changed = [name for name in MEASURED_ON
               if getattr(calibration, name) is not None and getattr(calibration, name) != now[name]]
    if changed:
        shown = "; ".join(f"{name} {getattr(calibration, name)} (the spec has {now[name]})" for name in changed)
        yield Problem(file, path, f"was measured with another {' and '.join(changed)}: {shown}; its memory figures "
                      "do not hold for this spec", remeasure, rule="calibration-stale")


# ------------------------------------------------------------------------------------- boot logs

_NUM = r"(\d{1,7}(?:\.\d{1,6})?)"
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]")
_VLLM_KV = re.compile(rf"Available KV cache memory: {_NUM} ?GiB")
_VLLM_KV_REFUSED = re.compile(rf"larger than the available KV cache memory \({_NUM} ?GiB\)")
_VLLM_LOADING = re.compile(rf"Model loading took {_NUM} ?GiB")
_VLLM_GRAPH = re.compile(r"Graph capturing finished in \d{1,9} secs?, took (-?\d{1,7}(?:\.\d{1,6})?) ?GiB")
_VLLM_DEVICE = re.compile(rf"Free memory on device (?:[\w:]{{1,32}} )?\({_NUM}/{_NUM} ?GiB\) on startup")
_VLLM_DESIRED = re.compile(rf"Desired GPU memory utilization is \({_NUM},")
_VLLM_UTIL_ARG = re.compile(r"""['"]?gpu_memory_utilization['"]?\s?[:=]\s?(\d(?:\.\d{1,6})?)""")
_VLLM_MODEL_ARG = re.compile(r"""['"]model(?:_tag)?['"]: ['"]([A-Za-z0-9._/-]{1,200})['"]""")
_VLLM_VERSION = re.compile(r"vLLM API server version ([0-9][0-9A-Za-z.+-]{0,63})")
_VLLM_MARK = re.compile(r"vLLM API server version|\[(?:gpu_worker|gpu_model_runner|api_server|core|"
                        r"kv_cache_utils)\.py:\d{1,6}\]|EngineCore_DP\d")
_LLAMA_BUFFER = re.compile(rf"(\w{{1,64}}): {{1,64}}([A-Za-z0-9_.-]{{1,64}}) (model|KV|compute) buffer size = {{0,16}}"
                           rf"{_NUM} MiB")
_LLAMA_CTX = re.compile(r"llama_context: n_ctx {0,16}= (\d{1,9})")
_LLAMA_BUILD = re.compile(r"build: (\d{1,7}) \(")
_LLAMA_MARK = re.compile(r"llama_model_load|llama_model_loader:|llama_context:|ggml_cuda_init|llama-server|"
                         r"main: server is listening|srv {1,8}\w{1,32}:")


@dataclass
class BootLog:
    """What one boot log tells. Where a line repeats, the last one counts (one boot per log is expected)."""

    path: str
    truncated: bool = False
    vllm_lines: int = 0
    llama_lines: int = 0
    kv_available_gib: float | None = None
    model_loading_gib: float | None = None
    cuda_graph_gib: float | None = None
    device_total_gib: float | None = None
    utilization: float | None = None
    model: str | None = None
    vllm_version: str | None = None
    model_buffers: dict[str, float] = field(default_factory=dict)
    kv_buffers: dict[str, float] = field(default_factory=dict)
    compute_buffers: dict[str, float] = field(default_factory=dict)
    n_ctx: int | None = None
    llama_build: str | None = None
    # the number of the line each value was last read from ("kv_available_gib", "KV CUDA0", ...): a value a
    # calibration refuses is reported at its line
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def engine(self) -> str | None:
        """The engine the log looks like: vllm, llamacpp, or None when it looks like neither."""
        if not self.vllm_lines and not self.llama_lines:
            return None
        return "vllm" if self.vllm_lines >= self.llama_lines else "llamacpp"

    def calibrated(self, engine: str) -> bool:
        """Whether the log holds the lines a calibration of this engine needs."""
        if engine == "vllm":
            return self.kv_available_gib is not None
        return bool(self.model_buffers or self.kv_buffers or self.compute_buffers)


def _lines(handle: BinaryIO) -> Iterator[str]:
    """The lines of at most MAX_LOG_BYTES of the file; lines longer than MAX_LINE_BYTES are cut."""
    budget = MAX_LOG_BYTES
    while budget > 0:
        raw = handle.readline(min(MAX_LINE_BYTES, budget))
        if not raw:
            return
        budget -= len(raw)
        if not raw.endswith(b"\n"):  # cut: skip the rest of this line, within the budget
            while budget > 0:
                rest = handle.readline(min(MAX_LINE_BYTES, budget))
                budget -= len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
        yield _ANSI.sub("", raw.decode("utf-8", errors="replace")).replace("\r", "")


def read_log(path: Path) -> BootLog:
    """Read a vLLM or llama.cpp boot log (bounded; see the module docstring). Raises OSError, or ValueError for
    something that is not a regular file (a FIFO or a device would block or never end)."""
    # opened without blocking and checked on the descriptor, so a FIFO swapped in after a check is never waited on
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path}: not a regular file")
        return _read(str(path), handle, truncated=info.st_size > MAX_LOG_BYTES)


def _read(path: str, handle: BinaryIO, truncated: bool) -> BootLog:
    log = BootLog(path, truncated=truncated)
    buffers = {"model": log.model_buffers, "KV": log.kv_buffers, "compute": log.compute_buffers}
    seen = log.lines
    for number, line in enumerate(_lines(handle), 1):
        if _VLLM_MARK.search(line):
            log.vllm_lines += 1
        if _LLAMA_MARK.search(line):
            log.llama_lines += 1
        if match := _VLLM_KV.search(line) or _VLLM_KV_REFUSED.search(line):
            log.kv_available_gib, seen["kv_available_gib"] = float(match[1]), number
        elif match := _VLLM_LOADING.search(line):
            log.model_loading_gib, seen["model_loading_gib"] = float(match[1]), number
        elif match := _VLLM_GRAPH.search(line):
            log.cuda_graph_gib, seen["cuda_graph_gib"] = float(match[1]), number
        elif match := _LLAMA_BUFFER.search(line):
            log.llama_lines += 1
            kind, device = match[3], match[2]
            buffers[kind][device] = round(buffers[kind].get(device, 0.0) + float(match[4]), 2)
            seen[f"{kind} {device}"] = number
        elif match := _LLAMA_CTX.search(line):
            log.n_ctx, seen["n_ctx"] = int(match[1]), number
        elif match := _LLAMA_BUILD.search(line):
            log.llama_build = match[1]
        if match := _VLLM_DEVICE.search(line):
            log.device_total_gib, seen["device_total_gib"] = float(match[2]), number
            if (desired := _VLLM_DESIRED.search(line)) and log.utilization is None:
                log.utilization, seen["utilization"] = float(desired[1]), number
        if "args" in line:
            if match := _VLLM_UTIL_ARG.search(line):
                log.utilization, seen["utilization"] = float(match[1]), number
            if match := _VLLM_MODEL_ARG.search(line):
                log.model = match[1]
        if match := _VLLM_VERSION.search(line):
            log.vllm_version = match[1]
    return log
