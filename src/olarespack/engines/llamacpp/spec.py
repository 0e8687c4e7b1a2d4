"""llama.cpp's spec model: the engine block of an app served by llama-server (build b9101), with its GGUF
files, drafter, chat template and calibration, and where the files are kept."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from olarespack.core.types import MAX_ITEMS, ArgText, EnvName, HfRepo, Image, ModelPath, StrictModel, Text, Tokens
from olarespack.engines.base import MODEL_DIR, ContainerResources, EngineSpec, mounted_file_path
from olarespack.engines.calibration import DeviceName, MeasuredOn, MiB

PORT = 8080
# The init container that fetches the GGUF files before llama-server starts.
DOWNLOADER = ContainerResources("model-downloader", 100, 1000, 128 * 2**20, 512 * 2**20)
FULL_PRECISION_CACHE = frozenset({"f32", "f16", "bf16"})
GgufName = Annotated[str, StringConstraints(max_length=200, pattern=r"^[A-Za-z0-9._-]+\.gguf$")]


class GgufModel(StrictModel):
    repo: HfRepo = Field(description="Hugging Face repository holding the GGUF files.")
    file: GgufName = Field(description="Model GGUF file name.")
    mmproj: GgufName | None = Field(None, description="Multimodal projector GGUF file name.")
    mmproj_repo: HfRepo | None = Field(
        None, description="The repository of the projector when it is not the model's (its main revision)."
    )
    revision: Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9._-]+$")] = Field(
        "main", description="Branch, tag or commit to download from."
    )
    folder: ModelPath | None = Field(
        None,
        description="Where the files are kept, under /models (the app's storage) or /shared-models (the "
        "box's shared model folder, Olares' sharedlib ai/model, which other apps read too); default "
        "/models/<owner>--<repo>, so two repositories' files never collide. Keep what an installed chart used, "
        "or an upgrade downloads the files again.",
    )
    saved_as: dict[GgufName, GgufName] = Field(
        default_factory=dict,
        max_length=8,
        description="Local names of repository files, when an installed "
        "chart saved them under another name (file in the repository: file name on disk).",
    )

    def local(self, name: str) -> str:
        return self.saved_as.get(name, name)


# ggml's types (f16, q8_0, ...) and those a fork adds (turbo3): which ones an image knows is in
# engines/llamacpp/images.yaml, checked by the rules
CacheType = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,15}$")]
SpecTypeName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
Revision = Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9._-]+$")]
FilePath = Annotated[
    str,
    StringConstraints(max_length=256, pattern=r"^(/[A-Za-z0-9][A-Za-z0-9._-]*)+$"),
    AfterValidator(mounted_file_path),
]
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
    draft_max: int | None = Field(None, ge=0, le=1_024, description="--spec-draft-n-max (--draft-max on forks).")
    draft_min: int | None = Field(None, ge=0, le=1_024, description="--spec-draft-n-min (--draft-min on forks).")
    bound_flags: Literal["spec-draft-n", "draft"] | None = Field(
        None,
        description="The names the draft bounds go under on an image whose build has no release table: "
        "spec-draft-n (--spec-draft-n-max/min, every mainline build from b9101) or draft (--draft-max/min, older "
        "forks). Default: the build's table decides, else draft. import sets it from the chart.",
    )
    n_gpu_layers: int | None = Field(None, ge=0, le=10_000, description="-ngld / --n-gpu-layers-draft.")
    cache_type_k: CacheType | None = Field(None, description="-ctkd / --cache-type-k-draft.")
    cache_type_v: CacheType | None = Field(None, description="-ctvd / --cache-type-v-draft.")


class LlamaCppCalibration(MeasuredOn):
    """The buffers llama.cpp allocated at one boot, per device (CUDA0, CUDA_Host, CPU_Mapped, ...), in MiB."""

    model_buffer_mib: dict[DeviceName, MiB] = Field(
        default_factory=dict, max_length=16, description="`<device> model buffer size = X MiB` (weights)."
    )
    kv_buffer_mib: dict[DeviceName, MiB] = Field(
        default_factory=dict, max_length=16, description="`<device> KV buffer size = X MiB`, summed over caches."
    )
    compute_buffer_mib: dict[DeviceName, MiB] = Field(
        default_factory=dict,
        max_length=16,
        description="`<device> compute buffer size = X MiB`, summed over the model's and the projector's.",
    )
    n_ctx: int | None = Field(None, gt=0, le=16_777_216, description="The context of that boot (`n_ctx = N`).")

    @staticmethod
    def gpu_mib(buffers: dict[str, float]) -> float:
        """The part of a buffer map on GPUs (CUDA0, ROCm0, Vulkan0: a device name ending in its number)."""
        return sum(mib for device, mib in buffers.items() if re.fullmatch(r"[A-Za-z]{1,32}[0-9]{1,3}", device))


class LlamaCppEngine(EngineSpec):
    kind: Literal["llamacpp"]
    image: Image = Field(description="llama.cpp server image pinned to a build, e.g. ...:server-cuda13-b9101.")
    downloader_image: Image | None = Field(
        None,
        description="Image of the init container that downloads the GGUF files (needs sh and curl); "
        "default: the engine image, whose official builds carry curl.",
    )
    model: GgufModel
    alias: Text = Field(description="--alias: the model name clients use.")
    ctx_size: Tokens | None = Field(
        description="-c / --ctx-size; null: not written, and llama-server takes the context the model was trained "
        "with (its GGUF's context_length; fit reads it from the model's data)."
    )
    # null: the flag is not written and llama-server's own default applies (an imported chart that never set it)
    n_gpu_layers: Annotated[int, Field(ge=0, le=10_000)] | Literal["all", "auto"] | None = Field(
        99,
        description="-ngl / --n-gpu-layers: a count, all, or auto (llama.cpp offloads what fits; every build "
        "from b9101 reads both words); null: not written.",
    )
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
    chat_template: ChatTemplate | None = Field(
        None, description="--chat-template-file: a template the chart mounts at its path (from a ConfigMap)."
    )
    calibration: LlamaCppCalibration | None = Field(
        None,
        description="The buffers one boot allocated (`olarespack calibrate`); replace the estimated weights "
        "and compute buffers in fit checks while the model, image and hardware are those it was measured on.",
    )
    extra_args: list[ArgText] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Further llama-server arguments."
    )
    env: dict[EnvName, ArgText] = Field(
        default_factory=dict,
        max_length=MAX_ITEMS,
        description="Extra environment of the engine (values are literal: $(VAR) is not expanded).",
    )


def gguf_dir(engine: LlamaCppEngine) -> str:
    """The files' folder: the spec's, else one per repository, so two repositories' identically named files
    (mmproj-BF16.gguf) never collide."""
    return engine.model.folder or f"{MODEL_DIR}/{engine.model.repo.replace('/', '--')}"


def gguf_path(engine: LlamaCppEngine, name: str) -> str:
    return f"{gguf_dir(engine)}/{engine.model.local(name)}"


def downloaded_files(engine: LlamaCppEngine) -> list[str]:
    """The repository files the downloader fetches into the model's folder: model, projector, drafter."""
    model = engine.model
    drafter = engine.speculative.drafter if engine.speculative else None
    return [model.file, *([model.mmproj] if model.mmproj else []), *([drafter.file] if drafter else [])]
