"""What every command module shares: turning an OlaresPackError into messages and an exit code."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from olarespack.errors import OlaresPackError, ProblemsError
from olarespack.helm import HelmBinary


def fail(exc: OlaresPackError) -> NoReturn:
    if isinstance(exc, ProblemsError):
        for problem in exc.problems:
            click.echo(f"FAIL {problem}", err=True)
        click.echo(f"{len(exc.problems)} problem(s); nothing was written", err=True)
    else:
        click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


def helm_binary(name: str = "helm") -> HelmBinary:
    """The pinned helm (`helm` = 3.19, `helm4` = 4.1) from the project's venv or PATH, unless
    OLARESPACK_HELM / OLARESPACK_HELM4 names another binary."""
    return HelmBinary(os.environ.get(f"OLARESPACK_{name.upper()}") or None, name=name)
