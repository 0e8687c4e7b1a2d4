"""olarespack import: a hand-written chart becomes a spec."""

from __future__ import annotations

import click

from olarespack.errors import UsageError


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
def import_charts(paths: tuple[str, ...]) -> None:
    """Turn hand-written charts (folders or .tgz) into specs."""
    raise UsageError("import is not available yet")
