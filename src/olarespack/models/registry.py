"""The model files olarespack reads (models/arch.py's facts): those shipped under data/models/*.yaml and those of a
project's models/ folder (written by `olarespack model add`, read first: models_for), in one format that embeds the
model's `config:` in Hugging Face config.json field names (read by models/hf_config.py)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from olarespack.core.errors import ModelDataError, UnknownModelError
from olarespack.models.arch import MAX_CONFIG_INT, GgufFile, ModelInfo
from olarespack.models.hf_config import arch_from_hf_config, family_of, model_type_of

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
    files = {
        fname: GgufFile(w.bytes, w.exact, w.host_bytes, w.host_exact, w.gpu_copy_bytes, w.embedding_width)
        for fname, w in raw.files.items()
    }
    return ModelInfo(
        repo=raw.repo,
        title=raw.title,
        arch=arch,
        kv=raw.kv,
        weights_bytes=raw.weights.bytes if raw.weights else 0,
        weights_exact=raw.weights.exact if raw.weights else False,
        files=files,
        sources=tuple(raw.sources),
        native_context=raw.native_context,
        family=raw.family or (family_of(raw.config) if raw.config else None),
        drafter_for=tuple(raw.drafter_for),
        model_type=model_type_of(raw.config or {}),
        config=raw.config,
    )


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


def find_model(
    repo: str, registry: Mapping[str, ModelInfo] | None = None, *, gguf_files: Sequence[str] | None = None
) -> ModelInfo:
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
            repo=repo,
            command=command,
        )
    return known[repo]


def models_for(spec_file: str | Path | None) -> dict[str, ModelInfo]:
    """The models a spec can use: the project's models/ folder (`<spec's folder>/../models`, so
    apps/x.yaml reads models/) over the shipped data; a project file replaces a shipped one of the same repo."""
    shipped = models()
    if spec_file is None:
        return dict(shipped)
    from olarespack.models.folder import project_models  # reads this module's format

    return {**shipped, **project_models(Path(spec_file).absolute().parent.parent / "models")}
