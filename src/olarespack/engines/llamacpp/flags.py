"""llama-server's flag table: which spec field writes which flag, under which spellings, and the flag that
names the drafter file (the image family's). A typed field is written as the image's build spells it (its
release facts): `mlock` as --mlock or --load-mode, a speculative type by its name in that build."""

from __future__ import annotations

from collections.abc import Callable

from olarespack.engines.base import Flag
from olarespack.engines.images import family_of
from olarespack.engines.llamacpp.spec import PORT, LlamaCppEngine, LlamaSpeculative, gguf_path
from olarespack.engines.releases import ReleaseFacts, image_release

KIND = "llamacpp"
COMMAND = "/app/llama-server"


def drafter_flag(engine: LlamaCppEngine) -> str | None:
    """The flag naming the drafter file: the image family's for the spec type, else llama.cpp's own."""
    spec = engine.speculative
    if spec is None or spec.drafter is None:
        return None
    family = family_of(KIND, engine.image)
    known = (
        next(
            (family.spec_types[name] for name in spec_type_names(spec.type or "draft") if name in family.spec_types),
            None,
        )
        if family
        else None
    )
    return (known.drafter_flag if known and known.drafter_flag else None) or "--model-draft"


# the names one speculative type has had: the hyphenated `draft-*` names replaced `draft` and `eagle3` in
# b9246 (the spec may say either); ngram types were spelled with `_` in the type table before
SPEC_TYPE_NAMES: tuple[tuple[str, ...], ...] = (("draft-simple", "draft"), ("draft-eagle3", "eagle3"))
# --mlock on a build that memory-maps the model (its default) locks the mapped pages: --load-mode mmap+mlock.
# (--load-mode mlock reads the file into memory without mmap, and is what b10867's deprecated --mlock meant.)
MLOCK_LOAD_MODE = "mmap+mlock"


def build_facts(engine: LlamaCppEngine) -> ReleaseFacts | None:
    """The release facts of the image's build (the nearest older table), None when no table applies."""
    return image_release(engine).facts


def load_mode(engine: LlamaCppEngine) -> str | None:
    """engine.mlock as --load-mode, on a build that has it (there --mlock is deprecated or gone)."""
    facts = build_facts(engine) if engine.mlock else None
    values = facts.values("--load-mode") if facts and facts.accepts("--load-mode") else None
    return MLOCK_LOAD_MODE if values and MLOCK_LOAD_MODE in values else None


# the spellings that set llama-server's verbosity: a spec that sets it in extra_args keeps its own (so this is
# no row of the flag table, whose spellings extra_args may not repeat)
VERBOSITY_FLAGS = ("-v", "--verbose", "--log-verbose", "-lv", "--verbosity", "--log-verbosity")


def log_verbosity(engine: LlamaCppEngine) -> int | None:
    """--log-verbosity where the build prints libllama's info lines (the model, KV and compute buffer sizes that
    `olarespack calibrate` reads from a boot log) only above its default verbosity: from b9246, where
    common/log.cpp files them at trace level. None where the default prints them, or where extra_args sets the
    verbosity itself."""
    if any(arg.split("=", 1)[0] in VERBOSITY_FLAGS for arg in engine.extra_args):
        return None
    facts = build_facts(engine)
    info = facts.numbers.get("llama_info_verbosity") if facts else None
    default = facts.numbers.get("default_verbosity") if facts else None
    return info if info is not None and default is not None and info > default else None


def spec_type(engine: LlamaCppEngine) -> str | None:
    """The speculative type as the build names it: its current name where the build has it, else an older name
    the build has; nothing for the draft-model type on a build whose --spec-type only names speculation without
    a draft model (b9101: the draft model alone selects it); else the spec's name unchanged (the rules refuse
    it; nothing is invented)."""
    typed = engine.speculative.type if engine.speculative else None
    facts = build_facts(engine) if typed else None
    values = facts.values("--spec-type") if facts else None
    if typed is None or values is None:
        return typed
    names = spec_type_names(typed)
    found = next((name for name in names if name in values), None)
    if found is None and names == SPEC_TYPE_NAMES[0] and engine.speculative and engine.speculative.drafter:
        return None
    return found or typed


def spec_type_names(typed: str) -> tuple[str, ...]:
    """Every name a speculative type has had, the current one first."""
    hyphenated = typed.replace("_", "-")
    return next((group for group in SPEC_TYPE_NAMES if hyphenated in group), tuple(dict.fromkeys((hyphenated, typed))))


def _speculative(engine: LlamaCppEngine, read: Callable[[LlamaSpeculative], object]) -> object:
    return read(engine.speculative) if engine.speculative else None


# the draft bounds were renamed: every mainline build from b9101 refuses --draft-max / --draft-min ("the
# argument has been removed. use --spec-draft-n-max"); forks and builds without a table keep the old names
DRAFT_BOUNDS = {"--draft-max": "--spec-draft-n-max", "--draft-min": "--spec-draft-n-min"}


