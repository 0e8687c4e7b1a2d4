"""What llama.cpp prints while it sizes its memory (src/llama-model.cpp, llama-kv-cache.cpp,
llama-context.cpp, tools/mtmd/clip.cpp), read from a boot log:
    load_tensors:        CUDA0 model buffer size =  4403.49 MiB
    llama_kv_cache:      CUDA0 KV buffer size =   208.00 MiB          (one line per cache: iSWA prints two)
    llama_context:       CUDA0 compute buffer size =   517.00 MiB
    llama_context: n_ctx         = 32768
    build: 9101 (a1b2c3d4) with cc ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from olarespack.engines.bootlog import NUM, EngineLog

_BUFFER = re.compile(rf"(\w{{1,64}}): {{1,64}}([A-Za-z0-9_.-]{{1,64}}) (model|KV|compute) buffer size = {{0,16}}"
                     rf"{NUM} MiB")
_CTX = re.compile(r"llama_context: n_ctx {0,16}= (\d{1,9})")
_BUILD = re.compile(r"build: (\d{1,7}) \(")
_MARK = re.compile(r"llama_model_load|llama_model_loader:|llama_context:|ggml_cuda_init|llama-server|"
                   r"main: server is listening|srv {1,8}\w{1,32}:")
# a buffer line's kind -> engine.calibration's field holding that kind per device
_FIELDS = {"model": "model_buffer_mib", "KV": "kv_buffer_mib", "compute": "compute_buffer_mib"}


@dataclass
class LlamaCppLog(EngineLog):
    """The buffers of one llama.cpp boot per device, in MiB (summed where a kind repeats), and its context."""

    model_buffer_mib: dict[str, float] = field(default_factory=dict)
    kv_buffer_mib: dict[str, float] = field(default_factory=dict)
    compute_buffer_mib: dict[str, float] = field(default_factory=dict)
    n_ctx: int | None = None
    build: str | None = None

    def feed(self, number: int, line: str) -> None:
        if _MARK.search(line):
            self.marks += 1
        if match := _BUFFER.search(line):
            self.marks += 1
            name, device = _FIELDS[match[3]], match[2]
            buffers = {"model_buffer_mib": self.model_buffer_mib, "kv_buffer_mib": self.kv_buffer_mib,
                       "compute_buffer_mib": self.compute_buffer_mib}[name]
            buffers[device] = round(buffers.get(device, 0.0) + float(match[4]), 2)
            self.lines[f"{name} {device}"] = number
        elif match := _CTX.search(line):
            self.n_ctx, self.lines["n_ctx"] = int(match[1]), number
        elif match := _BUILD.search(line):
            self.build = match[1]

    @property
    def calibrated(self) -> bool:
        return bool(self.model_buffer_mib or self.kv_buffer_mib or self.compute_buffer_mib)
