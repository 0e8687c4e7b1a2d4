"""`olarespack bench grid`: a live server measured over concurrency levels and context depths (bench/grid.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from olarespack.cli import options
from olarespack.cli.bench_inputs import loaded, spec_file
from olarespack.cli.bench_options import Request, examples, masking, request_options, server_options

if TYPE_CHECKING:
    from olarespack.core.shown import Shown


@click.command(epilog=examples("grid"))
@click.argument("app", metavar="APP_OR_SPEC")
@click.option("--url", required=True, help="The server's address, e.g. http://127.0.0.1:8000 (a /v1 suffix is fine).")
@server_options
@click.option(
    "--concurrency",
    "concurrency_given",
    metavar="N1,N2,...",
    default="1",
    show_default=True,
    help="Requests sent at once per level (e.g. 1,2,4).",
)
@click.option(
    "--depth",
    "depth_given",
    metavar="T1,T2,...",
    default="0",
    show_default=True,
    help="Context depths: tokens of filler text before the prompt (e.g. 0,8192,32768).",
)
@request_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON object.")
@options.apps_dir
def grid(
    app: str,
    url: str,
    api_key: str | None,
    model: str | None,
    concurrency_given: str,
    depth_given: str,
    request: Request,
    as_json: bool,
    apps_dir: Path,
) -> None:
    """Measure a live server over a grid: for each context depth and concurrency level (--runs rounds), the
    time to first token, each request's decode rate and the total rate. Exits 1 when the grid stopped early,
    after printing the cells before it."""
    from olarespack.core.shown import Shown

    shown = Shown(api_key)
    with masking(shown):
        _grid(shown, app, apps_dir, url, api_key, model, request, as_json, concurrency_given, depth_given)


def _grid(
    shown: Shown,
    app: str,
    apps_dir: Path,
    url: str,
    api_key: str | None,
    model: str | None,
    request: Request,
    as_json: bool,
    concurrency_given: str,
    depth_given: str,
) -> None:
    from olarespack.bench.grid import MAX_CONCURRENCY, MAX_DEPTH, grid_table, parse_levels, run_grid
    from olarespack.bench.live import pick_model
    from olarespack.engines import engine_for
    from olarespack.engines.client import Server, base_url

    concurrencies = parse_levels(concurrency_given, "--concurrency", 1, MAX_CONCURRENCY)
    depths = parse_levels(depth_given, "--depth", 0, MAX_DEPTH)
    base_url(url)
    spec = loaded(spec_file(app, apps_dir))
    engine_bench = engine_for(spec.engine).engine.bench()
    limits = request.limits()
    served = model or engine_bench.served_name(spec.engine)
    with Server(url, api_key, limits) as server:
        chosen, notes = pick_model(server.models(), model, served, server.shown)
        where = server.shown
    settings = request.settings(chosen)
    cells, stopped = run_grid(
        url,
        api_key,
        limits,
        settings,
        engine_bench,
        concurrencies,
        depths,
        say=lambda line: click.echo(shown.text(line), err=True),
    )
    if as_json:
        import json

        click.echo(
            json.dumps(
                shown.data(
                    {
                        "app": spec.name,
                        "version": spec.version,
                        "url": where,
                        "gpu_mode": request.gpu_mode,
                        "notes": notes,
                        "stopped": stopped,
                        "cells": [cell.summary() for cell in cells],
                    }
                ),
                indent=2,
                sort_keys=True,
            )
        )
    else:
        for line in [*grid_table(where, settings, cells), *(f"note: {note}" for note in notes)]:
            click.echo(shown.text(line))
    if stopped is not None:
        from olarespack.engines.client import BenchError

        raise BenchError(f"{where}: the grid stopped at {stopped} (the cells before it are above)")
