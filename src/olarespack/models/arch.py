"""Model architecture facts the fit arithmetic needs (pure, no network).

Two sources, one reader: the model files shipped under data/models/*.yaml and those of a project's models/
folder (written by `olarespack model add`, read first: models_for) share one format, and embed their
`config:` in Hugging Face config.json field names, so the same parser reads them, a user's local
config.json and a GGUF header translated by models.gguf_file. A model file may also say its `family`
(default: the config's model_type without `_text`) and, for a drafter, the targets it was made for
(`drafter_for`).

Reading a Hugging Face config.json is models/hf_config.py's; the model files' format and the registry are
models/registry.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

AttentionKind = Literal["full", "sliding"]
_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}
MAX_CONFIG_INT = 1 << 40
MAX_LAYERS = 4096  # llama.cpp stops at 512 (LLAMA_MAX_LAYERS); well past any real model


@dataclass(frozen=True)
class KvLayer:
    """One attention layer that owns a KV cache."""

    kind: AttentionKind
    kv_heads: int
    head_dim: int
    window: int | None = None  # tokens, sliding layers only


@dataclass(frozen=True)
class ModelArch:
    """The parts of a model's config that decide its KV cache and activation sizes."""

    layers: tuple[KvLayer, ...]  # layers owning KV, in model order (KV-sharing layers left out)
    num_hidden_layers: int
    max_position_embeddings: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    intermediate_size: int | None = None
    moe_intermediate_size: int | None = None
    experts_per_token: int | None = None
    num_experts: int | None = None  # routed experts per MoE layer (bench's bound on the bytes a token reads)
    vocab_size: int | None = None
    dtype_bytes: int = 2
    per_layer_input_size: int | None = None  # Gemma 3n / 4 E models: hidden_size_per_layer_input
    # a drafter that reads the target's hidden states at another width than its own: the target's width
    # (Gemma 4 assistants' backbone_hidden_size, speculators' target_hidden_size)
    target_hidden_size: int | None = None
    # layers past num_hidden_layers that predict the next tokens (GLM-4.5's, DeepSeek V3's MTP heads; Hugging Face
    # num_nextn_predict_layers): no KV in the trunk's cache; an engine that drafts with them gives them their own
    nextn_layers: int = 0

    def mtp_head(self) -> ModelArch:
        """The MTP layers as a drafter of their own: full attention with the trunk's full layers' KV geometry."""
        full = next((lay for lay in self.layers if lay.kind == "full"), self.layers[-1])
        return replace(
            self, layers=(KvLayer("full", full.kv_heads, full.head_dim),) * self.nextn_layers,
            num_hidden_layers=self.nextn_layers, nextn_layers=0,
        )  # fmt: skip

    def kv_bytes_per_token(self, dtype_bytes: float, kind: AttentionKind | None = None) -> float:
        """K + V bytes one token adds over the layers of one kind (all when None), ignoring windows."""
        return sum(
            2 * lay.kv_heads * lay.head_dim * dtype_bytes for lay in self.layers if kind is None or lay.kind == kind
        )


@dataclass(frozen=True)
class GgufFile:
    bytes: int
    exact: bool
    host_bytes: int = 0  # part llama.cpp keeps in host memory (input-layer embeddings)
    host_exact: bool = True
    gpu_copy_bytes: int = 0  # part of host_bytes also copied to the GPU (token_embd as the tied output)
    embedding_width: int | None = None  # a projector: the width of the embeddings it writes into the text model


@dataclass(frozen=True)
class ModelInfo:
    """A model olarespack knows: its architecture, how much it weighs and where the facts come from."""

    repo: str
    title: str
    arch: ModelArch | None  # None: a drafter that reads the target's KV cache and owns none
    kv: Literal["own", "shared"] = "own"
    weights_bytes: int = 0  # safetensors checkpoints (vLLM): bytes on the GPU
    weights_exact: bool = False
    files: Mapping[str, GgufFile] = field(default_factory=dict)  # GGUF repositories: per file
    sources: tuple[str, ...] = ()
    native_context: int | None = None  # the context the model was trained for, when below its positions
    family: str | None = None  # model family (config model_type without _text, e.g. gemma4, qwen3): parser rules
    drafter_for: tuple[str, ...] = ()  # a drafter: the target repositories it was made for
    model_type: str | None = None  # the config's own model_type (a drafter's decides how vLLM loads it)
    # the config.json fields the model file keeps (Hugging Face names): what an engine's own config code reads
    config: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def trained_context(self) -> int | None:
        """Past this, quality degrades even where the engine accepts the length."""
        if self.native_context is not None:
            return self.native_context
        return self.arch.max_position_embeddings if self.arch else None


# --------------------------------------------------------------------------- Hugging Face config


Layers = ModelArch | Sequence[KvLayer]


def layers_of(layers: Layers) -> tuple[KvLayer, ...]:
    found = tuple(layers.layers if isinstance(layers, ModelArch) else layers)
    if not found:
        raise ValueError("a model without KV layers has nothing to size")
    return found
