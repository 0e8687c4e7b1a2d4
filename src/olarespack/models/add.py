"""`olarespack model add`: a model file for the project's models/ folder, from the user's own files.

The file has the shipped data's format (arch._ModelFile), so one reader serves both. Its `config:` keeps
only the config.json fields the fit arithmetic reads, and its `sources:` say where every fact came from:
each input file's name and sha256 (for a GGUF file, of its header) and the command that wrote it. The text
is read back with the same reader before it replaces anything, and written in one rename.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from olarespack.core.errors import ModelDataError, SpecError, UsageError
from olarespack.core.yamlfile import parse_yaml
from olarespack.models.arch import MAX_CONFIG_INT, ModelInfo
from olarespack.models.folder import model_files
from olarespack.models.gguf_file import GgufHeader, read_gguf
from olarespack.models.hf_config import arch_from_hf_config, family_of
from olarespack.models.localfile import parse_json, read_local_file
from olarespack.models.projector import width_mismatch
from olarespack.models.registry import model_from_data
from olarespack.write import Status, write_file

# The config.json fields arch.arch_from_hf_config reads (see its module docstring), and model_type for the
# family: everything else in a real config (vision towers, quantization tables) is left out of models/.
CONFIG_FIELDS = (
    "model_type",
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_global_key_value_heads",
    "global_head_dim",
    "sliding_window",
    "layer_types",
    "sliding_window_pattern",
    "use_sliding_window",
    "max_window_layers",
    "num_kv_shared_layers",
    "num_nextn_predict_layers",
    "max_position_embeddings",
    "vocab_size",
    "intermediate_size",
    "moe_intermediate_size",
    "num_experts_per_tok",
    "top_k_experts",
    "torch_dtype",
    "dtype",
    "hidden_size_per_layer_input",
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "backbone_hidden_size",
    "target_hidden_size",
)


@dataclass(frozen=True)
class Described:
    """What the user says about the model beyond its files."""

    repo: str
    command: str  # the command line, with file names only (no local paths in a shared repository)
    title: str | None = None
    family: str | None = None
    drafter_for: tuple[str, ...] = ()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kept_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The fields olarespack reads, at the top level and in text_config."""
    kept = {k: config[k] for k in CONFIG_FIELDS if k in config}
    text = config.get("text_config")
    if isinstance(text, Mapping):
        kept["text_config"] = {k: text[k] for k in CONFIG_FIELDS if k in text}
    return kept


def _common(described: Described, family: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"repo": described.repo, "title": described.title or described.repo.split("/", 1)[1]}
    if described.family or family:
        data["family"] = described.family or family
    if described.drafter_for:
        data["drafter_for"] = list(described.drafter_for)
    data["kv"] = "own"
    return data


def safetensors_data(
    described: Described, config_path: Path, *, weights_bytes: int | None = None, index_path: Path | None = None
) -> dict[str, Any]:
    """A model file's data for a safetensors checkpoint (vLLM): its config.json and its weight size, given
    or read exactly from model.safetensors.index.json (metadata.total_size)."""
    # each file is read once, bounded, and its digest taken from the bytes that were parsed
    config_bytes = read_local_file(config_path)
    config = parse_json(config_path, config_bytes)
    kept = kept_config(config)
    try:
        same = arch_from_hf_config(kept) == arch_from_hf_config(config)
    except ModelDataError as exc:
        raise ModelDataError(f"{config_path}: {exc}") from None
    if not same:  # the filter must never change a fact; a bug if it does
        raise ModelDataError(f"{config_path}: its kept fields read differently from the whole file")
    digest = _sha256(config_bytes)
    sources = [f"config: {config_path.name} sha256:{digest}, the fields olarespack reads"]
    if index_path is not None:
        index_bytes = read_local_file(index_path, "a model.safetensors.index.json")
        index = parse_json(index_path, index_bytes, "a model.safetensors.index.json")
        total = index.get("metadata", {}).get("total_size") if isinstance(index.get("metadata"), dict) else None
        if isinstance(total, bool) or not isinstance(total, int) or not 0 < total <= MAX_CONFIG_INT * 1024:
            raise ModelDataError(f"{index_path}: metadata.total_size: missing or not a positive integer")
        weights = {"bytes": total, "exact": True}
        sources.append(f"weights: metadata.total_size of {index_path.name} sha256:{_sha256(index_bytes)}, exact")
    elif weights_bytes is not None:
        weights = {"bytes": weights_bytes, "exact": False}
        sources.append(f"weights: {weights_bytes} bytes as given on the command line, not checked")
    else:
        raise UsageError(
            "give the weights' size: --weights-bytes N or --safetensors-index model.safetensors.index.json"
        )
    sources.append(f"written by: {described.command}")
    return {**_common(described, family_of(config)), "weights": weights, "config": kept, "sources": sources}


