"""`olarespack outdated`: the engine releases each app could move to, and what moving would change."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from olarespack.cli import options
from olarespack.cli.group import echo_verdict, helm_binary, output_folder
from olarespack.core.errors import OlaresPackError, UsageError


@click.command("outdated")
@options.specs
@click.option("--box", "box_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The box the apps run on: its `olares:` release picks the NVIDIA driver the image must start on "
                   "(default: the driver of the oldest Olares the market installs on).")
@click.option("--all", "every", is_flag=True, help="Plan the move to every newer release, not only the newest.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as a JSON object.")
@click.option("--refresh", is_flag=True, help="First read the engines' newest release tables from PyPI (the only "
              "step that reaches the network; `olarespack releases refresh` for each engine).")
@options.base
@options.charts_dir
@options.apps_dir
def outdated(specs: tuple[str, ...], box_file: Path | None, every: bool, as_json: bool, refresh: bool,
             base: str | None, charts_dir: Path, apps_dir: Path) -> None:
    """For each app (default: every apps/*.yaml), the engine releases newer than its image that the release
    tables know; for the newest (every one with --all), the image of it that starts on the box and what moving
    there would change, planned as `bump SPEC --image` plans it (nothing is written), or why it cannot move.

    Exits 0 when no app can move, 1 when one can (an upgrade is available), 2 on a usage error."""
    from olarespack.fit.starts import market_driver
    from olarespack.plan.box import read_box
    from olarespack.project import spec_files
    from olarespack.release.bump import Repo
    from olarespack.release.outdated import outdated as find

    output_folder(charts_dir, "--charts-dir")
    driver = market_driver()
    if box_file is not None:
        box = read_box(box_file)
        if box.driver is not None:
            driver = box.driver
    files = spec_files(specs, apps_dir)
    if not files:
        raise UsageError(f"no apps: {apps_dir}/ holds no spec")
    if refresh:
        _refresh()
    repo = Repo.at(Path.cwd(), base, charts_dir)
    echo_verdict(find(helm_binary("helm"), repo, files, driver, every, dt.date.today()), as_json)


def _refresh() -> None:
    from olarespack.engines import ENGINES
    from olarespack.engines.releases import RefreshRequest, refresh, tables

    failures = []
    for kind in sorted(ENGINES):
        written, failed = refresh(kind, RefreshRequest(()), lambda line: click.echo(line, err=True))
        failures += failed
        for path in written:
            click.echo(f"wrote {path}", err=True)
    tables.cache_clear()  # the tables read from here on are the ones just written
    if failures:
        raise OlaresPackError("\n".join(failures))
