"""olarespack model: model facts from the user's own files, kept in the repository's models/ folder."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click

from olarespack.cli.group import output_folder
from olarespack.core.errors import UsageError

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group()
def model() -> None:
    """Model facts (architecture, sizes) that fit and the rules read: models/ first, then the shipped data."""


@model.command("add")
@click.argument("repo")
@click.option("--config", "config_file", type=_FILE, help="The model's config.json (a vLLM safetensors model).")
@click.option("--weights-bytes", type=click.IntRange(min=1), help="With --config: the weights' size in bytes.")
@click.option(
    "--safetensors-index",
    type=_FILE,
    help="With --config: model.safetensors.index.json, whose metadata.total_size is the exact size.",
)
@click.option(
    "--gguf",
    "gguf_files",
    multiple=True,
    type=_FILE,
    help="A GGUF file of the repository (llama.cpp); repeat for the projector (mmproj).",
)
@click.option(
    "--models-dir",
    type=click.Path(path_type=Path),
    default=Path("models"),
    show_default=True,
    help="The project's models folder (beside apps/).",
)
@click.option("--title", help="A title for the model (default: the repository's name).")
@click.option("--family", help="The model family (default: the config's model_type, or the GGUF architecture).")
@click.option(
    "--drafter-for", multiple=True, metavar="REPO", help="A drafter: a target repository it was made for (repeat)."
)
@click.option("--force", is_flag=True, help="Replace the file that already holds this repository.")
def add(
    repo: str,
    config_file: Path | None,
    weights_bytes: int | None,
    safetensors_index: Path | None,
    gguf_files: tuple[Path, ...],
    models_dir: Path,
    title: str | None,
    family: str | None,
    drafter_for: tuple[str, ...],
    force: bool,
) -> None:
    """Write models/<name>.yaml for REPO from its config.json and weight size (vLLM) or its GGUF files
    (llama.cpp), so `fit`, `build` and `lint` can check apps that use it.

    \b
    olarespack model add someone/model --config config.json --safetensors-index model.safetensors.index.json
    olarespack model add someone/model-GGUF --gguf model-Q4_K_M.gguf --gguf mmproj-BF16.gguf

    An existing file for REPO is only replaced with --force."""
    from olarespack.models import add as adding
    from olarespack.models.registry import HF_REPO_PATTERN

    for name, value in [("REPO", repo)] + [("--drafter-for", r) for r in drafter_for]:
        if not re.match(HF_REPO_PATTERN, value) or len(value) > 200:
            raise UsageError(f"{name}: {value!r} is not a Hugging Face repository (owner/name)")
    if (config_file is None) == (not gguf_files):
        raise UsageError("give --config config.json (a vLLM model) or --gguf FILE.gguf (llama.cpp files), one of them")
    if gguf_files and (weights_bytes is not None or safetensors_index is not None):
        raise UsageError("--weights-bytes and --safetensors-index go with --config; GGUF sizes are read from the files")
    if config_file is not None and (weights_bytes is None) == (safetensors_index is None):
        raise UsageError(
            "with --config, give the weights' size: --weights-bytes N or --safetensors-index "
            "model.safetensors.index.json (one of them)"
        )
    folder = output_folder(models_dir, "--models-dir")
    described = adding.Described(
        repo,
        _command(repo, config_file, weights_bytes, safetensors_index, gguf_files, title, family, drafter_for),
        title,
        family,
        drafter_for,
    )
    if config_file is not None:
        data = adding.safetensors_data(
            described, config_file, weights_bytes=weights_bytes, index_path=safetensors_index
        )
    else:
        data = adding.gguf_data(described, adding.gguf_headers(gguf_files))
    path, status = adding.write_model(folder, data, described, force)
    click.echo(f"{status} {path}: {repo}")


def _command(
    repo: str,
    config_file: Path | None,
    weights_bytes: int | None,
    index: Path | None,
    gguf_files: tuple[Path, ...],
    title: str | None,
    family: str | None,
    drafter_for: tuple[str, ...],
) -> str:
    """The command as the model file records it: file names without their local folders."""
    words = ["olarespack", "model", "add", repo]
    if config_file is not None:
        words += ["--config", config_file.name]
    if weights_bytes is not None:
        words += ["--weights-bytes", str(weights_bytes)]
    if index is not None:
        words += ["--safetensors-index", index.name]
    for path in gguf_files:
        words += ["--gguf", path.name]
    for option, value in (("--title", title), ("--family", family)):
        if value is not None:
            words += [option, value]
    for target in drafter_for:
        words += ["--drafter-for", target]
    return shlex.join(words)