def _renamed(engine: LlamaCppEngine) -> bool:
    """Whether the build reads the new names: its table says so; without one, the spec (import keeps the
    chart's spelling: a moving tag such as server-cuda12 refuses the old names)."""
    if not engine.speculative:
        return False
    facts = build_facts(engine)
    if facts is None:
        return engine.speculative.bound_flags == "spec-draft-n"
    return all(facts.accepts(new) for new in DRAFT_BOUNDS.values())


def _bound(engine: LlamaCppEngine, flag: str) -> object:
    """A draft bound, written under `flag` only when that is the name the build reads (the `--spec-draft-n-*`
    row where the build has it, the old row otherwise), so one setting is never written twice."""
    old = next(name for name, new in DRAFT_BOUNDS.items() if flag in (name, new))
    if (flag == DRAFT_BOUNDS[old]) != _renamed(engine):
        return None
    return _speculative(engine, lambda s: s.draft_max if old == "--draft-max" else s.draft_min)


FLAGS: tuple[Flag[LlamaCppEngine], ...] = (
    Flag("--host", "chart", lambda e: "0.0.0.0"),
    Flag("--port", "chart", lambda e: e.port or PORT),
    Flag("--model", "engine.model", lambda e: gguf_path(e, e.model.file), aliases=("-m",)),
    Flag(
        "--mmproj",
        "engine.model.mmproj",
        lambda e: e.model.mmproj and gguf_path(e, e.model.mmproj),
        "given",
        aliases=("-mm",),
    ),
    Flag("--alias", "engine.alias", lambda e: e.alias, aliases=("-a",)),
    Flag("--ctx-size", "engine.ctx_size", lambda e: e.ctx_size, aliases=("-c",)),
    Flag("--n-gpu-layers", "engine.n_gpu_layers", lambda e: e.n_gpu_layers, aliases=("-ngl", "--gpu-layers")),
    Flag("--threads", "engine.threads", lambda e: e.threads, "given", aliases=("-t",)),
    Flag("--batch-size", "engine.batch_size", lambda e: e.batch_size, "given", aliases=("-b",)),
    Flag("--ubatch-size", "engine.ubatch_size", lambda e: e.ubatch_size, "given", aliases=("-ub",)),
    Flag("--parallel", "engine.parallel", lambda e: e.parallel, "given", aliases=("-np",)),
    Flag("--cache-type-k", "engine.cache_type_k", lambda e: e.cache_type_k, "given", aliases=("-ctk",)),
    Flag("--cache-type-v", "engine.cache_type_v", lambda e: e.cache_type_v, "given", aliases=("-ctv",)),
    Flag("--mlock", "engine.mlock", lambda e: e.mlock and load_mode(e) is None, "given"),
    Flag("--load-mode", "engine.mlock", load_mode, "given", aliases=("-lm",)),
    Flag("--flash-attn", "engine.flash_attn", lambda e: e.flash_attn, aliases=("-fa",)),
    Flag("--jinja", "engine.jinja", lambda e: e.jinja, "given"),
    Flag("--context-shift", "engine.context_shift", lambda e: e.context_shift, "switch"),
    Flag(
        "--chat-template-file",
        "engine.chat_template",
        lambda e: e.chat_template.path if e.chat_template else None,
        "given",
    ),
    Flag("--spec-type", "engine.speculative.type", spec_type, "given"),
    Flag("--spec-draft-n-max", "engine.speculative.draft_max", lambda e: _bound(e, "--spec-draft-n-max"), "given"),
    Flag(
        "--draft-max",
        "engine.speculative.draft_max",
        lambda e: _bound(e, "--draft-max"),
        "given",
        aliases=("--draft", "--draft-n"),
    ),
    Flag("--spec-draft-n-min", "engine.speculative.draft_min", lambda e: _bound(e, "--spec-draft-n-min"), "given"),
    Flag(
        "--draft-min",
        "engine.speculative.draft_min",
        lambda e: _bound(e, "--draft-min"),
        "given",
        aliases=("--draft-n-min",),
    ),
    Flag(
        "--n-gpu-layers-draft",
        "engine.speculative.n_gpu_layers",
        lambda e: _speculative(e, lambda s: s.n_gpu_layers),
        "given",
        aliases=("-ngld", "--gpu-layers-draft"),
    ),
    Flag(
        "--cache-type-k-draft",
        "engine.speculative.cache_type_k",
        lambda e: _speculative(e, lambda s: s.cache_type_k),
        "given",
        aliases=("-ctkd",),
    ),
    Flag(
        "--cache-type-v-draft",
        "engine.speculative.cache_type_v",
        lambda e: _speculative(e, lambda s: s.cache_type_v),
        "given",
        aliases=("-ctvd",),
    ),
)
# the flags that can name the drafter file, whichever the image family uses
DRAFTER_FLAGS = ("--model-draft", "-md", "--mtp-head")
