"""What llama.cpp prints while it sizes its memory (src/llama-model.cpp, llama-kv-cache.cpp,
llama-context.cpp, tools/mtmd/clip.cpp), read from a boot log:
    load_tensors:        CUDA0 model buffer size =  4403.49 MiB
    llama_kv_cache:      CUDA0 KV buffer size =   208.00 MiB          (one line per cache: iSWA prints two)
    llama_context:       CUDA0 compute buffer size =   517.00 MiB     (sched_reserve: from b10000 or so)
    llama_context: n_ctx         = 32768
    build: 9101 (a1b2c3d4) with cc ...        build_info: b9101-...      common_params_print_info: build 11434 (...)
    Device 0: NVIDIA GeForce RTX 5090 Laptop GPU, compute capability 12.0     (ggml_cuda_init)
    llama_prepare_model_devices: using device CUDA0 (NVIDIA H200) (0000:00:06.0) - 142629 MiB free

With automatic --fit (b9000 on), llama-server first sizes a dry run of the whole context and, at -v, prints its
buffer lines (model and KV 0.00 MiB, compute at full size) before the boot prints its own: a model line of the
text model's loader after KV or compute lines starts a new pass, and only the last pass counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from olarespack.engines.bootlog import FIGURE, NUM, EngineLog

_BUFFER = re.compile(
    rf"(\w{{1,64}}): {{1,64}}([A-Za-z0-9_.-]{{1,64}}) (model|KV|compute) buffer size = {{0,16}}"
    rf"{NUM} MiB"
)
_CTX = re.compile(r"llama_context: n_ctx {0,24}= (\d{1,9})")
_BUILD = re.compile(r"(?:\bbuild: |build_info: b|common_params_print_info: build )(\d{1,7})\b")
_DEVICE = re.compile(r"(?:Device 0: (.{1,80}?), compute capability|using device \w{1,32} \((.{1,80}?)\) \()")
_MARK = re.compile(
    r"llama_model_load|llama_model_loader:|llama_context:|ggml_cuda_init|llama-server|"
    r"main: server is listening|srv {1,8}\w{1,32}:"
)
# any line that says a buffer size: one the strict pattern does not read is refused, not dropped
_SIZE_SAID = re.compile(r"([A-Za-z0-9_.-]{1,64}) (model|KV|compute) buffer size = {0,16}([^\s]{1,32})")
# a buffer line's kind -> engine.calibration's field holding that kind per device
_FIELDS = {"model": "model_buffer_mib", "KV": "kv_buffer_mib", "compute": "compute_buffer_mib"}
# buffer lines of one kind on one device in one pass: an iSWA cache prints two KV lines, a drafter its own
# model, KV and compute lines (b9101: a KV and compute set per slot), an audio or vision projector its model and
# compute lines
MAX_LINES_A_PASS = 40
# the drafter's model load: the buffers after it are the drafter's, in the same boot (not a new pass)
_DRAFT = re.compile(r"loading draft model")


@dataclass
class LlamaCppLog(EngineLog):
    """The buffers of one llama.cpp boot per device, in MiB (summed where a kind repeats), its context, the
    build (as `version`, b9101) and the first GPU's name."""

    model_buffer_mib: dict[str, float] = field(default_factory=dict)
    kv_buffer_mib: dict[str, float] = field(default_factory=dict)
    compute_buffer_mib: dict[str, float] = field(default_factory=dict)
    n_ctx: int | None = None
    build: str | None = None
    device: str | None = None

    def device_problems(self, gpu: str | None, hardware: str, spec_file: str) -> list[tuple[str, str]]:
        """The boot's GPU must be the spec's hardware, and the model buffer must be on a GPU (a CPU boot
        measures nothing of the GPU)."""
        from olarespack.engines.llamacpp.spec import LlamaCppCalibration

        if self.device and gpu and self.device != gpu:
            return [
                (
                    f"is a boot on {self.device}, but {spec_file}'s hardware {hardware} is {gpu}",
                    f"boot the app on a {gpu} and take that log, or set hardware: to the GPU it ran on",
                )
            ]
        if not LlamaCppCalibration.gpu_mib(self.model_buffer_mib):
            return [
                (
                    "the boot put no model buffer on a GPU (only "
                    f"{', '.join(sorted(self.model_buffer_mib)) or 'none'}): it measured nothing of the GPU",
                    "take the log of the app's pod on the box, where the layers go to CUDA0",
                )
            ]
        return []

    def __post_init__(self) -> None:
        self.provenance = {"build": "its `build:` line (printed at start-up)"}
        self._seen: dict[tuple[str, str], int] = {}  # buffer lines of one kind and device in this pass
        self._drafter = False  # the drafter's model is loading: its buffers join the target's pass

    def feed(self, number: int, line: str) -> None:
        if _MARK.search(line):
            self.marks += 1
        if _DRAFT.search(line):
            self._drafter = True
        if (said := _SIZE_SAID.search(line)) and not FIGURE.fullmatch(said[3]):
            self.unreadable.append((number, f"{said[1]} {said[2]} buffer size"))
        elif match := _BUFFER.search(line):
            self.marks += 1
            if (
                match[1] == "load_tensors"
                and match[3] == "model"
                and (self.kv_buffer_mib or self.compute_buffer_mib)
                and not self._drafter
            ):
                self._new_pass()
            name, device = _FIELDS[match[3]], match[2]
            buffers = {
                "model_buffer_mib": self.model_buffer_mib,
                "kv_buffer_mib": self.kv_buffer_mib,
                "compute_buffer_mib": self.compute_buffer_mib,
            }[name]
            seen = self._seen[name, device] = self._seen.get((name, device), 0) + 1
            if seen == MAX_LINES_A_PASS + 1:
                self.impossible.append(
                    (
                        number,
                        f"{device} {match[3]} buffer size: {seen} such lines in one boot (llama.cpp "
                        f"prints at most {MAX_LINES_A_PASS}: a cache per attention kind, and a drafter's per "
                        "slot)",
                    )
                )
            buffers[device] = round(buffers.get(device, 0.0) + float(match[4]), 2)
            self.lines[f"{name} {device}"] = number
        elif match := _CTX.search(line):
            self.n_ctx, self.lines["n_ctx"] = int(match[1]), number
        elif match := _BUILD.search(line):
            # a build from a source archive without git metadata says build 0: its release is unknown
            self.build = match[1] if match[1] != "0" else None
            self.version = f"b{self.build}" if self.build else None
        elif (match := _DEVICE.search(line)) and self.device is None:
            self.device = (match[1] or match[2]).strip()

    def _new_pass(self) -> None:
        for buffers in (self.model_buffer_mib, self.kv_buffer_mib, self.compute_buffer_mib):
            buffers.clear()
        self._seen.clear()
        self.lines = {key: line for key, line in self.lines.items() if not key.endswith("_mib") and " " not in key}

    @property
    def calibrated(self) -> bool:
        return bool(self.model_buffer_mib or self.kv_buffer_mib or self.compute_buffer_mib)

    def gpu_mib(self) -> tuple[float, str] | None:
        on_gpu = [
            (mib, f"{name} {device}")
            for name, buffers in (
                ("model_buffer_mib", self.model_buffer_mib),
                ("kv_buffer_mib", self.kv_buffer_mib),
                ("compute_buffer_mib", self.compute_buffer_mib),
            )
            for device, mib in buffers.items()
            if _on_gpu(device)
        ]
        return (round(sum(mib for mib, _ in on_gpu), 2), max(on_gpu)[1]) if on_gpu else None

    def missing_lines(self) -> tuple[str, str] | None:
        return (
            "no buffer size line found: llama-server prints its model, KV and compute buffer sizes at its "
            "default verbosity up to b9113, and from b9246 only at --log-verbosity 4 (which the charts olarespack "
            "renders for those builds set) or -v",
            'boot the app from a chart olarespack rendered for its build, or once with "-v" added to '
            "engine.extra_args, and calibrate from that log (kubectl logs POD > boot.log)",
        )


def _on_gpu(device: str) -> bool:
    """A GPU's buffer (CUDA0, Vulkan1: a name ending in its number, as LlamaCppCalibration.gpu_mib counts)."""
    return re.fullmatch(r"[A-Za-z]{1,32}[0-9]{1,3}", device) is not None
