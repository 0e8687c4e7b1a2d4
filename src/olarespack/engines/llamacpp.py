"""llama.cpp's llama-server (build b9101): its spec model, flag table, GGUF downloader, boot rules and fit."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, StringConstraints

from olarespack.core.errors import ModelDataError, Problem, UsageError
from olarespack.core.types import MAX_ITEMS, ArgText, EnvName, HfRepo, Image, ModelPath, StrictModel, Text, Tokens
from olarespack.core.units import gib, largest_fitting, share_needed
from olarespack.engines.base import MODEL_DIR, Arg, ContainerResources, Engine, EngineSpec, Flag, mounted_file_path
from olarespack.engines.calibration import LlamaCppCalibration, calibration_problems
from olarespack.engines.common import image_tag, is_gemma4
from olarespack.engines.consistency import drafter_problems
from olarespack.engines.images import family_of
from olarespack.fit.llamacpp_kv import (
    LLAMACPP_AUTO_PARALLEL,
    LLAMACPP_DEFAULT_BATCH,
    LLAMACPP_DEFAULT_UBATCH,
    LLAMACPP_RUNTIME_BYTES,
    MMPROJ_COMPUTE_BYTES,
    llamacpp_compute_bytes,
    llamacpp_context,
    llamacpp_kv_bytes,
)
from olarespack.fit.report import FitReport, FitRequest, Source
from olarespack.models.arch import ModelInfo, find_model, models, models_for

if TYPE_CHECKING:
    from olarespack.spec.models import AppSpec

PORT = 8080
MIB = 2**20
# The init container that fetches the GGUF files before llama-server starts.
DOWNLOADER = ContainerResources("model-downloader", 100, 1000, 128 * 2**20, 512 * 2**20)
FULL_PRECISION_CACHE = frozenset({"f32", "f16", "bf16"})
GgufName = Annotated[str, StringConstraints(max_length=200, pattern=r"^[A-Za-z0-9._-]+\.gguf$")]


class GgufModel(StrictModel):
    repo: HfRepo = Field(description="Hugging Face repository holding the GGUF files.")
    file: GgufName = Field(description="Model GGUF file name.")
    mmproj: GgufName | None = Field(None, description="Multimodal projector GGUF file name.")
    mmproj_repo: HfRepo | None = Field(
        None, description="The repository of the projector when it is not the model's (its main revision).")
    revision: Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9._-]+$")] = Field(
        "main", description="Branch, tag or commit to download from."
    )
    folder: ModelPath | None = Field(
        None, description="Where the files are kept, under /models (the app's storage); default "
        "/models/<owner>--<repo>, so two repositories' files never collide. Keep what an installed chart used, "
        "or an upgrade downloads the files again.")
    saved_as: dict[GgufName, GgufName] = Field(
        default_factory=dict, max_length=8, description="Local names of repository files, when an installed "
        "chart saved them under another name (file in the repository: file name on disk).")

    def local(self, name: str) -> str:
        return self.saved_as.get(name, name)


# ggml's types (f16, q8_0, ...) and those a fork adds (turbo3): which ones an image knows is in
# data/engine-images.yaml, checked by the rules
CacheType = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,15}$")]
SpecTypeName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
Revision = Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9._-]+$")]
FilePath = Annotated[str, StringConstraints(max_length=256, pattern=r"^(/[A-Za-z0-9][A-Za-z0-9._-]*)+$"),
                     AfterValidator(mounted_file_path)]
TemplateText = Annotated[str, StringConstraints(min_length=1, max_length=65_536)]


class DrafterFile(StrictModel):
    repo: HfRepo = Field(description="Hugging Face repository holding the drafter GGUF.")
    file: GgufName = Field(description="Drafter GGUF file name (kept in the model's folder).")
    revision: Revision = Field("main", description="Branch, tag or commit to download from.")


class ChatTemplate(StrictModel):
    """A chat template file the chart puts where llama-server reads it (--chat-template-file)."""

    path: FilePath = Field(description="Where the server reads it, e.g. /models/chat_template.jinja.")
    text: TemplateText = Field(description="The template itself (Jinja, kept verbatim in the chart's files/).")


class LlamaSpeculative(StrictModel):
    """Speculative decoding in llama-server and its forks: which --spec-type values an image knows, and the
    flag that names the drafter file (--model-draft, a fork's --mtp-head), come from its family."""

    type: SpecTypeName | None = Field(None, description="--spec-type (draft, draft-mtp; forks: mtp, dflash).")
    drafter: DrafterFile | None = Field(None, description="The drafter GGUF (an MTP head or a draft model).")
    draft_max: int | None = Field(None, ge=0, le=1_024, description="--draft-max.")
    draft_min: int | None = Field(None, ge=0, le=1_024, description="--draft-min.")
    n_gpu_layers: int | None = Field(None, ge=0, le=10_000, description="-ngld / --n-gpu-layers-draft.")
    cache_type_k: CacheType | None = Field(None, description="-ctkd / --cache-type-k-draft.")
    cache_type_v: CacheType | None = Field(None, description="-ctvd / --cache-type-v-draft.")


class LlamaCppEngine(EngineSpec):
    kind: Literal["llamacpp"]
    image: Image = Field(description="llama.cpp server image pinned to a build, e.g. ...:server-cuda13-b9101.")
    downloader_image: Image | None = Field(
        None, description="Image of the init container that downloads the GGUF files (needs sh and curl); "
        "default: the engine image, whose official builds carry curl.")
    model: GgufModel
    alias: Text = Field(description="--alias: the model name clients use.")
    ctx_size: Tokens = Field(description="-c / --ctx-size.")
    # null: the flag is not written and llama-server's own default applies (an imported chart that never set it)
    n_gpu_layers: int | None = Field(99, ge=0, le=10_000, description="-ngl / --n-gpu-layers (null: not written).")
    flash_attn: Literal["on", "off", "auto"] | None = Field("auto", description="-fa (null: not written).")
    cache_type_k: CacheType | None = Field(None, description="-ctk.")
    cache_type_v: CacheType | None = Field(None, description="-ctv (a quantized V cache needs flash_attn on).")
    batch_size: Tokens | None = Field(None, description="-b / --batch-size.")
    ubatch_size: Tokens | None = Field(None, description="-ub / --ubatch-size.")
    parallel: int | None = Field(None, gt=0, le=1_024, description="--parallel.")
    threads: int | None = Field(None, gt=0, le=1_024, description="--threads.")
    jinja: bool = Field(False, description="--jinja (use the model's chat template).")
    mlock: bool = Field(False, description="--mlock.")
    context_shift: bool | None = Field(None, description="false renders --no-context-shift.")
    speculative: LlamaSpeculative | None = Field(None, description="Speculative decoding (drafter, MTP head).")
    chat_template: ChatTemplate | None = Field(None, description="--chat-template-file: a template the chart "
                                               "mounts at its path (from a ConfigMap).")
    calibration: LlamaCppCalibration | None = Field(
        None, description="The buffers one boot allocated (`olarespack calibrate`); replace the estimated weights "
        "and compute buffers in fit checks while the model, image and hardware are those it was measured on.")
    extra_args: list[ArgText] = Field(default_factory=list, max_length=MAX_ITEMS,
                                      description="Further llama-server arguments.")
    env: dict[EnvName, ArgText] = Field(default_factory=dict, max_length=MAX_ITEMS,
                                        description="Extra environment of the engine (values are literal: $(VAR) is "
                                        "not expanded).")


def gguf_dir(engine: LlamaCppEngine) -> str:
    """The files' folder: the spec's, else one per repository, so two repositories' identically named files
    (mmproj-BF16.gguf) never collide."""
    return engine.model.folder or f"{MODEL_DIR}/{engine.model.repo.replace('/', '--')}"


def gguf_path(engine: LlamaCppEngine, name: str) -> str:
    return f"{gguf_dir(engine)}/{engine.model.local(name)}"


def drafter_flag(engine: LlamaCppEngine) -> str | None:
    """The flag naming the drafter file: the image family's for the spec type, else llama.cpp's own."""
    spec = engine.speculative
    if spec is None or spec.drafter is None:
        return None
    family = family_of("llamacpp", engine.image)
    known = family.spec_types.get(spec.type or "draft") if family else None
    return (known.drafter_flag if known and known.drafter_flag else None) or "--model-draft"


def _speculative(engine: LlamaCppEngine, read: Callable[[LlamaSpeculative], object]) -> object:
    return read(engine.speculative) if engine.speculative else None


def _has(args: list[str], *names: str) -> bool:
    return any(a in names for a in args)


class LlamaCpp(Engine):
    kind = "llamacpp"
    title = "llama.cpp"
    model = LlamaCppEngine
    port = PORT
    container_name = "llama-server"
    command = ("/app/llama-server",)
    context_field = "ctx_size"
    hf_env = False  # the downloader fetches the files; the server never talks to Hugging Face
    flags: ClassVar[tuple[Flag, ...]] = (
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
    drafter_flags: ClassVar[tuple[str, ...]] = ("--model-draft", "-md", "--mtp-head")

    def args(self, engine: Any) -> list[Arg]:
        """The flag table, the drafter file under the flag its image family reads, then the extra args."""
        table = [arg for flag in self.flags for arg in flag.args(engine)]
        flag = drafter_flag(engine)
        if flag is not None:
            drafter = engine.speculative.drafter
            table.append(Arg(flag, f"{gguf_dir(engine)}/{engine.model.local(drafter.file)}"))
        return table + [Arg(value=extra) for extra in engine.extra_args]

    def typed_flags(self) -> dict[str, str]:
        return {**super().typed_flags(), **dict.fromkeys(self.drafter_flags, "engine.speculative.drafter")}

    def init_containers(self, engine: Any) -> list[ContainerResources]:
        return [DOWNLOADER]

    def template_values(self, engine: Any) -> dict[str, Any]:
        model = engine.model
        files = [model.file, *([model.mmproj] if model.mmproj else [])]
        found: list[tuple[str, ...]] = [(name, gguf_path(engine, name)) for name in files]
        if model.mmproj and model.mmproj_repo and model.mmproj_repo != model.repo:
            found[1] = (model.mmproj, gguf_path(engine, model.mmproj), model.mmproj_repo, "main")
        drafter = engine.speculative.drafter if engine.speculative else None
        if drafter is not None:
            local = gguf_path(engine, drafter.file)
            same = drafter.repo == model.repo and drafter.revision == model.revision
            found.append((drafter.file, local) if same else (drafter.file, local, drafter.repo, drafter.revision))
        template = engine.chat_template
        return {"repo": model.repo, "revision": model.revision, "files": found,
                # one fixed name in files/ and the ConfigMap: the path's own name could be one .helmignore
                # drops (x.bak), and the mount names the key
                "chat_template": template and {"path": template.path, "file": "chat-template.jinja",
                                               "text": template.text,
                                               "sha256": hashlib.sha256(template.text.encode()).hexdigest()}}

    def images(self, engine: Any) -> list[tuple[str, str]]:
        found = [("engine.image", engine.image)]
        if engine.downloader_image:
            found.append(("engine.downloader_image", engine.downloader_image))
        return found

    def context_length(self, engine: Any) -> int:
        return int(engine.ctx_size)

    def model_repo(self, engine: Any) -> str:
        return str(engine.model.repo)

    def version(self, engine: Any) -> str | None:
        match = re.search(r"-(b\d+)$", image_tag(engine.image) or "")
        return match.group(1) if match else None

    def preset_lines(self, engine: Any) -> list[str]:
        projector = f" + projector `{engine.model.mmproj}`" if engine.model.mmproj else ""
        return [f"- Model: `{engine.model.repo}` file `{engine.model.file}`{projector}",
                f"- Served model name: `{engine.alias}`, context {engine.ctx_size} tokens"]

    def rules(self, file: str, spec: AppSpec) -> Iterator[Problem]:
        engine = spec.engine
        assert isinstance(engine, LlamaCppEngine)
        if engine.ubatch_size and engine.batch_size and engine.ubatch_size > engine.batch_size:
            yield Problem(file, "engine.ubatch_size", f"{engine.ubatch_size} > batch_size {engine.batch_size}: "
                          "llama.cpp silently caps it", f"use at most {engine.batch_size}", rule="ubatch-batch")
        if engine.cache_type_v and engine.cache_type_v not in FULL_PRECISION_CACHE and engine.flash_attn != "on":
            # auto (also llama-server's default, when not written) turns flash attention on where the GPU has it
            # (every CUDA GPU llama.cpp supports), and refuses the quantized V cache only where it has not
            auto = engine.flash_attn in ("auto", None)
            yield Problem(file, "engine.cache_type_v", f"a quantized V cache ({engine.cache_type_v}) needs flash "
                          "attention" + (" (auto turns it on on CUDA GPUs)" if auto else ""),
                          "set engine.flash_attn: \"on\"", rule="quantized-v-cache",
                          severity="warning" if auto else "error")
        yield from self._family(file, engine)
        yield from self._chat_template(file, engine)
        drafter = engine.speculative.drafter if engine.speculative else None
        if drafter is not None:
            try:
                registry: dict[str, ModelInfo] = models_for(file)
            except ModelDataError:
                registry = {}  # the fit rule reports model data it cannot read
            yield from drafter_problems(file, "engine.speculative.drafter", engine.model.repo, drafter.repo, registry)
        yield from calibration_problems(file, engine.model.repo, engine.image, spec.hardware, engine.calibration)
        mmproj = engine.model.mmproj
        if mmproj and is_gemma4(engine.model.repo) and "bf16" not in mmproj.lower():
            yield Problem(file, "engine.model.mmproj", f"{mmproj}: Gemma 4 audio needs the BF16 projector (F16 and "
                          "Q8_0 give repetitive output)", "use the mmproj-BF16.gguf file", rule="gemma4-mmproj-bf16")

    def _chat_template(self, file: str, engine: LlamaCppEngine) -> Iterator[Problem]:
        """The template is mounted over its path: never over a model file, nor inside an emptyDir folder."""
        template = engine.chat_template
        if template is None:
            return
        downloaded = {line[1] for line in self.template_values(engine)["files"]}
        inside = [folder for folder in engine.scratch if template.path.startswith(f"{folder}/")]
        if template.path in downloaded or inside:
            what = f"the scratch folder {inside[0]}" if inside else "a model file the downloader writes there"
            yield Problem(file, "engine.chat_template.path", f"{template.path} is {'in ' if inside else ''}{what}",
                          "use a path of its own, e.g. /models/chat_template.jinja", rule="chat-template-path")

    def _family(self, file: str, engine: LlamaCppEngine) -> Iterator[Problem]:
        """What the image's family knows: its KV cache types and speculative types (a fork's flags)."""
        family = family_of(self.kind, engine.image)
        if family is None:
            yield Problem(file, "engine.image", f"{engine.image} is no llama.cpp image family olarespack knows: its "
                          "cache and speculative types are passed through unchecked",
                          "fine for a custom build; set engine.command if its server is not llama-server on PATH",
                          rule="llamacpp-image-family", severity="warning")
            return
        types = family.all_cache_types()
        speculative = engine.speculative
        cache_fields = [("engine.cache_type_k", engine.cache_type_k), ("engine.cache_type_v", engine.cache_type_v)]
        if speculative:
            cache_fields += [("engine.speculative.cache_type_k", speculative.cache_type_k),
                             ("engine.speculative.cache_type_v", speculative.cache_type_v)]
        for path, value in cache_fields:
            if value is not None and value not in types:
                yield Problem(file, path, f"{value!r} is not a KV cache type of {family.name} ({engine.image}); "
                              "llama-server refuses to start", f"use one of {', '.join(sorted(types))}",
                              rule="llamacpp-cache-type")
        if speculative is None:
            return
        if speculative.type is not None:
            known = family.spec_types.get(speculative.type)
            build = family.build_number(engine.image)
            if known is None:
                yield Problem(file, "engine.speculative.type", f"--spec-type {speculative.type} is unknown to "
                              f"{family.name} ({engine.image})",
                              f"use one of {', '.join(sorted(family.spec_types)) or 'none'}, or an image that has it",
                              rule="llamacpp-spec-type")
            elif known.min_build and build is not None and build < known.min_build:
                yield Problem(file, "engine.speculative.type", f"--spec-type {speculative.type} arrived in build "
                              f"b{known.min_build}; the image is b{build}", f"use b{known.min_build} or later",
                              rule="llamacpp-spec-type")
            elif known and known.drafter_flag and speculative.drafter is None:
                yield Problem(file, "engine.speculative.drafter", f"--spec-type {speculative.type} needs a drafter "
                              f"file ({known.drafter_flag})", "set engine.speculative.drafter (repo and file)",
                              rule="llamacpp-spec-type")

    def fit(self, spec: AppSpec, request: FitRequest) -> FitReport:
        engine = spec.engine
        assert isinstance(engine, LlamaCppEngine)
        family = family_of(self.kind, engine.image)
        sizes = {name: (c.block_bytes, c.block_values) for name, c in family.all_cache_types().items()} \
            if family else None
        if request.calibrated_kv_available_bytes is not None:
            raise UsageError("calibration from `Available KV cache memory` applies to vLLM apps only")
        info = find_model(engine.model.repo, request.registry)
        if info.arch is None:
            raise ModelDataError(f"{info.repo} has no KV layers of its own: llama.cpp cannot serve it alone")
        arch = info.arch
        notes: list[str] = []
        files = [engine.model.file] + ([engine.model.mmproj] if engine.model.mmproj else [])
        missing = [f for f in files if f not in info.files]
        if missing:
            raise ModelDataError(f"no size for {', '.join(missing)} in {info.repo}; known files: "
                                 f"{', '.join(sorted(info.files)) or 'none'}")
        main = info.files[engine.model.file]
        weights = main.bytes - main.host_bytes + sum(info.files[f].bytes for f in files[1:])
        exact = main.exact and main.host_exact and all(info.files[f].exact for f in files[1:])
        if main.host_bytes:
            notes.append(f"{gib(main.host_bytes):.2f} GiB of input embeddings stay in host memory")
        cache_types = family.all_cache_types() if family else {}
        if family and any(cache_types[name].estimate for name in (engine.cache_type_k, engine.cache_type_v)
                          if name in cache_types):
            notes.append(f"the storage of the {family.name} KV cache types is an estimate")
        drafter = engine.speculative.drafter if engine.speculative else None
        drafter_bytes = 0
        if drafter is not None:
            drafter_info = (models() if request.registry is None else request.registry).get(drafter.repo)
            if drafter_info is not None and drafter.file in drafter_info.files:
                drafter_bytes = drafter_info.files[drafter.file].bytes
            else:
                notes.append(f"drafter {drafter.repo}/{drafter.file}: no size known, not counted "
                             f"(olarespack model add {drafter.repo} --gguf {drafter.file})")
        weights += drafter_bytes
        length = request.max_model_len or engine.ctx_size
        if engine.parallel is None:
            parallel, unified = LLAMACPP_AUTO_PARALLEL, True
            notes.append(f"--parallel not set: llama-server's {parallel} slots over a unified cache taken")
        else:
            parallel, unified = engine.parallel, _has(engine.extra_args, "--kv-unified", "-kvu")
        swa_full = _has(engine.extra_args, "--swa-full")
        type_k, type_v = engine.cache_type_k or "f16", engine.cache_type_v or "f16"
        flash = engine.flash_attn != "off"
        if type_v not in FULL_PRECISION_CACHE and not flash:
            notes.append("llama.cpp refuses a quantized V cache without flash attention (-fa on)")
        if engine.n_gpu_layers is not None and engine.n_gpu_layers <= arch.num_hidden_layers:
            notes.append(f"n_gpu_layers {engine.n_gpu_layers} leaves layers on the CPU; the figures assume all "
                         "on GPU")
        options: dict[str, Any] = {"parallel": parallel, "kv_unified": unified,
                                   "batch_size": engine.batch_size or LLAMACPP_DEFAULT_BATCH,
                                   "ubatch_size": engine.ubatch_size or LLAMACPP_DEFAULT_UBATCH}

        def kv_at(n: int) -> int:
            return llamacpp_kv_bytes(arch, n, type_k=type_k, type_v=type_v, swa_full=swa_full, type_sizes=sizes,
                                     **options)

        ctx = llamacpp_context(length, **options)
        needed = kv_at(length)
        overhead = (LLAMACPP_RUNTIME_BYTES + llamacpp_compute_bytes(arch, ctx.n_ubatch, ctx.n_ctx, flash_attn=flash)
                    + (MMPROJ_COMPUTE_BYTES if engine.model.mmproj else 0))
        source: Source = "estimate"
        measured = engine.calibration
        if measured is not None and (measured.model, measured.image, measured.hardware) == (
                engine.model.repo, engine.image, spec.hardware) and measured.model_buffer_mib:
            # the boot's own GPU buffers: weights as loaded, compute buffers as allocated (at that boot's context)
            weights = round(measured.gpu_mib(measured.model_buffer_mib) * MIB)
            overhead = LLAMACPP_RUNTIME_BYTES + round(measured.gpu_mib(measured.compute_buffer_mib) * MIB)
            exact, source = True, "calibrated"
            notes.append("weights and compute buffers calibrated from a boot"
                         + (f" at n_ctx {measured.n_ctx}" if measured.n_ctx else ""))
        if request.kv_available_bytes is not None:
            available, source = request.kv_available_bytes, "given"
            overhead = request.total - weights - available
        else:
            available = request.total - weights - overhead
        fits = available > 0 and needed <= available

        def fits_at(n: int) -> bool:
            return kv_at(n) <= available

        fit_len = length if fits else (largest_fitting(length, fits_at) if available > 0 else 0)
        ceiling = max(length, arch.max_position_embeddings or length)
        fit_ctx = llamacpp_context(fit_len, **options) if fit_len else None
        return FitReport(
            app=spec.name, engine=self.kind, engine_title=self.title, model=f"{info.repo}/{engine.model.file}",
            drafter=None, total_bytes=request.total, gpu_memory_utilization=None, budget_bytes=request.total,
            weights_bytes=weights, drafter_weights_bytes=0, overhead_bytes=overhead, overhead_source=source,
            kv_cache_needed_bytes=needed, drafter_kv_bytes=0, kv_cache_available_bytes=available,
            headroom_bytes=available - needed, max_model_len=length, max_model_len_fit=fit_len,
            max_model_len_limit=largest_fitting(ceiling, fits_at) if available > 0 else 0,
            concurrency=float(fit_ctx.n_ctx // fit_ctx.n_ctx_seq) if fit_ctx else 0.0,
            fits=fits, utilization_needed=share_needed(request.total, weights + overhead + needed),
            kv_cache_dtype=f"k {type_k}, v {type_v}", weights_exact=exact,
            settings={"n_ctx": ctx.n_ctx, "n_ctx_per_slot": ctx.n_ctx_seq, "n_ubatch": ctx.n_ubatch,
                      "parallel": parallel, "kv_unified": unified, "swa_full": swa_full, "flash_attn": flash},
            notes=tuple(notes),
        )


ENGINE = LlamaCpp()
