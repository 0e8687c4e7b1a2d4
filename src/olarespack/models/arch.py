"""Model architecture facts the fit arithmetic needs (pure, no network).

Two sources, one reader: the model files shipped under data/models/*.yaml embed their `config:` in
Hugging Face config.json field names, so the same parser reads them and a user's local config.json.

Hugging Face config.json fields understood (everything else is ignored):
- nesting: a `text_config` mapping (multimodal models) wins over the top level, which still supplies
  what the text config leaves out (e.g. max_position_embeddings);
- `num_hidden_layers` (required), `num_attention_heads`, `num_key_value_heads` (default: attention
  heads), `head_dim` (default: hidden_size / num_attention_heads), `hidden_size`;
- full-attention geometry that differs from the sliding layers (Gemma 4): `global_head_dim`,
  `num_global_key_value_heads` (null = num_key_value_heads);
- which layers slide: `layer_types` (`full_attention` / `sliding_attention`; other kinds such as
  chunked or linear attention are refused), else `sliding_window_pattern` N (Gemma 3 style: layer i is
  full when (i + 1) % N == 0), else Qwen2's `use_sliding_window` + `max_window_layers`, else every
  layer slides when `sliding_window` is set (Mistral) and none does when it is not;
- `num_kv_shared_layers`: the last N layers reuse earlier layers' KV and own none (Gemma 3n / 4 E-models);
- `max_position_embeddings`, `vocab_size`, `intermediate_size` (an int or a per-layer list),
  `moe_intermediate_size`, `num_experts_per_tok` / `top_k_experts`, `torch_dtype` / `dtype`, for the
  activation and compute-buffer estimates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from olarespack.errors import ModelDataError

AttentionKind = Literal["full", "sliding"]
_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


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
    vocab_size: int | None = None
    dtype_bytes: int = 2

    def kv_bytes_per_token(self, dtype_bytes: float, kind: AttentionKind | None = None) -> float:
        """K + V bytes one token adds over the layers of one kind (all when None), ignoring windows."""
        return sum(2 * lay.kv_heads * lay.head_dim * dtype_bytes for lay in self.layers
                   if kind is None or lay.kind == kind)


@dataclass(frozen=True)
class GgufFile:
    bytes: int
    exact: bool
    host_bytes: int = 0  # part llama.cpp keeps in host memory (input-layer embeddings)
    host_exact: bool = True


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

    @property
    def trained_context(self) -> int | None:
        """Past this, quality degrades even where the engine accepts the length."""
        if self.native_context is not None:
            return self.native_context
        return self.arch.max_position_embeddings if self.arch else None


# --------------------------------------------------------------------------- Hugging Face config


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return int(max(value))  # per-layer lists (Gemma 3n intermediate_size): the widest layer bounds memory
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelDataError(f"config field {key}: expected an integer, got {value!r}")
    return value


def _layer_kinds(cfg: Mapping[str, Any], n: int, window: int | None) -> list[AttentionKind]:
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n:
            raise ModelDataError(f"config field layer_types: expected {n} entries (num_hidden_layers)")
        kinds: list[AttentionKind] = []
        for i, name in enumerate(types):
            if name == "full_attention":
                kinds.append("full")
            elif name == "sliding_attention":
                kinds.append("sliding")
            else:
                raise ModelDataError(f"config field layer_types[{i}]: {name!r} is not supported "
                                     "(only full_attention and sliding_attention)")
    elif (pattern := _int(cfg, "sliding_window_pattern")) is not None:
        if pattern < 1:
            raise ModelDataError("config field sliding_window_pattern: must be >= 1")
        kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(n)]
    elif "use_sliding_window" in cfg:
        first = _int(cfg, "max_window_layers", 0) or 0
        slide = bool(cfg["use_sliding_window"]) and window is not None
        kinds = ["sliding" if slide and i >= first else "full" for i in range(n)]
    else:
        kinds = ["sliding" if window is not None else "full"] * n
    if "sliding" in kinds and window is None:
        raise ModelDataError("config field sliding_window: sliding layers need a window size")
    return kinds


def arch_from_hf_config(config: Mapping[str, Any]) -> ModelArch:
    """A Hugging Face config.json (already parsed) -> ModelArch. See the module docstring for fields."""
    text = config.get("text_config")
    cfg: dict[str, Any] = {k: v for k, v in config.items() if k != "text_config"}
    if isinstance(text, Mapping):
        cfg.update(text)
    n = _int(cfg, "num_hidden_layers")
    if n is None or n < 1:
        raise ModelDataError("config field num_hidden_layers: required (a positive integer)")
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    kv_heads = _int(cfg, "num_key_value_heads", heads)
    head_dim = _int(cfg, "head_dim")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    if kv_heads is None or head_dim is None:
        raise ModelDataError("config fields num_key_value_heads / head_dim: needed (or hidden_size and "
                             "num_attention_heads to derive them)")
    full_kv_heads = _int(cfg, "num_global_key_value_heads", kv_heads) or kv_heads
    full_head_dim = _int(cfg, "global_head_dim", head_dim) or head_dim
    window = _int(cfg, "sliding_window")
    shared = _int(cfg, "num_kv_shared_layers", 0) or 0
    if not 0 <= shared < n:
        raise ModelDataError("config field num_kv_shared_layers: must be between 0 and num_hidden_layers - 1")
    layers = tuple(
        KvLayer("full", full_kv_heads, full_head_dim) if kind == "full"
        else KvLayer("sliding", kv_heads, head_dim, window)
        for kind in _layer_kinds(cfg, n, window)[: n - shared]
    )
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return ModelArch(
        layers=layers,
        num_hidden_layers=n,
        max_position_embeddings=_int(cfg, "max_position_embeddings"),
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=_int(cfg, "intermediate_size"),
        moe_intermediate_size=_int(cfg, "moe_intermediate_size"),
        experts_per_token=_int(cfg, "num_experts_per_tok", _int(cfg, "top_k_experts")),
        vocab_size=_int(cfg, "vocab_size"),
        dtype_bytes=_DTYPE_BYTES.get(str(dtype), 2),
    )


def load_hf_config(path: Path) -> ModelArch:
    """Read a local config.json (no network)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelDataError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ModelDataError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ModelDataError(f"{path}: a config.json must be a JSON object")
    try:
        return arch_from_hf_config(data)
    except ModelDataError as exc:
        raise ModelDataError(f"{path}: {exc}") from None


