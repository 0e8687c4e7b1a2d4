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
@click.option(
    "--box",
    "box_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The box the apps run on: its `olares:` release picks the NVIDIA driver the image must start on "
    "(default: the driver of the oldest Olares the market installs on).",
)
@click.option("--all", "every", is_flag=True, help="Plan the move to every newer release, not only the newest.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as a JSON object.")
@click.option(
    "--refresh",
    is_flag=True,
    help="First read the engines' newest release tables from PyPI (the only "
    "step that reaches the network; `olarespack releases refresh` for each engine).",
)
@options.base
@options.charts_dir
@options.apps_dir
def outdated(
    specs: tuple[str, ...],
    box_file: Path | None,
    every: bool,
    as_json: bool,
    refresh: bool,
    base: str | None,
    charts_dir: Path,
    apps_dir: Path,
) -> None:
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


@click.command("propose")
@options.specs
@click.option("--remote", default="origin", show_default=True, help="The git remote the branches are pushed to.")
@click.option(
    "--proposals",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where each pull request's body is written (N.md) with proposals.tsv: branch, title, body file.",
)
@click.option(
    "--box",
    "box_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The box whose `olares:` release picks the driver (default: the oldest Olares the market installs on).",
)
@options.charts_dir
@options.apps_dir
def propose(
    specs: tuple[str, ...], remote: str, out_dir: Path, box_file: Path | None, charts_dir: Path, apps_dir: Path
) -> None:
    """Propose each upgrade `outdated` finds as a pull request: the app moved by `bump --image` on a branch of
    its own from HEAD (olarespack/upgrade-<app>-<release>), committed and pushed to REMOTE; the pull request's
    title and body (what the box gets, the rendered diff) written into the --proposals folder for the workflow
    to open, before the branch is pushed. An app lint refuses to move is listed with the reasons and gets no
    branch; a branch the remote has with the same move is proposed again (its pull request may not be open), one
    with other content is left alone. Each move is made in a worktree of its own: the checkout is never switched.
    Needs a clean working tree."""
    from olarespack.fit.starts import market_driver
    from olarespack.plan.box import read_box
    from olarespack.project import spec_files
    from olarespack.release.git import repo_root
    from olarespack.release.propose import Proposal
    from olarespack.release.propose import propose as proposing
    from olarespack.write import write_file

    output_folder(out_dir, "--proposals")
    driver = market_driver()
    if box_file is not None and (box := read_box(box_file)).driver is not None:
        driver = box.driver
    files = spec_files(specs, apps_dir)
    root = repo_root(Path.cwd())

    def body_file(proposal: Proposal) -> Path:
        return out_dir / f"{proposal.branch.replace('/', '-')}.md"

    def record(proposal: Proposal) -> None:  # before its branch is pushed
        write_file(body_file(proposal), proposal.body.encode("utf-8"))

    rows = []
    for proposal in proposing(helm_binary("helm"), root, remote, files, driver, charts_dir, dt.date.today(), record):
        if not proposal.proposed:
            click.echo(f"not proposed {proposal.app} {proposal.release}: {proposal.reason}")
            continue
        rows.append(f"{proposal.branch}\t{proposal.title}\t{body_file(proposal)}")
        click.echo(f"proposed {proposal.branch}: {proposal.title} (body {body_file(proposal)})")
    write_file(out_dir / "proposals.tsv", "".join(f"{row}\n" for row in rows).encode("utf-8"))