def gguf_data(described: Described, headers: Sequence[GgufHeader]) -> dict[str, Any]:
    """A model file's data for GGUF files of one repository (llama.cpp): every file's exact size, and the
    architecture from the first file that is not a projector."""
    models = [h for h in headers if not h.projector]
    if not models:
        raise UsageError(
            "every --gguf file is a projector (general.architecture clip): give the model's own GGUF file too"
        )
    names = [h.name for h in headers]
    if len(set(names)) != len(names):
        raise UsageError(f"two --gguf files share a name: {', '.join(names)}")
    for header in models:  # refused here, naming the GGUF file, rather than in the models/ file it would make
        try:
            arch_from_hf_config(header.config or {})
        except ModelDataError as exc:
            raise ModelDataError(f"{header.name}: {exc}") from None
    _projectors_fit(models, [h for h in headers if h.projector])
    main = models[0]
    files: dict[str, Any] = {}
    sources = []
    for header in headers:
        entry: dict[str, Any] = {"bytes": header.bytes, "exact": True}
        if header.host_bytes:
            entry.update(host_bytes=header.host_bytes, host_exact=True)
        if header.gpu_copy_bytes:
            entry["gpu_copy_bytes"] = header.gpu_copy_bytes
        if header.embedding_width:
            entry["embedding_width"] = header.embedding_width
        files[header.name] = entry
        kind = f"architecture {header.architecture}"
        if header.projector:
            kind = "projector" + "".join(f"; {note}" for note in header.notes if note.startswith("projector "))
        sources.append(f"file {header.name}: {header.bytes} bytes, header sha256:{header.sha256} ({kind})")
    sources.append(f"architecture: from the metadata of {main.name} (llama.cpp keys, in config.json names)")
    sources += [f"note: {note}" for note in main.notes]
    if main.host_bytes:
        sources.append(
            "host part: token_embd and any per_layer_token_embd, which llama.cpp keeps in host "
            "memory, exact" + ("; token_embd also on the GPU as the tied output" if main.gpu_copy_bytes else "")
        )
    sources.append(f"written by: {described.command}")
    return {**_common(described, main.architecture), "files": files, "config": main.config, "sources": sources}


def _projectors_fit(models: Sequence[GgufHeader], projectors: Sequence[GgufHeader]) -> None:
    """Every projector writes embeddings as wide as every model file takes (what llama-server checks at boot)."""
    for projector in projectors:
        for header in models:
            width = (header.config or {}).get("hidden_size")
            if projector.embedding_width and isinstance(width, int):
                problem = width_mismatch(header.name, width, projector.name, projector.embedding_width)
                if problem:
                    raise ModelDataError(
                        f"{problem}; give the projector made for this model (the mmproj file of "
                        "the model's own repository)"
                    )


class _Dumper(yaml.SafeDumper):
    """Long lists of short scalars (layer_types) on a few lines instead of one line per layer."""


def _sequence(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = len(data) > 4 and all(isinstance(x, (str, int)) and len(str(x)) < 40 for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _sequence)


def render(data: Mapping[str, Any], described: Described) -> str:
    head = (
        f"# {described.repo}: model facts for olarespack fit, from the model's own files, written by\n"
        f"#   {described.command}\n"
        "# Edit with care, or run the command again with --force.\n"
    )
    return head + yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)


def parse_text(shown: str, text: str) -> ModelInfo:
    """Model-file text -> ModelInfo, through the bounded loader a project's models/ folder is read with."""
    try:
        return model_from_data(shown, parse_yaml(shown, text))
    except SpecError as exc:
        raise ModelDataError("; ".join(str(p) for p in exc.problems)) from None


def slug(repo: str) -> str:
    """The file name of a repository's model file: its name, lowercased (as the shipped files are named)."""
    return re.sub(r"[^a-z0-9._-]+", "-", repo.split("/", 1)[1].lower()).strip(".-") or "model"


def target_file(folder: Path, repo: str, force: bool) -> Path:
    """Where `repo` goes: the file that already holds it (only with force), else <name>.yaml, else
    <owner>--<name>.yaml when another repository's file has that name."""
    existing = model_files(folder).get(repo)
    if existing is not None:
        if not force:
            raise UsageError(f"{existing} already holds {repo}; add --force to replace it")
        return existing
    for name in (slug(repo), re.sub(r"[^a-z0-9._-]+", "-", repo.lower().replace("/", "--"))):
        candidate = folder / f"{name}.yaml"
        if not candidate.exists():
            return candidate
    raise UsageError(
        f"{folder}: {slug(repo)}.yaml and its owner--name form are taken by other files; rename one of them"
    )


def write_model(folder: Path, data: Mapping[str, Any], described: Described, force: bool) -> tuple[Path, Status]:
    """Validate the model file's text with the project's reader, then write it in one rename."""
    path = target_file(folder, described.repo, force)
    text = render(data, described)
    parse_text(str(path), text)
    return path, write_file(path, text.encode("utf-8"))


def gguf_headers(paths: Sequence[Path]) -> list[GgufHeader]:
    return [read_gguf(path) for path in paths]
