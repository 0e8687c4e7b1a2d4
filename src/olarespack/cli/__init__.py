"""The olarespack command line: the only place that prints and exits; every error is caught once, by the
group (cli/group.py), and mapped to its message and exit code.

Exit codes:
  0  success (nothing to report, or nothing would change)
  1  problems found in the input, or --check found charts that differ from their specs
  2  usage error (unknown option, missing file, bad option value)
  3  a required external tool (helm) is missing or too old
  4  an internal error: a bug in olarespack (one line says what to report; never a traceback)
  5  a model the spec names has no data (in models/ or the shipped data): the message gives the exact
     `olarespack model add` command that records it from the model's own files
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from olarespack import __version__
from olarespack.cli import (
    bench,
    build,
    calibrate,
    check,
    export,
    importer,
    init,
    market,
    market_check,
    model,
    outdated,
    plan,
    release,
    releases,
    smoke,
)
from olarespack.cli.group import CatchingGroup


@click.group(cls=CatchingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="olarespack")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Turn one typed spec per app into a versioned, validated Olares Helm chart.

    In a market repository, its olarespack.yaml (written by `olarespack init`, found in this folder or one
    above it; OLARESPACK_CONFIG names another) gives the defaults of the folder and URL options."""
    from olarespack.config import load_project, option_defaults

    if ctx.invoked_subcommand == "init":
        return  # init writes the settings; it never reads them
    project = load_project(Path.cwd(), os.environ)
    if project is not None:
        ctx.default_map = option_defaults(project, Path.cwd())


for command in (
    build.build,
    check.lint,
    check.fit,
    release.bump,
    release.diff,
    market.package,
    market.publish,
    market.serve,
    build.schema,
    importer.import_charts,
    model.model,
    calibrate.calibrate,
    export.export,
    init.init,
    init.install_helm,
    build.values,
    plan.plan,
    bench.bench,
    releases.releases,
    outdated.outdated,
    outdated.propose,
    smoke.smoke,
    market_check.market_group,
):
    main.add_command(command)
