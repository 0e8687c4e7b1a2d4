"""olarespack init: a market repository laid out for olarespack."""

from __future__ import annotations

import click

from olarespack.errors import UsageError


@click.command("init")
@click.argument("folder", type=click.Path(file_okay=False))
def init(folder: str) -> None:
    """Lay out a market repository in FOLDER."""
    raise UsageError("init is not available yet")
