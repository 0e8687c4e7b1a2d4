"""olarespack calibrate: a boot log measured on the box becomes the spec's engine.calibration."""

from __future__ import annotations

import click

from olarespack.errors import UsageError


@click.command()
@click.argument("spec_file", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
@click.option("--log", "log_file", required=True, type=click.Path(exists=True, dir_okay=False))
def calibrate(spec_file: str, log_file: str) -> None:
    """Write engine.calibration from a boot log taken on the box."""
    raise UsageError("calibrate is not available yet")
