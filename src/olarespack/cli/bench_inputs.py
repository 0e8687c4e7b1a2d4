"""What `olarespack bench` reads before it measures, shared by its verbs (cli/bench.py, cli/bench_sweep.py,
cli/bench_grid.py): the spec named by file or app name, the prompt, the --plot target, the hardware, and the
progress printer."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from olarespack.core.errors import UsageError
from olarespack.spec.models import AppSpec

if TYPE_CHECKING:
    from olarespack.bench.run import Progress, Run, Settings

MAX_PROMPT = 64 << 10


def spec_file(given: str, apps_dir: Path) -> Path:
    """APP_OR_SPEC: a spec file, else the spec in the apps folder with that file stem or app name."""
    path = Path(given)
    if path.is_file():
        return path
    import yaml

    for candidate in sorted(apps_dir.glob("*.yaml")) if apps_dir.is_dir() else []:
        if candidate.stem == given:
            return candidate
        try:
            name = yaml.safe_load(candidate.read_text(encoding="utf-8")).get("name")
        except (yaml.YAMLError, AttributeError, OSError, UnicodeDecodeError):
            continue
        if name == given:
            return candidate
    raise UsageError(f"APP_OR_SPEC {given!r}: no such spec file, and no spec in {apps_dir}/ for that app")


def loaded(path: Path) -> AppSpec:
    """The spec with its context resolved as the build resolves it (the settings hash covers the context)."""
    from olarespack.project import load_resolved

    return load_resolved(path).spec


def read_given(path: Path, option: str, what: str, limit: int) -> bytes:
    """A file an option names, read once: regular files only (a named pipe is refused, not waited on), at most
    limit + 1 bytes, so the caller says what is too long."""
    from olarespack.core.errors import ModelDataError
    from olarespack.models.localfile import read_local_file

    try:
        return read_local_file(path, what, limit + 1)
    except ModelDataError as exc:
        raise UsageError(f"{option} {exc}") from None


def prompt_text(prompt_file: Path | None) -> tuple[str, str]:
    from olarespack.bench.run import PROMPT, shipped_prompt

    if prompt_file is None:
        return shipped_prompt(), PROMPT
    data = read_given(prompt_file, "--prompt-file", "a prompt text", MAX_PROMPT)
    if len(data) > MAX_PROMPT or not data.strip():
        raise UsageError(f"--prompt-file {prompt_file}: give a non-empty text of at most {MAX_PROMPT >> 10} KiB")
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UsageError(f"--prompt-file {prompt_file}: not UTF-8 text") from None
    return text, f"{prompt_file.name}@{hashlib.sha256(data).hexdigest()[:8]}"


def progress_printer(settings: Settings) -> Progress:
    def told(run: Run) -> None:
        label = f"warm-up {run.index}/{settings.warmups}" if run.warmup else f"run {run.index}/{settings.runs}"
        ttft = f", first token {run.ttft_ms:.0f} ms" if run.ttft_ms is not None else ""
        click.echo(f"{label}: {run.tps:.2f} t/s ({run.source}), {run.tokens} tokens{ttft}", err=True)

    return told


def plot_target(plot_file: Path, inputs: list[Path | None]) -> None:
    """--plot names a new PNG: never the spec it may record into nor any file bench reads (however spelled, or
    through a link), and a place a file can be written, checked before the first request."""
    from olarespack.cli.group import output_folder

    for given in inputs:
        if given is None:
            continue
        same = plot_file.exists() and given.exists() and plot_file.samefile(given)
        if same or plot_file.resolve() == given.resolve():
            raise UsageError(
                f"--plot {plot_file}: that is {given}, which bench reads (or records into); give "
                "another file for the picture, e.g. bench.png"
            )
    if plot_file.is_symlink() or (plot_file.exists() and not plot_file.is_file()):
        raise UsageError(f"--plot {plot_file}: exists and is not a regular file; give the path of a PNG to write")
    if plot_file.suffix.lower() != ".png":
        raise UsageError(f"--plot {plot_file}: the picture is a PNG; give a file name ending in .png, e.g. bench.png")
    if plot_file.exists() and not _png(plot_file):  # another spec, a note named .png: never overwritten
        raise UsageError(f"--plot {plot_file}: exists and is not a PNG; give a new file, or a PNG bench drew")
    output_folder(plot_file.parent, "--plot")


def _png(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(8) == b"\x89PNG\r\n\x1a\n"


def hardware_given(given: str | None, spec: AppSpec, record: bool) -> str | None:
    """The hardware the server runs on: told with --hardware (a data/hardware.yaml profile). Neither a vLLM nor a
    llama.cpp server says which GPU it runs on (llama.cpp's /props gives its build and model, not its device),
    so a record needs it said, and for the spec's own hardware (its figures are cited as that app's speed)."""
    from olarespack.core.hardware import profiles

    known = ", ".join(sorted(profiles()))
    if given is not None and given not in profiles():
        raise UsageError(f"--hardware {given!r}: not a hardware profile (one of {known}, from data/hardware.yaml)")
    if record and given is None:
        raise UsageError(
            f"--record needs --hardware NAME, the hardware the server runs on ({known}): a server does "
            f"not say it, and a figure is recorded for where it was measured (the spec targets "
            f"{spec.hardware})"
        )
    if record and given != spec.hardware:
        raise UsageError(
            f"--hardware {given}: the spec targets {spec.hardware}, and its record is cited as that "
            "app's speed; bench on that hardware, or leave out --record"
        )
    return given
