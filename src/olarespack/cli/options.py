"""Options more than one command takes, declared once so they mean the same everywhere (pip-tools'
options.py): the specs, the apps folder, the charts folder, the market folder, the git base, the Olares
version."""

from __future__ import annotations

from pathlib import Path

import click

from olarespack.olares.generations import GenerationName, generation_for_olares

FolderPath = click.Path(file_okay=False, path_type=Path)

specs = click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
apps_dir = click.option(
    "--apps-dir",
    type=FolderPath,
    default=Path("apps"),
    show_default=True,
    help="Where to find specs when none are given.",
)
# --out is the name build and bump had before every command said --charts-dir; kept so scripts still work
charts_dir = click.option(
    "--charts-dir",
    "--out",
    "charts_dir",
    type=FolderPath,
    default=Path("charts"),
    show_default=True,
    help="The charts folder: one chart folder per app.",
)
market_dir = click.option(
    "--market-dir", type=FolderPath, default=Path("market"), show_default=True, help="The market folder."
)
base = click.option(
    "--base", metavar="REF", help="Git ref to compare with (default: merge base with main, or HEAD on main)."
)
jobs = click.option(
    "--jobs", "-j", type=click.IntRange(min=1), default=2, show_default=True, help="helm processes run at once."
)


def _generation(ctx: click.Context, param: click.Parameter, value: str | None) -> GenerationName | None:
    return generation_for_olares(value) if value else None


olares_version = click.option(
    "--olares-version",
    "generation",
    metavar="VERSION",
    callback=_generation,
    help="Render the manifest generation this Olares release installs (1.12.3-1.12.5: legacy 0.10.0; 1.12.6 "
    "and later: current 0.12.0) instead of the spec's choice.",
)
