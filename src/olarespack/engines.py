"""Engine command lines built from a spec (pure).

The values go straight into the container's args, not through a ConfigMap: a changed arg changes the pod
template, so `helm upgrade` restarts the engine with it (a ConfigMap edit would not), and a rendered diff
shows the change where it runs. The same list is what the descriptions cite, so text and args cannot drift.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from olarespack.spec import LlamaCppEngine, VllmEngine

MODEL_DIR = "/models"
HF_HOME = f"{MODEL_DIR}/huggingface"
VLLM_PORT = 8000
LLAMACPP_PORT = 8080


@dataclass(frozen=True)
class Arg:
    """One command-line item: a flag, a value, or a flag and its value."""

    flag: str | None = None
    value: str | None = None

    def container_items(self) -> list[str]:
        """As written in the Deployment, where Kubernetes would expand a literal $(NAME)."""
        return [x for x in (self.flag, _escape(self.value)) if x is not None]

    def effective_items(self) -> list[str]:
        """As the process receives them, after Kubernetes expanded $(KEY)."""
        return [x for x in (self.flag, self.value) if x is not None]


def _escape(value: str | None) -> str | None:
    # Kubernetes expands $(NAME) in args; a literal one must be written $$(NAME).
    return None if value is None else value.replace("$(", "$$(")


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _switch(flag: str, enabled: bool | None) -> list[Arg]:
    if enabled is None:
        return []
    return [Arg(flag if enabled else flag.replace("--", "--no-", 1))]


def vllm_args(engine: VllmEngine) -> list[Arg]:
    args = [
        Arg(value=engine.model),
        Arg("--served-model-name", engine.served_model_name),
        Arg("--host", "0.0.0.0"),
        Arg("--port", str(VLLM_PORT)),
        Arg("--max-model-len", str(engine.context_length)),
        Arg("--gpu-memory-utilization", f"{engine.gpu_memory_utilization:g}"),
    ]
    if engine.revision:
        args.append(Arg("--revision", engine.revision))
    if engine.max_num_seqs is not None:
        args.append(Arg("--max-num-seqs", str(engine.max_num_seqs)))
    if engine.max_num_batched_tokens is not None:
        args.append(Arg("--max-num-batched-tokens", str(engine.max_num_batched_tokens)))
    if engine.attention_backend:
        args.append(Arg("--attention-backend", engine.attention_backend))
    if engine.speculative:
        config = engine.speculative.model_dump(exclude_none=True)
        args.append(Arg("--speculative-config", _compact_json(config)))
    args += [
        Arg("--kv-cache-dtype", engine.kv_cache_dtype),
        Arg("--dtype", engine.dtype),
    ]
    if engine.trust_remote_code:
        args.append(Arg("--trust-remote-code"))
    args.append(Arg("--download-dir", HF_HOME))
    args += _switch("--enable-prefix-caching", engine.enable_prefix_caching)
    args += _switch("--enable-chunked-prefill", engine.enable_chunked_prefill)
    if engine.limit_mm_per_prompt:
        args.append(Arg("--limit-mm-per-prompt", _compact_json(dict(sorted(engine.limit_mm_per_prompt.items())))))
    if engine.tool_call_parser:
        args += [Arg("--enable-auto-tool-choice"), Arg("--tool-call-parser", engine.tool_call_parser)]
    if engine.reasoning_parser:
        args.append(Arg("--reasoning-parser", engine.reasoning_parser))
    args += [Arg(value=extra) for extra in engine.extra_args]
    return args


def gguf_dir(engine: LlamaCppEngine) -> str:
    """Per-repository folder, so two repos' identically named files (mmproj-BF16.gguf) never collide."""
    return f"{MODEL_DIR}/{engine.model.repo.replace('/', '--')}"


def llamacpp_args(engine: LlamaCppEngine) -> list[Arg]:
    folder = gguf_dir(engine)
    args = [
        Arg("--host", "0.0.0.0"),
        Arg("--port", str(LLAMACPP_PORT)),
        Arg("--model", f"{folder}/{engine.model.file}"),
    ]
    if engine.model.mmproj:
        args.append(Arg("--mmproj", f"{folder}/{engine.model.mmproj}"))
    args += [
        Arg("--alias", engine.alias),
        Arg("--ctx-size", str(engine.ctx_size)),
        Arg("--n-gpu-layers", str(engine.n_gpu_layers)),
    ]
    if engine.threads is not None:
        args.append(Arg("--threads", str(engine.threads)))
    if engine.batch_size is not None:
        args.append(Arg("--batch-size", str(engine.batch_size)))
    if engine.ubatch_size is not None:
        args.append(Arg("--ubatch-size", str(engine.ubatch_size)))
    if engine.parallel is not None:
        args.append(Arg("--parallel", str(engine.parallel)))
    if engine.cache_type_k:
        args.append(Arg("--cache-type-k", engine.cache_type_k))
    if engine.cache_type_v:
        args.append(Arg("--cache-type-v", engine.cache_type_v))
    if engine.mlock:
        args.append(Arg("--mlock"))
    args.append(Arg("--flash-attn", engine.flash_attn))
    if engine.jinja:
        args.append(Arg("--jinja"))
    if engine.context_shift is not None:
        args.append(Arg("--context-shift" if engine.context_shift else "--no-context-shift"))
    args += [Arg(value=extra) for extra in engine.extra_args]
    return args