def model_from_hf_config(path: Path, *, repo: str, weights_bytes: int, kv: Literal["own", "shared"] = "own",
                         weights_exact: bool = False) -> ModelInfo:
    """A ModelInfo for a model olarespack does not ship, from its local config.json and weight size."""
    return ModelInfo(repo=repo, title=repo, arch=load_hf_config(path), kv=kv, weights_bytes=weights_bytes,
                     weights_exact=weights_exact, sources=(str(path),))


# --------------------------------------------------------------------------- shipped model files


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Weights(_Strict):
    bytes: int = Field(ge=0)
    exact: bool
    host_bytes: int = Field(0, ge=0)
    host_exact: bool = True


class _ModelFile(_Strict):
    repo: str
    title: str
    kv: Literal["own", "shared"] = "own"
    weights: _Weights | None = None
    files: dict[str, _Weights] = Field(default_factory=dict)
    config: dict[str, Any] | None = None
    native_context: int | None = Field(None, gt=0)
    sources: list[str] = Field(min_length=1)


def _model_info(name: str, text: str) -> ModelInfo:
    try:
        raw = _ModelFile.model_validate(yaml.safe_load(text))
        arch = arch_from_hf_config(raw.config) if raw.config is not None else None
    except (ValidationError, ModelDataError, yaml.YAMLError) as exc:
        raise ModelDataError(f"data/models/{name}: {exc}") from None
    if (arch is None) != (raw.kv == "shared"):
        raise ModelDataError(f"data/models/{name}: a config is required exactly when kv is own")
    files = {fname: GgufFile(w.bytes, w.exact, w.host_bytes, w.host_exact) for fname, w in raw.files.items()}
    return ModelInfo(repo=raw.repo, title=raw.title, arch=arch, kv=raw.kv,
                     weights_bytes=raw.weights.bytes if raw.weights else 0,
                     weights_exact=raw.weights.exact if raw.weights else False,
                     files=files, sources=tuple(raw.sources), native_context=raw.native_context)


@cache
def models() -> dict[str, ModelInfo]:
    """The models shipped with olarespack, keyed by Hugging Face repository."""
    folder = resources.files("olarespack").joinpath("data/models")
    found: dict[str, ModelInfo] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            info = _model_info(entry.name, entry.read_text(encoding="utf-8"))
            found[info.repo] = info
    return found


def find_model(repo: str, registry: Mapping[str, ModelInfo] | None = None) -> ModelInfo:
    known = models() if registry is None else registry
    if repo not in known:
        raise ModelDataError(
            f"no architecture data for {repo!r}; known: {', '.join(sorted(known)) or 'none'} "
            "(add src/olarespack/data/models/<name>.yaml, or build one with "
            "arch.model_from_hf_config from the model's config.json)")
    return known[repo]


def models_for(spec_file: str | Path | None) -> dict[str, ModelInfo]:
    """The models a spec can use: the project's models/ folder beside the spec's folder first, then the
    shipped data. (Only the shipped data until `olarespack model add` lands.)"""
    return dict(models())
