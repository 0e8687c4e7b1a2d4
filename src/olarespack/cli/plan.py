"""`olarespack plan`: several apps on one box, each in its GPU share."""

from __future__ import annotations

import os
from pathlib import Path

import click

from olarespack.cli.group import echo_verdict
from olarespack.core.errors import UsageError


@click.command()
@click.argument("spec_files", metavar="SPEC...", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--box",
    "box_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A box file (e.g. boxes/olares-one.yaml): hardware, what the box keeps, the apps; SPECs are added.",
)
@click.option("--hardware", help="The box's hardware profile (default: the box file's, else the one the specs target).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as a JSON object.")
@click.option(
    "--write", is_flag=True, help="Book each app's share in its spec (resources.gpu_memory), only when every app fits."
)
def plan(spec_files: tuple[Path, ...], box_file: Path | None, hardware: str | None, as_json: bool, write: bool) -> None:
    """Can these apps co-run on one GPU? Each gets the smallest share its context fits in (fit's arithmetic);
    the shares plus what the box keeps must fit the card's registered memory. With --write, each spec books its
    share (request = limit), so its chart carries the plan: then `olarespack build` and `bump`.

    Each app's image is also checked against the NVIDIA driver of the box's Olares (the box file's `olares`,
    else the oldest Olares the market installs on): an image built on a newer CUDA does not start.

    Exits 0 when every app fits and starts, 1 when one does not (with its shortfall and the largest context that
    fits; --write then writes nothing when one does not fit), 5 when a model has no data."""
    from olarespack.fit.starts import WithStarts
    from olarespack.plan.box import app_starts, check_writable, load_apps, read_box, write_shares
    from olarespack.plan.shares import plan as make_plan

    files, keep, driver = list(spec_files), None, None
    if box_file is not None:
        box = read_box(box_file)
        files, keep, driver = [*box.apps, *files], box.keep_mib, box.driver
        hardware = hardware or box.hardware
    if not files:
        raise UsageError("give app spec files or --box FILE")
    if write:
        check_writable(files, hardware)
    profile, apps = load_apps(files, hardware)
    result = make_plan(profile, apps, keep)
    if write and result.fits:
        # the comment names the plan the same way however its path was typed (./boxes/x.yaml, boxes/x.yaml)
        source = (
            f"--box {os.path.normpath(box_file)}"
            if box_file is not None
            else " ".join(os.path.normpath(f) for f in files)
        )
        for file, status in write_shares(result, f"olarespack plan {source}"):
            click.echo(f"{file}: {status}", err=True)
    elif write:
        click.echo("the plan does not fit: no spec written", err=True)
    echo_verdict(WithStarts(result, app_starts(files, driver)), as_json)
