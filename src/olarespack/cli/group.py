"""What every command module shares: the group that turns every error into a message and an exit code
(caught once, here), and the checks of options that name folders."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Protocol

import click

from olarespack.core.errors import OlaresPackError, ProblemsError, UsageError
from olarespack.core.redact import redact
from olarespack.helm import HelmBinary

# Exit code of an olarespack bug: no traceback reaches the user (it may hold paths or values from CI), only
# what to report.
EXIT_INTERNAL = 4


def fail(exc: OlaresPackError) -> NoReturn:
    if isinstance(exc, ProblemsError):
        for problem in exc.problems:
            click.echo(f"FAIL {problem}", err=True)
        click.echo(f"{len(exc.problems)} problem(s); nothing was written", err=True)
    else:
        click.echo(redact(f"error: {exc}"), err=True)
    sys.exit(exc.exit_code)


class CatchingGroup(click.Group):
    """Runs a command and maps what it raises: OlaresPackError to its message and exit code, an OSError
    (disk full, permission denied) to one line and exit 1, anything else to an internal-error line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OlaresPackError as exc:
            fail(exc)
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(redact(f"error: {where}{exc.strerror or exc}"), err=True)
            sys.exit(1)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:
            if os.environ.get("OLARESPACK_DEBUG"):
                raise
            click.echo(
                redact(
                    f"internal error (a bug in olarespack; please report it): {type(exc).__name__}: "
                    f"{str(exc)[:300]} (set OLARESPACK_DEBUG=1 for the traceback)"
                ),
                err=True,
            )
            sys.exit(EXIT_INTERNAL)


def output_folder(path: Path, option: str) -> Path:
    """A folder option that olarespack writes into: it, or the nearest part of it that exists, is a folder."""
    for candidate in (path, *path.parents):
        if candidate.is_symlink() and candidate == path:
            raise UsageError(f"{option}: {path} is a symbolic link; give a real folder")
        if candidate.exists():
            if not candidate.is_dir():
                shown = "it" if candidate == path else str(candidate)
                raise UsageError(f"{option}: {path} cannot be a folder: {shown} is a file")
            break
    return path


def helm_binary(name: str = "helm") -> HelmBinary:
    """The pinned helm (`helm` = 3.19, `helm4` = 4.1) from the project's venv or PATH, unless
    OLARESPACK_HELM / OLARESPACK_HELM4 names another binary."""
    return HelmBinary(os.environ.get(f"OLARESPACK_{name.upper()}") or None, name=name)


class Verdict(Protocol):
    """A report that answers yes or no (fit's budget, a plan): a table for people, a JSON object for tools."""

    @property
    def fits(self) -> bool: ...

    def as_dict(self) -> dict[str, Any]: ...

    def table(self) -> list[str]: ...


def echo_verdict(verdict: Verdict, as_json: bool) -> None:
    """Print the report (table or JSON), then exit 1 when its answer is no."""
    if as_json:
        click.echo(json.dumps(verdict.as_dict(), indent=2, sort_keys=True))
    else:
        for line in verdict.table():
            click.echo(line)
    if not verdict.fits:
        sys.exit(1)
