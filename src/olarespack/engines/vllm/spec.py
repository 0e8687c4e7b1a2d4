"""vLLM's spec model: the engine block of an app served by vLLM (0.20 / 0.21), and its calibration."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, StringConstraints

from olarespack.core.types import (
    MAX_ITEMS,
    ArgText,
    ByteQuantity,
    EnvName,
    HfRepo,
    Image,
    ModelPath,
    Revision,
    StrictModel,
    Text,
    Tokens,
)
from olarespack.engines.base import MODEL_DIR, EngineSpec
from olarespack.engines.calibration import MeasuredOn

PORT = 8000
HF_HOME = f"{MODEL_DIR}/huggingface"

SpeculativeMethod = Literal[
    "ngram",
    "medusa",
    "mlp_speculator",
    "draft_model",
    "suffix",
    "eagle",
    "eagle3",
    "extract_hidden_states",
    "dflash",
    "ngram_gpu",
    "mtp",
    "gemma4_mtp",
    "deepseek_mtp",
    "qwen3_5_mtp",
    "qwen3_next_mtp",
    "mimo_mtp",
    "glm4_moe_mtp",
    "ernie_mtp",
    "longcat_flash_mtp",
]
SPECULATIVE_METHODS: tuple[str, ...] = get_args(SpeculativeMethod)
MTP_ALIASES = frozenset(m for m in SPECULATIVE_METHODS if m.endswith("_mtp"))
# Methods that draft with a separate model (or MTP head) and so need speculative.model.
NEEDS_DRAFT_MODEL = MTP_ALIASES | {"mtp", "dflash", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model"}
# The first vLLM release that knows a speculative method (only those that arrived in the versions we track).
METHOD_SINCE = {"gemma4_mtp": (0, 21, 0), "dflash": (0, 20, 0)}
DFLASH_MAX_TOKENS = 15  # DFlash drafters are trained with blocks of 16 positions
# Flags that make vLLM size every sliding-window layer for the full context (about 11x more KV on Gemma 4).
HYBRID_KV_BREAKERS = ("--disable-hybrid-kv-cache-manager", "--kv-transfer-config")


class Speculative(StrictModel):
    method: SpeculativeMethod = Field(
        description="vLLM speculative method, written to the chart as typed (vLLM runs MTP aliases such as "
        "gemma4_mtp as mtp; lint warns)."
    )
    model: HfRepo | None = Field(None, description="Draft model repository (required for MTP, DFlash, EAGLE).")
    num_speculative_tokens: int = Field(gt=0, le=128, description="Tokens drafted per step.")


class VllmCalibration(MeasuredOn):
    """What vLLM printed at one boot, so fit checks use this app's real non-KV memory."""

    available_kv_cache_gib: float = Field(
        gt=0, le=4096, description="From the boot log line `Available KV cache memory: X GiB`."
    )
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="The utilization of that boot; defaults to engine.gpu_memory_utilization."
    )
    gpu_memory_mib: int | None = Field(
        None,
        gt=0,
        le=1_048_576,
        description="The GPU memory the engine saw at that boot (its HAMi limit), in MiB; "
        "defaults to the app's GPU memory.",
    )
    model_loading_gib: float | None = Field(
        None, ge=0, le=4096, description="For the record: `Model loading took X GiB` (weights on the GPU)."
    )
    cuda_graph_gib: float | None = Field(
        None, ge=-64, le=4096, description="For the record: `Graph capturing finished in ... took X GiB`."
    )


# a name of the release's KV-cache dtype registry (auto, fp8, ..., 0.20's turboquant_k8v4): the image's release
# table judges it (engines/vllm/release_rules.py), and fit models the storage of auto, fp8* and 16-bit ones
KvCacheDtype = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
AttentionBackend = Literal[
    "triton_attn",
    "flash_attn",
    "flashinfer",
    "flex_attention",
    "tree_attn",
    "xformers",
    "rocm_attn",
    "cpu_attn",
    "flashmla",
    "cutlass_mla",
    "triton_mla",
]


