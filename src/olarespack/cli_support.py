"""What every command module shares: turning an OlaresPackError into messages and an exit code."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from olarespack.errors import OlaresPackError, ProblemsError


def fail(exc: OlaresPackError) -> NoReturn:
    if isinstance(exc, ProblemsError):
        for problem in exc.problems:
            click.echo(f"FAIL {problem}", err=True)
        click.echo(f"{len(exc.problems)} problem(s); nothing was written", err=True)
    else:
        click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)
