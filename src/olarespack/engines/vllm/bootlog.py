"""What vLLM prints while it sizes its memory (vllm/v1/worker/gpu_worker.py, gpu_model_runner.py,
entrypoints/serve/utils/api_utils.py), read from a boot log:
    Available KV cache memory: 2.82 GiB
    ... larger than the available KV cache memory (2.82 GiB).          (a boot refused for its context)
    Model loading took 16.31 GiB memory and 41.2 seconds
    Graph capturing finished in 12 secs, took 0.52 GiB
    Free memory on device (23.51/23.83 GiB) on startup. Desired GPU memory utilization is (0.94, 22.40 GiB) ...
    non-default args: {'model': '...', 'gpu_memory_utilization': 0.94, ...}
    vLLM API server version 0.21.0
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from olarespack.engines.bootlog import FIGURE as _FIGURE
from olarespack.engines.bootlog import NUM, EngineLog

_KV = re.compile(rf"Available KV cache memory: {NUM} ?GiB")
_KV_REFUSED = re.compile(rf"larger than the available KV cache memory \({NUM} ?GiB\)")
_LOADING = re.compile(rf"Model loading took {NUM} ?GiB")
_GRAPH = re.compile(r"Graph capturing finished in \d{1,9} secs?, took (-?\d{1,7}(?:\.\d{1,6})?) ?GiB")
_DEVICE = re.compile(rf"Free memory on device (?:[\w:]{{1,32}} )?\({NUM}/{NUM} ?GiB\) on startup")
_DESIRED = re.compile(rf"Desired GPU memory utilization is \({NUM},")
_UTIL_ARG = re.compile(r"""['"]?gpu_memory_utilization['"]?\s?[:=]\s?(\d(?:\.\d{1,6})?)""")
_MODEL_ARG = re.compile(r"""['"]model(?:_tag)?['"]: ['"]([A-Za-z0-9._/-]{1,200})['"]""")
_VERSION = re.compile(r"vLLM API server version ([0-9][0-9A-Za-z.+-]{0,63})")
# a line that says one of the sizes above: one whose figure the strict patterns do not read is refused
_SIZE_SAID = re.compile(r"(Available KV cache memory:|Model loading took) {1,8}([^\s]{1,32})")
_MARK = re.compile(
    r"vLLM API server version|\[(?:gpu_worker|gpu_model_runner|api_server|core|"
    r"kv_cache_utils)\.py:\d{1,6}\]|EngineCore_DP\d"
)


@dataclass
class VllmLog(EngineLog):
    """The values of one vLLM boot, under the names of engine.calibration's fields where they become one."""

    available_kv_cache_gib: float | None = None
    model_loading_gib: float | None = None
    cuda_graph_gib: float | None = None
    device_total_gib: float | None = None
    gpu_memory_utilization: float | None = None

    def __post_init__(self) -> None:
        self.provenance = {
            "model": "the `non-default args` line (its 'model')",
            "version": "the `vLLM API server version` line",
            "gpu_memory_utilization": "the `non-default args` or `Desired GPU memory utilization` line",
        }

    def feed(self, number: int, line: str) -> None:
        seen = self.lines
        if _MARK.search(line):
            self.marks += 1
        if (said := _SIZE_SAID.search(line)) and not _FIGURE.fullmatch(said[2].removesuffix("GiB")):
            self.unreadable.append((number, said[1].rstrip(":")))
        elif match := _KV.search(line) or _KV_REFUSED.search(line):
            self.available_kv_cache_gib, seen["available_kv_cache_gib"] = float(match[1]), number
        elif match := _LOADING.search(line):
            self.model_loading_gib, seen["model_loading_gib"] = float(match[1]), number
        elif match := _GRAPH.search(line):
            self.cuda_graph_gib, seen["cuda_graph_gib"] = float(match[1]), number
        if match := _DEVICE.search(line):
            self.device_total_gib, seen["gpu_memory_mib"] = float(match[2]), number
            if (desired := _DESIRED.search(line)) and self.gpu_memory_utilization is None:
                self.gpu_memory_utilization, seen["gpu_memory_utilization"] = float(desired[1]), number
        if "args" in line:
            if match := _UTIL_ARG.search(line):
                self.gpu_memory_utilization, seen["gpu_memory_utilization"] = float(match[1]), number
            if match := _MODEL_ARG.search(line):
                self.model = match[1]
        if match := _VERSION.search(line):
            self.version = match[1]

    @property
    def calibrated(self) -> bool:
        return self.available_kv_cache_gib is not None

    def gpu_mib(self) -> tuple[float, str] | None:
        parts = [
            (gib * 1024, key)
            for gib, key in (
                (self.model_loading_gib, "model_loading_gib"),
                (self.available_kv_cache_gib, "available_kv_cache_gib"),
                (self.cuda_graph_gib, "cuda_graph_gib"),
            )
            if gib
        ]
        return (round(sum(mib for mib, _ in parts), 2), max(parts)[1]) if parts else None
