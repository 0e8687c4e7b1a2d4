"""The one error tree of olarespack and the Problem record every stage reports in."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from olarespack.core.redact import redact
from olarespack.core.rule_catalog import known

Severity = Literal["error", "warning"]


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _printable(text: str) -> str:
    """One line, nothing a terminal or a CI log would obey: field paths and messages quote strangers' text (a
    spec key holding a newline and `::warning::`, or an escape sequence)."""
    return _CONTROL.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", text
    )


@dataclass(frozen=True, order=True)
class Problem:
    """One finding, phrased for the person who has to fix it."""

    file: str
    path: str
    message: str
    fix: str = ""
    rule: str = field(kw_only=True)  # an id of rule_catalog.catalog()
    severity: Severity = field(default="error", kw_only=True)

    def __post_init__(self) -> None:
        if not known(self.rule):
            raise ValueError(
                f"rule {self.rule!r} is not in the rule catalog (core/rule_catalog.py, or the engine "
                "package's catalog.py)"
            )

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        text = f"{where}: {self.message}"
        if self.fix:
            text += f" (fix: {self.fix})"
        return redact(_printable(f"{text} [{self.rule}]"))


class OlaresPackError(Exception):
    """Base of every error the CLI turns into a message and an exit code."""

    exit_code = 1


class ProblemsError(OlaresPackError):
    """Input that cannot be used; carries every problem found, not only the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class SpecError(ProblemsError):
    """An app spec that does not load or does not validate."""


class RenderError(ProblemsError):
    """A spec that validates but cannot be rendered into a chart."""


class UsageError(OlaresPackError):
    """Wrong command-line use (bad option value, missing file)."""

    exit_code = 2


class ToolMissingError(OlaresPackError):
    """A required external tool (helm) is missing or too old."""

    exit_code = 3


class WriteError(OlaresPackError):
    """A target that cannot be written without destroying something that is not ours."""


class PackageError(OlaresPackError):
    """helm could not package a chart, or produced an archive that is not reproducible."""


class HelmError(OlaresPackError):
    """helm ran but could not render a chart (a problem in the chart, not a missing tool)."""


class ModelDataError(OlaresPackError):
    """A model the fit arithmetic cannot use: unknown, or a config it does not understand."""


class UnknownModelError(ModelDataError):
    """A model olarespack has no data for, in the project's models/ folder or the shipped data. Its own exit
    code, so a script can tell "add the model" from "does not fit"; `command` adds it."""

    exit_code = 5

    def __init__(self, message: str, *, repo: str, command: str) -> None:
        self.repo = repo
        self.command = command
        super().__init__(message)


class CatalogError(OlaresPackError):
    """The market folder's catalog cannot be used. str() names the file and what to do; `reason` is the
    one-line cause alone, without paths (what /health shows the world)."""

    def __init__(self, path: Path, reason: str, hint: str = "") -> None:
        self.reason = " ".join(reason.split())[:300]
        super().__init__(f"{path}: {self.reason}" + (f"; {hint}" if hint else ""))


class MissingCatalogError(CatalogError):
    """No catalog at all: the command was pointed at the wrong folder, or publish has not run."""

    exit_code = 2
