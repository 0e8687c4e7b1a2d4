"""`olarespack bump` and `olarespack diff`."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import cast

import click

from olarespack.cli import options
from olarespack.cli.group import helm_binary, output_folder
from olarespack.core.errors import UsageError
from olarespack.project import orphan_charts, spec_files
from olarespack.release.version import Part


@click.command("bump")
@options.specs
@click.option("--major", "part", flag_value="major", help="X.0.0: an incompatible change.")
@click.option("--minor", "part", flag_value="minor", help="x.Y.0: a new feature or setting.")
@click.option("--patch", "part", flag_value="patch", help="x.y.Z: a fix.")
@click.option("--prerelease", "part", flag_value="prerelease", help="x.y.z-rc.N: never below the current version.")
@click.option("--note", help="The changelog entry (default: a summary of what changed in the rendered chart).")
@click.option(
    "--image",
    "image",
    metavar="REF",
    help="Move SPEC to this engine image (a whole reference, or a "
    "tag of the same repository) and raise the minor version unless another part is given.",
)
@options.base
@options.charts_dir
@options.apps_dir
def bump(
    specs: tuple[str, ...],
    part: str | None,
    note: str | None,
    image: str | None,
    base: str | None,
    charts_dir: Path,
    apps_dir: Path,
) -> None:
    """Raise versions (SemVer): edit each spec in place, add a changelog entry, re-render its chart.

    With no SPEC, bumps exactly the apps whose rendered chart differs from the base. With --image, moves
    each SPEC to that engine release: refused, with nothing written, where the release cannot run it."""
    from olarespack.release.bump import Repo, apply_bumps, plan_bumps
    from olarespack.release.move import plan_moves
    from olarespack.spec.inplace import editing

    if image is not None and not specs:
        raise UsageError("--image moves the apps named: give their SPEC files")
    if part is None and image is None:
        raise UsageError("say which part to raise: --major, --minor, --patch or --prerelease")
    output_folder(charts_dir, "--charts-dir")
    repo = Repo.at(Path.cwd(), base, charts_dir)
    files = spec_files(specs, apps_dir)
    skipped: list[str] = []
    with editing(*files):  # every spec from its read to its write: a concurrent edit is not lost
        if image is not None:
            bumps = plan_moves(
                helm_binary("helm"), repo, files, image, cast(Part, part or "minor"), note, dt.date.today()
            )
        else:
            bumps, skipped = plan_bumps(
                helm_binary("helm"), repo, files, bool(specs), cast(Part, part), note, dt.date.today()
            )
        apply_bumps(bumps, charts_dir)
    for line in skipped:
        click.echo(f"skip {line}")
    for planned in bumps:
        click.echo(f"bumped {planned.name} {planned.edit.old_version} -> {planned.edit.new_version}: {planned.note}")
        for warning in planned.warnings:
            click.echo(f"WARN {warning}", err=True)
    if not bumps and not skipped:
        click.echo(f"nothing to bump: no rendered chart differs from {repo.base[:12]}")


@click.command("diff")
@options.specs
@options.base
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--exit-code", is_flag=True, help="Exit 1 when something changed.")
@options.charts_dir
@options.apps_dir
def diff(specs: tuple[str, ...], base: str | None, fmt: str, exit_code: bool, charts_dir: Path, apps_dir: Path) -> None:
    """What the cluster would run differently: each app rendered at the base and now, per resource.

    Also the version gate: an app whose rendered chart changed without a version increase is an error."""
    from olarespack.release import diff as formats
    from olarespack.release.bump import Repo, diffs, gate_problems

    repo = Repo.at(Path.cwd(), base, charts_dir)
    apps, found = diffs(helm_binary("helm"), repo, spec_files(specs, apps_dir))
    if fmt == "json":
        click.echo(formats.as_json(found))
    elif fmt == "markdown":
        click.echo(formats.as_markdown(found))
    else:
        text = formats.as_text(found, color=sys.stdout.isatty())
        click.echo(text if text else f"no rendered change since {repo.base[:12]}")
    gate = gate_problems(found) + ([] if specs else orphan_charts(charts_dir, {app.spec.name for app in apps}))
    for problem in gate:
        click.echo(f"ERROR {problem}", err=True)
    if gate or (exit_code and any(d.changed for d in found)):
        sys.exit(1)
