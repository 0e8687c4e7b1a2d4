"""olarespack import: hand-written charts (folders or .tgz) become specs whose build runs the same server."""

from __future__ import annotations

import re
import sys
from contextlib import ExitStack
from pathlib import Path

import click

from olarespack.cli import options
from olarespack.core.errors import UsageError


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--apps-dir",
    type=options.FolderPath,
    default=Path("apps"),
    show_default=True,
    help="Where the specs are written (<apps-dir>/<app name>.yaml).",
)
@click.option("--force", is_flag=True, help="Replace a spec file that already exists.")
@click.option(
    "--hardware",
    default="rtx5090-laptop",
    show_default=True,
    help="The GPU profile the specs target (olarespack.yaml's hardware).",
)
@click.option(
    "--owners",
    "owners",
    metavar="USER",
    multiple=True,
    help="A GitHub user who owns the apps (repeat): their specs' metadata.owners, where a chart has no "
    "owners file or another one.",
)
def import_charts(paths: tuple[str, ...], apps_dir: Path, force: bool, hardware: str, owners: tuple[str, ...]) -> None:
    """Turn hand-written charts (folders, folders of charts or .tgz archives) into specs.

    Each chart is rendered by helm as Olares would install it; the command line its server finally runs
    (ConfigMap values, $(VAR), shell wrappers with ${VAR:-default}) is read into the spec, which is then
    built and its server command line compared with the chart's. Writes <apps-dir>/<name>.yaml for every
    chart olarespack can read a server from.

    Exits 0 when every spec runs the same server; 1 when something is not carried (each named; the spec is
    still written when it builds, never when it would not), or a chart has no vLLM or llama.cpp server (no
    spec written)."""
    from olarespack.check.inputs import classify
    from olarespack.cli.group import helm_binary
    from olarespack.importer import ImportFailed, import_chart
    from olarespack.write import write_file

    bad = [owner for owner in owners if not re.fullmatch(r"[A-Za-z0-9-]{1,39}", owner)]
    if bad:
        raise UsageError(f"--owners: {bad[0][:60]!r} is not a GitHub user name (letters, digits, dashes, at most 39)")
    helm = helm_binary()
    incomplete = 0
    with ExitStack() as stack:
        specs, targets, refused = classify(list(paths), stack)
        if specs:
            raise UsageError(f"{', '.join(map(str, specs))}: already a spec; import reads charts")
        for problem in refused:
            click.echo(str(problem), err=True)
            incomplete += 1
        planned: dict[Path, str] = {}
        for target in targets:
            spec_file = apps_dir / f"{target.chart.name}.yaml"
            if spec_file in planned:
                raise UsageError(
                    f"{planned[spec_file]} and {target.chart.label} are both named "
                    f"{target.chart.name}: import them into different --apps-dir folders"
                )
            planned[spec_file] = target.chart.label
            if spec_file.exists() and not force:
                raise UsageError(f"{spec_file} exists: pass --force to replace it")
        for target in targets:
            spec_file = apps_dir / f"{target.chart.name}.yaml"
            try:
                result = import_chart(target, helm, spec_file, hardware, owners)
            except ImportFailed as exc:
                click.echo(f"{exc} (no spec written)", err=True)
                incomplete += 1
                continue
            write_file(spec_file, result.text.encode("utf-8"))
            status = (
                "same server command line" if result.complete else f"{len(result.unexpressed)} thing(s) not carried"
            )
            click.echo(f"{result.label} -> {spec_file}: {status}")
            for note in result.notes:
                click.echo(f"  note: {note}")
            for item in result.unexpressed:
                click.echo(f"  not carried: {item}")
            if not result.complete:
                incomplete += 1
    if incomplete:
        click.echo(
            f"{incomplete} chart(s) not imported whole: the specs say what their chart said, except what "
            "is listed above",
            err=True,
        )
        sys.exit(1)
