"""llama-server's flag table: which spec field writes which flag, under which spellings, and the flag that
names the drafter file (the image family's)."""

from __future__ import annotations

from collections.abc import Callable

from olarespack.engines.base import Flag
from olarespack.engines.images import family_of
from olarespack.engines.llamacpp.spec import PORT, LlamaCppEngine, LlamaSpeculative, gguf_path

KIND = "llamacpp"
COMMAND = "/app/llama-server"


def drafter_flag(engine: LlamaCppEngine) -> str | None:
    """The flag naming the drafter file: the image family's for the spec type, else llama.cpp's own."""
    spec = engine.speculative
    if spec is None or spec.drafter is None:
        return None
    family = family_of(KIND, engine.image)
    known = family.spec_types.get(spec.type or "draft") if family else None
    return (known.drafter_flag if known and known.drafter_flag else None) or "--model-draft"


def _speculative(engine: LlamaCppEngine, read: Callable[[LlamaSpeculative], object]) -> object:
    return read(engine.speculative) if engine.speculative else None


FLAGS: tuple[Flag[LlamaCppEngine], ...] = (
    Flag("--host", "chart", lambda e: "0.0.0.0"),
    Flag("--port", "chart", lambda e: e.port or PORT),
    Flag("--model", "engine.model", lambda e: gguf_path(e, e.model.file), aliases=("-m",)),
    Flag("--mmproj", "engine.model.mmproj", lambda e: e.model.mmproj and gguf_path(e, e.model.mmproj),
         "given", aliases=("-mm",)),
    Flag("--alias", "engine.alias", lambda e: e.alias, aliases=("-a",)),
    Flag("--ctx-size", "engine.ctx_size", lambda e: e.ctx_size, aliases=("-c",)),
    Flag("--n-gpu-layers", "engine.n_gpu_layers", lambda e: e.n_gpu_layers, aliases=("-ngl", "--gpu-layers")),
    Flag("--threads", "engine.threads", lambda e: e.threads, "given", aliases=("-t",)),
    Flag("--batch-size", "engine.batch_size", lambda e: e.batch_size, "given", aliases=("-b",)),
    Flag("--ubatch-size", "engine.ubatch_size", lambda e: e.ubatch_size, "given", aliases=("-ub",)),
    Flag("--parallel", "engine.parallel", lambda e: e.parallel, "given", aliases=("-np",)),
    Flag("--cache-type-k", "engine.cache_type_k", lambda e: e.cache_type_k, "given", aliases=("-ctk",)),
    Flag("--cache-type-v", "engine.cache_type_v", lambda e: e.cache_type_v, "given", aliases=("-ctv",)),
    Flag("--mlock", "engine.mlock", lambda e: e.mlock, "given"),
    Flag("--flash-attn", "engine.flash_attn", lambda e: e.flash_attn, aliases=("-fa",)),
    Flag("--jinja", "engine.jinja", lambda e: e.jinja, "given"),
    Flag("--context-shift", "engine.context_shift", lambda e: e.context_shift, "switch"),
    Flag("--chat-template-file", "engine.chat_template",
         lambda e: e.chat_template.path if e.chat_template else None, "given"),
    Flag("--spec-type", "engine.speculative.type", lambda e: _speculative(e, lambda s: s.type), "given"),
    Flag("--draft-max", "engine.speculative.draft_max", lambda e: _speculative(e, lambda s: s.draft_max),
         "given", aliases=("--draft", "--draft-n")),
    Flag("--draft-min", "engine.speculative.draft_min", lambda e: _speculative(e, lambda s: s.draft_min),
         "given", aliases=("--draft-n-min",)),
    Flag("--n-gpu-layers-draft", "engine.speculative.n_gpu_layers",
         lambda e: _speculative(e, lambda s: s.n_gpu_layers), "given", aliases=("-ngld", "--gpu-layers-draft")),
    Flag("--cache-type-k-draft", "engine.speculative.cache_type_k",
         lambda e: _speculative(e, lambda s: s.cache_type_k), "given", aliases=("-ctkd",)),
    Flag("--cache-type-v-draft", "engine.speculative.cache_type_v",
         lambda e: _speculative(e, lambda s: s.cache_type_v), "given", aliases=("-ctvd",)),
)
# the flags that can name the drafter file, whichever the image family uses
DRAFTER_FLAGS = ("--model-draft", "-md", "--mtp-head")
