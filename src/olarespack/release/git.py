"""Files as they were at a git ref, for comparing a spec and its chart with a base (bump, diff, gate)."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

from olarespack.core.errors import UsageError


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise UsageError(f"cannot run git: {exc}") from None


def repo_root(start: Path) -> Path:
    out = _git(start, "rev-parse", "--show-toplevel")
    if out.returncode != 0:
        raise UsageError(f"{start.resolve()} is not inside a git repository: --base needs one")
    return Path(out.stdout.strip())


def resolve(root: Path, ref: str) -> str:
    out = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if out.returncode != 0:
        raise UsageError(f"--base: {ref!r} is not a commit of {root}")
    return out.stdout.strip()


def default_base(root: Path, main_branch: str = "main") -> str:
    """The merge base with the main branch, or HEAD when on it (or when there is no main branch)."""
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    if branch != main_branch:
        for candidate in (main_branch, f"origin/{main_branch}"):
            out = _git(root, "merge-base", "HEAD", candidate)
            if out.returncode == 0:
                return out.stdout.strip()
    return resolve(root, "HEAD")


def show(root: Path, ref: str, path: str) -> str | None:
    """A file's text at ref, or None when it did not exist there."""
    out = _git(root, "show", f"{ref}:{path}")
    return out.stdout if out.returncode == 0 else None


def folder_at(root: Path, ref: str, folder: str) -> dict[str, str]:
    """Every file under folder at ref, keyed by its path relative to folder."""
    out = _git(root, "ls-tree", "-r", "--name-only", ref, "--", folder)
    files: dict[str, str] = {}
    for name in out.stdout.splitlines():
        text = show(root, ref, name)
        if text is not None:
            files[name.removeprefix(folder.rstrip("/") + "/")] = text
    return files


def added_dates(file: Path, versions: list[str]) -> dict[str, dt.date]:
    """version -> the day the commit that first added `version: <version>` to the file was made: the date
    of an undated changelog entry. Nothing for a file outside git or a line not committed yet."""
    out = _git(file.parent, "rev-parse", "--show-toplevel")
    if out.returncode != 0:
        return {}
    found: dict[str, dt.date] = {}
    for version in versions:
        # the changelog line itself (quoted or not), so 1.0.5 never matches the commit that added 1.0.50; git
        # reads an extended regular expression, in which a semver's only special characters are . and +
        literal = "".join(f"[{c}]" if c in ".+" else c for c in version)
        line = rf"version:[[:space:]]*[\"']?{literal}[\"']?[[:space:]]*$"
        log = _git(file.parent, "log", "--format=%cs", "-G", line, "--", file.name)
        days = log.stdout.split()
        if log.returncode == 0 and days:
            try:
                found[version] = dt.date.fromisoformat(days[-1])
            except ValueError:
                continue
    return found
