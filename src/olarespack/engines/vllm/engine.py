"""vLLM (0.20 / 0.21): its flag table, port, container and command, boot rules, and what it answers for
import, fit and calibrate (each in its own module of this package)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from olarespack.core import quantity
from olarespack.core.errors import ModelDataError, Problem
from olarespack.core.rule_catalog import Rule
from olarespack.engines.base import Arg, EngineBench, Flag, compact_json
from olarespack.engines.bootlog import BootLog
from olarespack.engines.calibration import calibration_problems
from olarespack.engines.common import image_tag, is_gemma4
from olarespack.engines.consistency import drafter_problems, parser_problems
from olarespack.engines.cuda import ImageCuda
from olarespack.engines.fit import FitReport, FitRequest
from olarespack.engines.images import family_of
from olarespack.engines.importing import EngineImport, ImportSource
from olarespack.engines.pinned import PinnedRead, PinnedShape
from olarespack.engines.protocol import Engine
from olarespack.engines.releases import ReleaseRules, image_release
from olarespack.engines.smoke import EngineSmoke
from olarespack.engines.vllm import catalog, cuda
from olarespack.engines.vllm.bootlog import VllmLog
from olarespack.engines.vllm.drafter import mtp_drafter_problems, reads_hidden_states
from olarespack.engines.vllm.fit import fit as vllm_fit
from olarespack.engines.vllm.importer import import_vllm
from olarespack.engines.vllm.memory_rules import extensible_cache_problems, move_notes
from olarespack.engines.vllm.pinned import pinned_shape, read_pinned
from olarespack.engines.vllm.scheduling import batching_problems
from olarespack.engines.vllm.spec import (
    DFLASH_MAX_TOKENS,
    HF_HOME,
    HYBRID_KV_BREAKERS,
    METHOD_SINCE,
    MTP_ALIASES,
    NEEDS_DRAFT_MODEL,
    PORT,
    VllmCalibration,
    VllmEngine,
)
from olarespack.models.arch import ModelInfo
from olarespack.models.registry import models_for


def _speculative_json(engine: VllmEngine) -> str | None:
    """The speculative section exactly as the spec types it: an MTP alias (gemma4_mtp) stays an alias, and
    spec-mtp-alias says what vLLM does with it; the user decides whether to write mtp."""
    if engine.speculative is None:
        return None
    return compact_json(engine.speculative.model_dump(exclude_none=True))


def _modalities_json(engine: VllmEngine) -> str | None:
    limits = engine.limit_mm_per_prompt
    return compact_json(dict(sorted(limits.items()))) if limits else None


class Vllm(Engine[VllmEngine]):
    kind = "vllm"
    title = "vLLM"
    model = VllmEngine
    port = PORT
    container_name = "vllm"
    command = ("vllm", "serve")
    context_field = "max_model_len"
    accepts_auto_context = True
    hf_env = True  # vLLM downloads its own weights from the Hugging Face endpoint
    pinned_image = "vllm/vllm-openai:v0.21.0-cu129"
    memory_fraction = "gpu_memory_utilization"
    model_source = "config"
    weights_format = "safetensors"
    executables = ("vllm",)
    command_markers = ("vllm.entrypoints.openai.api_server",)
    calibration_model = VllmCalibration
    calibration_lines = "`Available KV cache memory: X GiB`"
    flags: tuple[Flag[VllmEngine], ...] = (
        Flag("", "engine.model", lambda e: e.model, "positional", aliases=("--model",)),
        Flag("--served-model-name", "engine.served_model_name", lambda e: e.served_model_name),
        Flag("--host", "chart", lambda e: "0.0.0.0"),
        Flag("--port", "chart", lambda e: e.port or PORT),
        Flag("--max-model-len", "engine.max_model_len", lambda e: e.context_length),
        Flag("--gpu-memory-utilization", "engine.gpu_memory_utilization", lambda e: f"{e.gpu_memory_utilization:g}"),
        Flag("--revision", "engine.revision", lambda e: e.revision, "given"),
        Flag("--max-num-seqs", "engine.max_num_seqs", lambda e: e.max_num_seqs, "given"),
        Flag("--max-num-batched-tokens", "engine.max_num_batched_tokens", lambda e: e.max_num_batched_tokens, "given"),
        Flag("--attention-backend", "engine.attention_backend", lambda e: e.attention_backend, "given"),
        # in SPEC_CONFIG, the name the seed charts, their users and reviewers know: a release that changes the
        # drafting shows as a one-line SPEC_CONFIG diff of the pod template
        Flag("--speculative-config", "engine.speculative", _speculative_json, "given", env="SPEC_CONFIG"),
        Flag("--kv-cache-dtype", "engine.kv_cache_dtype", lambda e: e.kv_cache_dtype),
        Flag("--dtype", "engine.dtype", lambda e: e.dtype),
        Flag("--trust-remote-code", "engine.trust_remote_code", lambda e: e.trust_remote_code, "given"),
        Flag("--download-dir", "engine.download_dir", lambda e: e.download_dir),
        Flag(
            "--kv-cache-memory-bytes",
            "engine.kv_cache_memory_bytes",
            lambda e: e.kv_cache_memory_bytes and quantity.parse_bytes(e.kv_cache_memory_bytes),
            "given",
        ),
        Flag("--enable-prefix-caching", "engine.enable_prefix_caching", lambda e: e.enable_prefix_caching, "switch"),
        Flag("--enable-chunked-prefill", "engine.enable_chunked_prefill", lambda e: e.enable_chunked_prefill, "switch"),
        Flag("--async-scheduling", "engine.async_scheduling", lambda e: e.async_scheduling, "switch"),
        Flag("--limit-mm-per-prompt", "engine.limit_mm_per_prompt", _modalities_json, "given"),
        Flag("--enable-auto-tool-choice", "engine.tool_call_parser", lambda e: bool(e.tool_call_parser), "given"),
        Flag("--tool-call-parser", "engine.tool_call_parser", lambda e: e.tool_call_parser, "given"),
        Flag("--reasoning-parser", "engine.reasoning_parser", lambda e: e.reasoning_parser, "given"),
    )

    def image_cuda(self, image: str) -> ImageCuda:
        return cuda.image_cuda(image)

    def image_at(self, image: str, release: str) -> str | None:
        return cuda.image_at(image, release)

    def args(self, engine: VllmEngine) -> list[Arg]:
        """The flag table's command line; the model is a positional of `vllm serve` only: the API server
        module run directly (a custom command) reads it from --model and would ignore a positional."""
        found = super().args(engine)
        command = engine.command or list(self.command)
        if command[-1:] != ["serve"] and found and found[0].flag is None:
            found[0] = Arg("--model", found[0].value)
        return found

    def listed_args(self, effective: list[str]) -> list[str]:
        return effective[2:] if effective[:1] == ["--model"] else effective[1:]  # the preset names the model

    def container_env(self, engine: VllmEngine) -> list[tuple[str, str]]:
        return [("HF_HOME", HF_HOME), *super().container_env(engine)]

    def template_values(self, engine: VllmEngine) -> dict[str, Any]:
        return {"hf_home": HF_HOME}

    def read_pinned(
        self, model_name: str, model_source: str, engine_args: str, command: list[str], image: str
    ) -> PinnedRead:
        family = family_of(self.kind, image)
        return read_pinned(
            model_name, model_source, engine_args, command or list(family.command if family else self.command)
        )

    def pinned_shape(self, engine: VllmEngine, tag: str | None = None) -> PinnedShape:
        return pinned_shape(engine, self.args(engine), self.typed_flags(), self.server_command(engine))

    def context_length(self, engine: VllmEngine) -> int:
        return engine.context_length

    def auto_context(self, engine: VllmEngine) -> bool:
        return engine.max_model_len == "auto"

    def model_repo(self, engine: VllmEngine) -> str:
        return engine.model

    def version(self, engine: VllmEngine) -> str | None:
        if engine.version:
            return engine.version
        match = re.search(r"^v(\d+\.\d+\.\d+)(?:-|$)", image_tag(engine.image) or "")
        return match.group(1) if match else None

    def release(self, engine: VllmEngine) -> tuple[int, int, int] | None:
        match = re.match(r"(\d+)\.(\d+)\.(\d+)", self.version(engine) or "")
        return (int(match[1]), int(match[2]), int(match[3])) if match else None

    def preset_lines(self, engine: VllmEngine) -> list[str]:
        lines = [f"- Model: `{engine.model}`"]
        if engine.speculative and engine.speculative.model:
            lines.append(
                f"- Drafter: `{engine.speculative.model}` ({engine.speculative.method}, "
                f"num_speculative_tokens={engine.speculative.num_speculative_tokens})"
            )
        lines.append(f"- Served model name: `{engine.served_model_name}`, context {engine.context_length} tokens")
        return lines

    def calibration(self, engine: VllmEngine) -> dict[str, Any]:
        measured = engine.calibration
        if (
            measured is None
            or (measured.model or engine.model) != engine.model
            or (measured.image or engine.image) != engine.image
        ):
            return {}  # measured on another model or image: lint refuses it, and fit does not use it
        found: dict[str, Any] = {
            "calibrated_kv_available_bytes": round(measured.available_kv_cache_gib * 2**30),
            "calibrated_at_utilization": measured.gpu_memory_utilization or engine.gpu_memory_utilization,
        }
        if measured.gpu_memory_mib:
            found["calibrated_total_bytes"] = measured.gpu_memory_mib * 2**20
        return found

    def calibration_values(self, engine: VllmEngine, log: BootLog, gpu_memory: int) -> dict[str, Any]:
        reading = log.of(self.kind, VllmLog)
        booked = gpu_memory // 2**20
        gpu_mib = booked  # the engine sees the app's booking as its device, unless the log says otherwise
        if reading.device_total_gib and abs(reading.device_total_gib * 1024 - booked) > 0.005 * 1024 + 1:
            gpu_mib = round(reading.device_total_gib * 1024)  # the log prints GiB with two decimals
        return {
            "available_kv_cache_gib": reading.available_kv_cache_gib,
            "gpu_memory_utilization": reading.gpu_memory_utilization or engine.gpu_memory_utilization,
            "gpu_memory_mib": gpu_mib,
            "model_loading_gib": reading.model_loading_gib,
            "cuda_graph_gib": reading.cuda_graph_gib,
        }

    def log_reader(self) -> VllmLog:
        return VllmLog(self.kind)

    def bench(self) -> EngineBench:
        from olarespack.engines.vllm.bench import BENCH

        return BENCH

    def smoke(self) -> EngineSmoke[VllmEngine]:
        from olarespack.engines.vllm.smoke import SMOKE

        return SMOKE

    def move_notes(self, old: VllmEngine, new: VllmEngine) -> list[str]:
        return move_notes(self.release(old), self.release(new), new)

    def release_rules(self) -> ReleaseRules:
        from olarespack.engines.vllm.release_rules import RULES

        return RULES

    def rule_catalog(self) -> Mapping[str, Rule]:
        return catalog.RULES

    def import_argv(self, argv: list[str], image: str, source: ImportSource) -> EngineImport:
        return import_vllm(argv, image, self.flags)

    def env_notes(self, env: Mapping[str, str]) -> list[str]:
        home = env.get("HF_HOME")
        if home in (None, HF_HOME):
            return []
        return [
            f"env HF_HOME {home}: the spec's chart sets {HF_HOME}; vLLM keeps the weights there unless "
            "engine.download_dir says otherwise (an upgrade may download them again)"
        ]

    def fit(self, engine: VllmEngine, request: FitRequest) -> FitReport:
        return vllm_fit(engine, request, self.release(engine))

    # ----------------------------------------------------------------------- rules

    def rules(self, file: str, engine: VllmEngine, hardware: str) -> Iterator[Problem]:
        yield from self._speculative(file, engine)
        if "--enable-auto-tool-choice" in engine.extra_args and not engine.tool_call_parser:
            yield Problem(
                file,
                "engine.tool_call_parser",
                "--enable-auto-tool-choice needs a tool-call parser (vLLM refuses to start)",
                "set engine.tool_call_parser (e.g. gemma4) and drop the extra arg",
                rule="tool-parser",
            )
        yield from batching_problems(file, engine)
        yield from extensible_cache_problems(file, engine, self.release(engine))
        if is_gemma4(engine.model):
            yield from self._gemma4(file, engine)
        yield from self._consistency(file, engine, hardware)

    def _consistency(self, file: str, engine: VllmEngine, hardware: str) -> Iterator[Problem]:
        """The drafter is made for the target, the parsers suit its family, the calibration is this setup's."""
        try:
            registry: dict[str, ModelInfo] = models_for(file)
        except ModelDataError:
            registry = {}  # the fit rule reports model data it cannot read
        if engine.speculative and engine.speculative.model:
            yield from drafter_problems(
                file,
                "engine.speculative",
                engine.model,
                engine.speculative.model,
                registry,
                hidden_states=reads_hidden_states(engine),
            )
            yield from mtp_drafter_problems(file, engine, registry)
        yield from parser_problems(
            file, engine.model, registry, tool_parser=engine.tool_call_parser, reasoning_parser=engine.reasoning_parser
        )
        yield from calibration_problems(file, engine.model, engine.image, hardware, engine.calibration)

    def _speculative(self, file: str, engine: VllmEngine) -> Iterator[Problem]:
        if engine.speculative is None:
            return
        method = engine.speculative.method
        if method in NEEDS_DRAFT_MODEL and engine.speculative.model is None:
            if (method == "mtp" or method in MTP_ALIASES) and method != "gemma4_mtp" and not is_gemma4(engine.model):
                # vLLM's SpeculativeConfig takes the target as the MTP model: right for a checkpoint with MTP
                # layers of its own (Qwen3.5/3.6, Qwen3-Next, DeepSeek-V3), which olarespack cannot see here
                yield Problem(
                    file,
                    "engine.speculative.model",
                    f"{method} without a model: vLLM drafts with "
                    f"{engine.model}'s own MTP layers, which the checkpoint must have",
                    "leave it if the model has MTP layers (Qwen3.5/3.6, DeepSeek-V3), else set the "
                    "drafter's repository",
                    rule="spec-draft-model",
                    severity="warning",
                )
            else:
                yield Problem(
                    file,
                    "engine.speculative.model",
                    f"{method} needs a draft model (without one vLLM drafts with the target itself)",
                    "set the drafter's repository",
                    rule="spec-draft-model",
                )
        release = self.release(engine)
        since = METHOD_SINCE.get(method)
        if since and release is None:
            yield Problem(
                file,
                "engine.version",
                f"cannot tell whether the image's vLLM knows {method}",
                "set engine.version to the vLLM release inside the image",
                rule="spec-method-version",
                severity="warning",
            )
        elif since and release is not None and release < since:
            yield Problem(
                file,
                "engine.speculative.method",
                f"{method} needs vLLM >= {'.'.join(map(str, since))}; the image has {'.'.join(map(str, release))}",
                "use a newer image or another method",
                rule="spec-method-version",
            )
        if method in MTP_ALIASES:
            yield self._mtp_alias(file, engine, method)
        if method == "dflash" and engine.speculative.num_speculative_tokens > DFLASH_MAX_TOKENS:
            yield Problem(
                file,
                "engine.speculative.num_speculative_tokens",
                f"must be <= {DFLASH_MAX_TOKENS} for dflash drafters (trained with blocks of 16)",
                f"use {DFLASH_MAX_TOKENS} or less (8 is the measured optimum on the RTX 5090 Laptop)",
                rule="dflash-tokens",
            )

    @staticmethod
    def _mtp_alias(file: str, engine: VllmEngine, method: str) -> Problem:
        facts = image_release(engine).facts
        if facts is not None and method in facts.sets.get("mtp_aliases", frozenset()):
            what = f"vLLM {facts.release} runs {method} as mtp and logs the alias as deprecated"
        else:
            what = f"{method} is an alias that vLLM rewrites to mtp"
        return Problem(
            file,
            "engine.speculative.method",
            what + " (the chart writes it as typed)",
            "write `method: mtp` (same drafter, same speed; SPEC_CONFIG then says mtp, a new chart)",
            rule="spec-mtp-alias",
            severity="warning",
        )

    def _gemma4(self, file: str, engine: VllmEngine) -> Iterator[Problem]:
        if engine.attention_backend == "flash_attn":
            yield Problem(
                file,
                "engine.attention_backend",
                'Gemma 4 fails with FLASH_ATTN ("partial multimodal token full attention not supported")',
                "use triton_attn",
                rule="gemma4-flash-attn",
            )
        for i, arg in enumerate(engine.extra_args):
            if arg.split("=", 1)[0] in HYBRID_KV_BREAKERS:
                yield Problem(
                    file,
                    f"engine.extra_args[{i}]",
                    f"{arg.split('=', 1)[0]} disables the hybrid KV "
                    "cache manager: every sliding-window layer is sized for the full context (about 11x "
                    "the KV)",
                    "remove it",
                    rule="hybrid-kv",
                )
