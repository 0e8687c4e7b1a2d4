"""Model architecture facts the fit arithmetic needs (pure, no network).

Two sources, one reader: the model files shipped under data/models/*.yaml and those of a project's models/
folder (written by `olarespack model add`, read first: models_for) share one format, and embed their
`config:` in Hugging Face config.json field names, so the same parser reads them, a user's local
config.json and a GGUF header translated by models.gguf_file. A model file may also say its `family`
(default: the config's model_type without `_text`) and, for a drafter, the targets it was made for
(`drafter_for`).

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

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from olarespack.core.errors import ModelDataError, UnknownModelError
from olarespack.models.localfile import read_json_file

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

    @property
    def trained_context(self) -> int | None:
        """Past this, quality degrades even where the engine accepts the length."""
        if self.native_context is not None:
            return self.native_context
        return self.arch.max_position_embeddings if self.arch else None


# --------------------------------------------------------------------------- Hugging Face config


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
        raise ModelDataError(f"config field {key}: 0, and a model has at least 1; copy the value from the "
                             "model's own config.json, or leave the field out where it has a default")
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
    if n is None or not 1 <= n <= MAX_LAYERS:
        raise ModelDataError(f"config field num_hidden_layers: required (a positive integer up to {MAX_LAYERS})")
    hidden = _int(cfg, "hidden_size", positive=True)
    heads = _int(cfg, "num_attention_heads", positive=True)
    kv_heads = _int(cfg, "num_key_value_heads", heads, positive=True)
    head_dim = _int(cfg, "head_dim", positive=True)
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
        if head_dim == 0:
            raise ModelDataError(f"config fields hidden_size / num_attention_heads: {hidden} / {heads} gives a "
                                 "head size of 0; give head_dim, or correct the two counts")
    if kv_heads is None or head_dim is None:
        raise ModelDataError("config fields num_key_value_heads / head_dim: needed (or hidden_size and "
                             "num_attention_heads to derive them)")
    full_kv_heads = _int(cfg, "num_global_key_value_heads", kv_heads) or kv_heads
    full_head_dim = _int(cfg, "global_head_dim", head_dim) or head_dim
    window = _int(cfg, "sliding_window") or None  # 0: no window
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
        target_hidden_size=_int(cfg, "backbone_hidden_size", _int(cfg, "target_hidden_size", positive=True),
                                positive=True),
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


def model_from_hf_config(path: Path, *, repo: str, weights_bytes: int, kv: Literal["own", "shared"] = "own",
                         weights_exact: bool = False) -> ModelInfo:
    """A ModelInfo for a model olarespack does not ship, from its local config.json and weight size."""
    return ModelInfo(repo=repo, title=repo, arch=load_hf_config(path), kv=kv, weights_bytes=weights_bytes,
                     weights_exact=weights_exact, sources=(str(path),), family=family_of(read_json_file(path)),
                     model_type=model_type_of(read_json_file(path)))


# --------------------------------------------------------------------------- model files (shipped and project)


HF_REPO_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
Repo = Annotated[str, StringConstraints(max_length=200, pattern=HF_REPO_PATTERN)]
Bytes = Annotated[int, Field(ge=0, le=MAX_CONFIG_INT * 1024)]
FileName = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")]
Text = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Weights(_Strict):
    bytes: Bytes
    exact: bool
    host_bytes: Bytes = 0
    host_exact: bool = True
    gpu_copy_bytes: Bytes = 0
    embedding_width: int | None = Field(None, gt=0, le=1 << 24)  # a projector's output width (models.projector)


class _ModelFile(_Strict):
    """One models/*.yaml file: the shipped data and a project's models/ folder share this format."""

    repo: Repo
    title: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
    family: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")] | None = None
    drafter_for: list[Repo] = Field(default_factory=list, max_length=100)
    kv: Literal["own", "shared"] = "own"
    weights: _Weights | None = None
    files: dict[FileName, _Weights] = Field(default_factory=dict, max_length=100)
    config: dict[str, Any] | None = None
    native_context: int | None = Field(None, gt=0, le=MAX_CONFIG_INT)
    sources: list[Text] = Field(min_length=1, max_length=100)


def _field_errors(exc: ValidationError) -> str:
    """Pydantic's errors as `field.path: what is wrong`, one clause each (no URLs, no input echoes)."""
    parts = []
    for error in exc.errors()[:10]:
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        what = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{where}: {what}")
    return "; ".join(parts)


def model_from_data(shown: str, data: Any) -> ModelInfo:
    """A parsed model file -> ModelInfo; every error names `shown` (the file) and the field."""
    if not isinstance(data, dict):
        raise ModelDataError(f"{shown}: a model file is a YAML mapping (repo, title, sources, ...)")
    try:
        raw = _ModelFile.model_validate(data)
    except ValidationError as exc:
        raise ModelDataError(f"{shown}: {_field_errors(exc)}") from None
    try:
        arch = arch_from_hf_config(raw.config) if raw.config is not None else None
    except ModelDataError as exc:
        raise ModelDataError(f"{shown}: config: {exc}") from None
    if (arch is None) != (raw.kv == "shared"):
        raise ModelDataError(f"{shown}: config: a config is required exactly when kv is own")
    files = {fname: GgufFile(w.bytes, w.exact, w.host_bytes, w.host_exact, w.gpu_copy_bytes, w.embedding_width)
             for fname, w in raw.files.items()}
    return ModelInfo(repo=raw.repo, title=raw.title, arch=arch, kv=raw.kv,
                     weights_bytes=raw.weights.bytes if raw.weights else 0,
                     weights_exact=raw.weights.exact if raw.weights else False,
                     files=files, sources=tuple(raw.sources), native_context=raw.native_context,
                     family=raw.family or (family_of(raw.config) if raw.config else None),
                     drafter_for=tuple(raw.drafter_for), model_type=model_type_of(raw.config or {}))


def _model_info(name: str, text: str) -> ModelInfo:
    try:
        data = yaml.safe_load(text)  # olarespack's own files; a project's go through models.folder's guard
    except yaml.YAMLError as exc:
        raise ModelDataError(f"data/models/{name}: invalid YAML: {exc}") from None
    return model_from_data(f"data/models/{name}", data)


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


def add_command(repo: str, gguf_files: Sequence[str] | None = None) -> str:
    """The exact `olarespack model add` command for a model with no data: GGUF files for llama.cpp (named
    when known), else the config.json and weight size of a safetensors checkpoint (vLLM)."""
    if gguf_files:
        tail = " ".join(f"--gguf {shlex.quote(name)}" for name in gguf_files)
    elif "gguf" in repo.lower():
        tail = "--gguf <file>.gguf"
    else:
        tail = "--config config.json --weights-bytes N"
    return f"olarespack model add {shlex.quote(repo)} {tail}"


def find_model(repo: str, registry: Mapping[str, ModelInfo] | None = None, *,
               gguf_files: Sequence[str] | None = None) -> ModelInfo:
    """The model `repo` from `registry` (default: the shipped data). Missing: UnknownModelError with the
    command that adds it (`gguf_files`: the app's GGUF files, for a llama.cpp app)."""
    known = models() if registry is None else registry
    if repo not in known:
        names = sorted(known)
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        command = add_command(repo, gguf_files)
        raise UnknownModelError(
            f"no architecture data for {repo!r}; known: {shown or 'none'}. Add it from the model's own files: "
            f"`{command}` (run in the project root: it writes models/<name>.yaml beside apps/)",
            repo=repo, command=command)
    return known[repo]


def models_for(spec_file: str | Path | None) -> dict[str, ModelInfo]:
    """The models a spec can use: the project's models/ folder (`<spec's folder>/../models`, so
    apps/x.yaml reads models/) over the shipped data; a project file replaces a shipped one of the same repo."""
    shipped = models()
    if spec_file is None:
        return dict(shipped)
    from olarespack.models.folder import project_models  # reads this module's format

    return {**shipped, **project_models(Path(spec_file).absolute().parent.parent / "models")}


Layers = ModelArch | Sequence[KvLayer]


def layers_of(layers: Layers) -> tuple[KvLayer, ...]:
    found = tuple(layers.layers if isinstance(layers, ModelArch) else layers)
    if not found:
        raise ValueError("a model without KV layers has nothing to size")
    return found
