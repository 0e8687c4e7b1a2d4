"""olarespack export: the published market folder in forms other hosts serve."""

from __future__ import annotations

from pathlib import Path

import click

from olarespack.cli import options
from olarespack.cli.group import output_folder


@click.group()
def export() -> None:
    """Export the market folder for another host (a Cloudflare Worker)."""


@export.command("cloudflare")
@options.market_dir
@click.option(
    "--out",
    "out_dir",
    type=options.FolderPath,
    required=True,
    help="Folder that receives the Worker (replaced whole; empty, new, or a previous export).",
)
@click.option(
    "--name",
    default="olarespack-market",
    show_default=True,
    help="The Worker's name in wrangler.jsonc (what `wrangler deploy` creates or updates).",
)
def cloudflare(market_dir: Path, out_dir: Path, name: str) -> None:
    """Write a Cloudflare Worker that answers every request as `olarespack serve` does on MARKET_DIR.

    \b
    OUT gets wrangler.jsonc, worker/ (the script and its route table) and assets/ (the answers, charts
    and icons). Both generations and the POST details are answered, /legacy and /current included.
    Try it with `wrangler dev` in OUT, put it on Cloudflare with `wrangler deploy`; export again after
    each publish."""
    from olarespack.market.cloudflare import export_cloudflare

    output_folder(out_dir, "--out")
    done = export_cloudflare(market_dir, out_dir, name)
    charts = sum(1 for path in done.copies if path.startswith("assets/charts/"))
    icons = len(done.copies) - charts
    click.echo(
        f"ok {out_dir}: Worker {name!r}, {charts} chart archive(s), {icons} icon(s); "
        f"next: cd {out_dir} && wrangler deploy"
    )