class VllmEngine(EngineSpec):
    kind: Literal["vllm"]
    image: Image = Field(description="Container image with a pinned tag, e.g. vllm/vllm-openai:v0.21.0-cu129.")
    version: (
        Annotated[str, StringConstraints(max_length=64, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*$")] | None
    ) = Field(
        None, description="vLLM version inside the image (e.g. 0.20.2rc1); needed only when the tag does not say it."
    )
    model: HfRepo = Field(description="Hugging Face repository of the served model.")
    revision: Revision | None = Field(None, description="Model revision (branch, tag or commit).")
    served_model_name: Text = Field(description="Name clients use in the OpenAI API.")
    max_model_len: Tokens | Literal["auto"] = Field(
        description="Context length (--max-model-len), or auto: the largest that fits the GPU, which the "
        "build computes with vLLM's own KV-cache arithmetic."
    )
    gpu_memory_utilization: float = Field(gt=0, le=1, description="Fraction of device memory vLLM may use.")
    # null: the flag is not written and vLLM's own default applies (an imported chart that never set it)
    kv_cache_dtype: KvCacheDtype | None = Field("auto", description="--kv-cache-dtype (null: not written).")
    attention_backend: AttentionBackend | None = Field(None, description="--attention-backend.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] | None = Field(
        "auto", description="--dtype (null: not written)."
    )
    trust_remote_code: bool = Field(False, description="--trust-remote-code.")
    max_num_seqs: int | None = Field(None, gt=0, le=65_536, description="--max-num-seqs.")
    max_num_batched_tokens: Tokens | None = Field(None, description="--max-num-batched-tokens.")
    kv_cache_memory_bytes: ByteQuantity | None = Field(
        None,
        description="--kv-cache-memory-bytes: the KV cache's size, fixed (vLLM then ignores gpu_memory_utilization "
        "for it). From vLLM 0.34 on an Olares box it must be set: it turns off the extensible KV cache, whose CUDA "
        "virtual memory calls HAMi, Olares' GPU sharing, crashes on. `olarespack fit` says what the booking leaves "
        "the KV cache.",
    )
    enable_prefix_caching: bool | None = Field(None, description="--enable-prefix-caching / --no-...")
    enable_chunked_prefill: bool | None = Field(None, description="--enable-chunked-prefill / --no-...")
    async_scheduling: bool | None = Field(
        None,
        description="--async-scheduling / --no-...; null: vLLM's default (on, unless the drafting method "
        "cannot run with it). From vLLM 0.26 on, it makes sliding-window layers keep two batches in flight.",
    )
    speculative: Speculative | None = Field(None, description="--speculative-config.")
    limit_mm_per_prompt: (
        dict[Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,32}$")], Annotated[int, Field(ge=0, le=1_000)]] | None
    ) = Field(None, max_length=8, description="--limit-mm-per-prompt, e.g. {image: 1}.")
    tool_call_parser: Text | None = Field(
        None, description="--tool-call-parser; also turns on --enable-auto-tool-choice."
    )
    reasoning_parser: Text | None = Field(None, description="--reasoning-parser.")
    extra_args: list[ArgText] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Further vLLM arguments, passed as given."
    )
    env: dict[EnvName, ArgText] = Field(
        default_factory=dict,
        max_length=MAX_ITEMS,
        description="Extra environment of the engine (values are literal: $(VAR) is not expanded).",
    )
    calibration: VllmCalibration | None = Field(
        None,
        description="One boot's measured KV budget and what it was measured on (model, image, hardware); "
        "replaces the estimated non-KV memory in fit checks. Written by `olarespack calibrate SPEC --log FILE`.",
    )
    download_dir: ModelPath | None = Field(
        HF_HOME,
        description="--download-dir: where vLLM keeps the weights, under /models (the app's storage). "
        "Keep what an installed chart used, or an upgrade downloads the model again. null: not written (vLLM "
        "keeps them in HF_HOME's hub folder).",
    )

    @property
    def context_length(self) -> int:
        if self.max_model_len == "auto":
            raise ValueError("max_model_len: auto is resolved by the build before it is read")
        return self.max_model_len
