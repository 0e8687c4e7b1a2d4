"""Upgrade proposals, for a market repository's scheduled workflow: each app that `outdated` can move is moved
by `bump --image` on a branch of its own (from the base), committed and pushed to the remote, and the pull
request's title and body are written beside: the move's note (what the box gets), the image and the driver it
starts on, bump's warnings, and the rendered diff as the review comment shows it. An app that cannot move is
listed with lint's reasons and gets no branch; a branch already on the remote is not proposed again."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from olarespack.core.errors import UsageError
from olarespack.core.hardware import OlaresDriver
from olarespack.helm import Helm
from olarespack.release.bump import Repo, apply_bumps, diffs
from olarespack.release.markdown import as_markdown, text
from olarespack.release.move import plan_moves
from olarespack.release.outdated import outdated
from olarespack.spec.inplace import editing

MARKER = "<!-- olarespack-upgrade -->"


@dataclass(frozen=True)
class Proposal:
    app: str
    release: str
    branch: str
    title: str
    body: str  # the pull request's body (markdown); empty when nothing was proposed
    reason: str = ""  # why nothing was proposed

    @property
    def proposed(self) -> bool:
        return not self.reason


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UsageError(f"git {' '.join(args[:3])}: {done.stderr.strip()[:500]}")
    return done.stdout


def branch_name(app: str, release: str) -> str:
    return f"olarespack/upgrade-{app}-{re.sub(r'[^A-Za-z0-9._-]', '-', release)}"


def propose(helm: Helm, root: Path, remote: str, files: Sequence[Path], driver: OlaresDriver | None,
            charts_dir: Path, today: dt.date) -> list[Proposal]:
    """Every proposal, each pushed to `remote` on its branch; the working tree is left on the branch it was on."""
    if _git(root, "status", "--porcelain", "--untracked-files=no").strip():
        raise UsageError(f"{root}: the working tree has uncommitted changes; propose starts from a clean base")
    start = _git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()
    base = _git(root, "rev-parse", "HEAD").strip()
    repo = Repo(root, base, charts_dir)
    found = outdated(helm, repo, files, driver, False, today)
    remote_branches = set(re.findall(r"refs/heads/(\S+)", _git(root, "ls-remote", "--heads", remote)))
    proposals = []
    for app in found.apps:
        for candidate in (c for c in app.candidates if c.evaluated):
            branch = branch_name(app.app, candidate.release)
            title = f"{app.app}: move to {candidate.release}" + (f" ({candidate.image})" if candidate.image else "")
            if not candidate.movable or candidate.image is None:
                proposals.append(Proposal(app.app, candidate.release, branch, title, "",
                                          "; ".join(candidate.reasons) or "no image of it is known"))
            elif branch in remote_branches:
                proposals.append(Proposal(app.app, candidate.release, branch, title, "",
                                          f"already proposed: {remote} has {branch}"))
            else:
                try:
                    body = _moved(helm, repo, Path(app.file), candidate.image, branch, title, driver, today)
                    _git(root, "push", "--quiet", remote, f"{branch}:{branch}")
                finally:  # back where it started, whatever happened on the branch
                    _git(root, "checkout", "--quiet", "--force", start)
                proposals.append(Proposal(app.app, candidate.release, branch, title, body))
    return proposals


def _moved(helm: Helm, repo: Repo, file: Path, image: str, branch: str, title: str, driver: OlaresDriver | None,
           today: dt.date) -> str:
    """The move made and committed on `branch` (left checked out); the pull request's body."""
    _git(repo.root, "checkout", "--quiet", "-b", branch, repo.base)
    with editing(file):  # from the read to the write, as bump holds it
        bumps = plan_moves(helm, repo, [file], image, "minor", None, today)
        apply_bumps(bumps, repo.charts_dir)
    [bump] = bumps
    _, [diff] = diffs(helm, repo, [file])
    _git(repo.root, "add", "--all", "--", str(file), str(repo.charts_dir))
    _git(repo.root, "-c", "user.name=olarespack", "-c", "user.email=olarespack@users.noreply.github.com",
         "commit", "--quiet", "-m", f"{title}\n\n{bump.note}")
    lines = [MARKER, f"## {text(title)}", "", text(bump.note), "",
             f"- version {bump.edit.old_version} -> {bump.edit.new_version}, by `olarespack bump {file} --image "
             f"{image}`"]
    if driver is not None:
        lines.append(f"- the image starts on the box: {text(driver.title)}")
    lines += [f"- {text(warning)}" for warning in bump.warnings]
    lines += ["", "### What the cluster runs differently", "", as_markdown([diff])]
    return "\n".join(lines) + "\n"
