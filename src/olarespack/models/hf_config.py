"""A Hugging Face config.json read into a ModelArch (models/arch.py).

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
  activation and compute-buffer estimates; `num_experts` / `num_local_experts` / `n_routed_experts`, for the
  share of an MoE's weights one token reads (bench's bound); a drafter's `backbone_hidden_size` /
  `target_hidden_size`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from olarespack.core.errors import ModelDataError
from olarespack.models.arch import (
    _DTYPE_BYTES,
    MAX_CONFIG_INT,
    MAX_LAYERS,
    AttentionKind,
    KvLayer,
    ModelArch,
    ModelInfo,
)
from olarespack.models.localfile import read_json_file


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None, *, positive: bool = False) -> int | None:
    """The field's integer (the largest of a per-layer list), `default` when absent. `positive`: a count or
    a size the arithmetic divides by or multiplies a cache by, where 0 is a broken config, not a value."""
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        value = max(value)  # per-layer lists (Gemma 3n intermediate_size): the widest layer bounds memory
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelDataError(f"config field {key}: expected an integer, got {str(value)[:60]!r}")
    if not 0 <= value <= MAX_CONFIG_INT:
        # model files come from strangers' pull requests: a huge count must not become a huge list or a float
        # overflow in the arithmetic
        raise ModelDataError(f"config field {key}: {value} is out of range (0 to {MAX_CONFIG_INT})")
    if positive and value == 0:
        raise ModelDataError(
            f"config field {key}: 0, and a model has at least 1; copy the value from the "
            "model's own config.json, or leave the field out where it has a default"
        )
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
                raise ModelDataError(
                    f"config field layer_types[{i}]: {name!r} is not supported "
                    "(only full_attention and sliding_attention)"
                )
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
    if n is None or not 1 <= n <= MAX_LAYERS:
        raise ModelDataError(f"config field num_hidden_layers: required (a positive integer up to {MAX_LAYERS})")
    hidden = _int(cfg, "hidden_size", positive=True)
    heads = _int(cfg, "num_attention_heads", positive=True)
    kv_heads = _int(cfg, "num_key_value_heads", heads, positive=True)
    head_dim = _int(cfg, "head_dim", positive=True)
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
        if head_dim == 0:
            raise ModelDataError(
                f"config fields hidden_size / num_attention_heads: {hidden} / {heads} gives a "
                "head size of 0; give head_dim, or correct the two counts"
            )
    if kv_heads is None or head_dim is None:
        raise ModelDataError(
            "config fields num_key_value_heads / head_dim: needed (or hidden_size and "
            "num_attention_heads to derive them)"
        )
    full_kv_heads = _int(cfg, "num_global_key_value_heads", kv_heads) or kv_heads
    full_head_dim = _int(cfg, "global_head_dim", head_dim) or head_dim
    window = _int(cfg, "sliding_window") or None  # 0: no window
    shared = _int(cfg, "num_kv_shared_layers", 0) or 0
    if not 0 <= shared < n:
        raise ModelDataError("config field num_kv_shared_layers: must be between 0 and num_hidden_layers - 1")
    layers = tuple(
        KvLayer("full", full_kv_heads, full_head_dim)
        if kind == "full"
        else KvLayer("sliding", kv_heads, head_dim, window)
        for kind in _layer_kinds(cfg, n, window)[: n - shared]
    )
    nextn = _int(cfg, "num_nextn_predict_layers", 0) or 0
    if not 0 <= nextn <= MAX_LAYERS:
        raise ModelDataError(f"config field num_nextn_predict_layers: must be between 0 and {MAX_LAYERS}")
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return ModelArch(
        layers=layers,
        num_hidden_layers=n,
        max_position_embeddings=_int(cfg, "max_position_embeddings", positive=True),
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=_int(cfg, "intermediate_size", positive=True),
        moe_intermediate_size=_int(cfg, "moe_intermediate_size"),
        experts_per_token=_int(cfg, "num_experts_per_tok", _int(cfg, "top_k_experts")),
        num_experts=_int(cfg, "num_experts", _int(cfg, "num_local_experts", _int(cfg, "n_routed_experts"))),
        vocab_size=_int(cfg, "vocab_size", positive=True),
        dtype_bytes=_DTYPE_BYTES.get(str(dtype), 2),
        per_layer_input_size=_int(cfg, "hidden_size_per_layer_input", positive=True),
        target_hidden_size=_int(
            cfg, "backbone_hidden_size", _int(cfg, "target_hidden_size", positive=True), positive=True
        ),
        nextn_layers=nextn,
    )


def family_of(config: Mapping[str, Any]) -> str | None:
    """The model family a config names: text_config.model_type over the top level, `_text` dropped
    (gemma4_text -> gemma4), so a multimodal checkpoint and its text-only copy share one."""
    text = config.get("text_config")
    kind = text.get("model_type") if isinstance(text, Mapping) else None
    if not isinstance(kind, str) or not kind:
        kind = config.get("model_type")
    if not isinstance(kind, str):
        return None
    return kind.lower().removesuffix("_text") or None


def model_type_of(config: Mapping[str, Any]) -> str | None:
    kind = config.get("model_type")
    return kind if isinstance(kind, str) and kind else None


def load_hf_config(path: Path) -> ModelArch:
    """Read a local config.json (no network)."""
    data = read_json_file(path)
    try:
        return arch_from_hf_config(data)
    except ModelDataError as exc:
        raise ModelDataError(f"{path}: {exc}") from None


def model_from_hf_config(
    path: Path, *, repo: str, weights_bytes: int, kv: Literal["own", "shared"] = "own", weights_exact: bool = False
) -> ModelInfo:
    """A ModelInfo for a model olarespack does not ship, from its local config.json and weight size."""
    return ModelInfo(
        repo=repo,
        title=repo,
        arch=load_hf_config(path),
        kv=kv,
        weights_bytes=weights_bytes,
        weights_exact=weights_exact,
        sources=(str(path),),
        family=family_of(read_json_file(path)),
        model_type=model_type_of(read_json_file(path)),
    )


# --------------------------------------------------------------------------- model files (shipped and project)
