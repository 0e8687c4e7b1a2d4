"""A project's models/ folder: model files in the shipped format, read as untrusted input.

The folder arrives in strangers' pull requests, so it is read like a spec: each file through the bounded
YAML loader of spec files (size, nesting, node count, no anchors), at most MAX_FILES files and MAX_TOTAL
bytes in all, no symbolic links; a file that breaks a rule is a ModelDataError naming it and the field.
"""

from __future__ import annotations

import os
import stat
from functools import lru_cache
from pathlib import Path

from olarespack.core.errors import ModelDataError, SpecError
from olarespack.core.yamlfile import MAX_FILE, decode, parse_yaml, read_spec_bytes
from olarespack.models.arch import ModelInfo
from olarespack.models.registry import model_from_data

MAX_FILES = 1000
MAX_TOTAL = 32 << 20
SUFFIXES = (".yaml", ".yml")

# (name, size, mtime in ns) of every model file: a change of any file gives a new key, so the cache never
# serves a stale folder (tests rewrite files within one process)
Listing = tuple[tuple[str, int, int], ...]


def _listing(folder: Path) -> Listing:
    found: list[tuple[str, int, int]] = []
    total = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            # hidden files are editors' and interrupted writes' leftovers (write_file's `.x.yaml.*.tmp`)
            if entry.name.startswith(".") or not entry.name.endswith(SUFFIXES):
                continue
            if len(found) >= MAX_FILES:
                raise ModelDataError(f"{folder}: more than {MAX_FILES} model files; split the project")
            if entry.is_symlink():
                raise ModelDataError(f"{folder / entry.name}: a symbolic link; model files must be regular files")
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                raise ModelDataError(f"{folder / entry.name}: not a regular file")
            if info.st_size > MAX_FILE:
                raise ModelDataError(
                    f"{folder / entry.name}: larger than {MAX_FILE >> 10} KiB; a model file is a few KiB"
                )
            total += info.st_size
            if total > MAX_TOTAL:
                raise ModelDataError(f"{folder}: more than {MAX_TOTAL >> 20} MiB of model files")
            found.append((entry.name, info.st_size, info.st_mtime_ns))
    return tuple(sorted(found))


def _problem_text(exc: SpecError) -> str:
    return "; ".join(f"{p.file}: {p.path + ': ' if p.path else ''}{p.message}" for p in exc.problems)


def read_model_file(path: Path) -> ModelInfo:
    """One model file, bounded like a spec file; errors name the file and the field."""
    shown = str(path)
    try:
        data = parse_yaml(shown, decode(shown, read_spec_bytes(path)))
    except SpecError as exc:
        raise ModelDataError(_problem_text(exc)) from None
    return model_from_data(shown, data)


@lru_cache(maxsize=32)
def _read(folder: Path, listing: Listing) -> tuple[dict[str, ModelInfo], dict[str, str]]:
    found: dict[str, ModelInfo] = {}
    where: dict[str, str] = {}
    for name, _, _ in listing:
        info = read_model_file(folder / name)
        if info.repo in found:
            raise ModelDataError(
                f"{folder / name}: repo: {info.repo} is also in {where[info.repo]}; keep one file per model"
            )
        found[info.repo] = info
        where[info.repo] = name
    return found, where


def _folder(folder: Path) -> tuple[dict[str, ModelInfo], dict[str, str]]:
    if folder.is_symlink():
        raise ModelDataError(f"{folder}: a symbolic link; the models/ folder must be a real folder")
    if not folder.exists():
        return {}, {}
    if not folder.is_dir():
        raise ModelDataError(f"{folder}: not a folder (models/ holds one YAML file per model)")
    try:
        listing = _listing(folder)
    except OSError as exc:
        raise ModelDataError(f"{folder}: cannot read: {exc.strerror}") from None
    return _read(folder, listing)


def project_models(folder: Path) -> dict[str, ModelInfo]:
    """The models in a project's models/ folder, keyed by repository; none when the folder does not exist."""
    return dict(_folder(folder)[0])


def model_files(folder: Path) -> dict[str, Path]:
    """Repository -> the file in `folder` that holds it (the file `model add --force` replaces)."""
    return {repo: folder / name for repo, name in _folder(folder)[1].items()}
