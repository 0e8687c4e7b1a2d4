"""olarespack export: the published market folder in forms other hosts serve."""

from __future__ import annotations

import click


@click.group()
def export() -> None:
    """Export the market folder for another host (a Cloudflare Worker)."""