def engine_args(engine: VllmEngine | LlamaCppEngine) -> list[Arg]:
    return vllm_args(engine) if isinstance(engine, VllmEngine) else llamacpp_args(engine)


def container_args(args: list[Arg]) -> list[str]:
    return [item for a in args for item in a.container_items() if item is not None]


def effective_args(args: list[Arg]) -> list[str]:
    return [item for a in args for item in a.effective_items()]


def shell_join(items: list[str]) -> str:
    """A command line a person can paste: JSON-ish values single-quoted, as in the seed posts."""
    return " ".join(f"'{i}'" if re.search(r"[^A-Za-z0-9_./:=,@+-]", i) else i for i in items)


def engine_version(engine: VllmEngine | LlamaCppEngine) -> str | None:
    """The engine release inside the image: explicit, or read from a vX.Y.Z / bNNNN tag."""
    if isinstance(engine, VllmEngine):
        if engine.version:
            return engine.version
        match = re.search(r":v(\d+\.\d+\.\d+)(?:-|$)", engine.image)
        return match.group(1) if match else None
    match = re.search(r"-(b\d+)$", engine.image)
    return match.group(1) if match else None


# Flags the typed spec fields (or the chart itself) already set: an extra arg repeating one of them would
# either be ignored or silently win, depending on the engine's parser.
VLLM_TYPED_FLAGS = {
    "--served-model-name": "engine.served_model_name", "--model": "engine.model", "--host": "chart",
    "--port": "chart", "--max-model-len": "engine.max_model_len",
    "--gpu-memory-utilization": "engine.gpu_memory_utilization", "--revision": "engine.revision",
    "--max-num-seqs": "engine.max_num_seqs", "--max-num-batched-tokens": "engine.max_num_batched_tokens",
    "--attention-backend": "engine.attention_backend", "--speculative-config": "engine.speculative",
    "--kv-cache-dtype": "engine.kv_cache_dtype", "--dtype": "engine.dtype",
    "--trust-remote-code": "engine.trust_remote_code", "--download-dir": "chart",
    "--enable-prefix-caching": "engine.enable_prefix_caching",
    "--no-enable-prefix-caching": "engine.enable_prefix_caching",
    "--enable-chunked-prefill": "engine.enable_chunked_prefill",
    "--no-enable-chunked-prefill": "engine.enable_chunked_prefill",
    "--limit-mm-per-prompt": "engine.limit_mm_per_prompt", "--tool-call-parser": "engine.tool_call_parser",
    "--enable-auto-tool-choice": "engine.tool_call_parser", "--reasoning-parser": "engine.reasoning_parser",
}
LLAMACPP_TYPED_FLAGS = {
    "--host": "chart", "--port": "chart", "-m": "engine.model", "--model": "engine.model",
    "-mm": "engine.model.mmproj", "--mmproj": "engine.model.mmproj", "-a": "engine.alias", "--alias": "engine.alias",
    "-c": "engine.ctx_size", "--ctx-size": "engine.ctx_size", "-ngl": "engine.n_gpu_layers",
    "--n-gpu-layers": "engine.n_gpu_layers", "--gpu-layers": "engine.n_gpu_layers", "-fa": "engine.flash_attn",
    "--flash-attn": "engine.flash_attn", "-ctk": "engine.cache_type_k", "--cache-type-k": "engine.cache_type_k",
    "-ctv": "engine.cache_type_v", "--cache-type-v": "engine.cache_type_v", "-b": "engine.batch_size",
    "--batch-size": "engine.batch_size", "-ub": "engine.ubatch_size", "--ubatch-size": "engine.ubatch_size",
    "-np": "engine.parallel", "--parallel": "engine.parallel", "-t": "engine.threads", "--threads": "engine.threads",
    "--jinja": "engine.jinja", "--mlock": "engine.mlock", "--context-shift": "engine.context_shift",
    "--no-context-shift": "engine.context_shift",
}
