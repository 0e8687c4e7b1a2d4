"""Upgrade proposals, for a market repository's scheduled workflow: each app that `outdated` can move is moved
by `bump --image` on a branch of its own (from the base), committed and pushed to the remote, and the pull
request's title and body are written beside: the move's note (what the box gets), the image and the driver it
starts on, bump's warnings, and the rendered diff as the review comment shows it. An app that cannot move is
listed with lint's reasons and gets no branch; a branch already on the remote is not proposed again."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
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
WORKTREE_PREFIX = "olarespack-propose-"


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


def propose(
    helm: Helm,
    root: Path,
    remote: str,
    files: Sequence[Path],
    driver: OlaresDriver | None,
    charts_dir: Path,
    today: dt.date,
    record: Callable[[Proposal], None] = lambda proposal: None,
) -> list[Proposal]:
    """Every proposal, as a transaction per app: the move is made and committed in a worktree of its own (the
    checkout the command runs in is never switched, so an interruption leaves it as it was), `record` writes the
    proposal (the pull request's body) before its branch is pushed, and a branch the remote already has with
    this very move is proposed again (its pull request may never have opened), never pushed twice. A remote
    branch with other content is left alone. A leftover local branch or worktree of an earlier run is reset."""
    if _git(root, "status", "--porcelain", "--untracked-files=no").strip():
        raise UsageError(f"{root}: the working tree has uncommitted changes; propose starts from a clean base")
    base = _git(root, "rev-parse", "HEAD").strip()
    found = outdated(helm, Repo(root, base, charts_dir), files, driver, False, today)
    remote_branches = set(re.findall(r"refs/heads/(\S+)", _git(root, "ls-remote", "--heads", remote)))
    _forget_worktrees(root)
    proposals = []
    for app in found.apps:
        for candidate in (c for c in app.candidates if c.evaluated):
            branch = branch_name(app.app, candidate.release)
            title = f"{app.app}: move to {candidate.release}" + (f" ({candidate.image})" if candidate.image else "")
            if not candidate.movable or candidate.image is None:
                proposals.append(
                    Proposal(
                        app.app,
                        candidate.release,
                        branch,
                        title,
                        "",
                        "; ".join(candidate.reasons) or "no image of it is known",
                    )
                )
                continue
            proposal = _transaction(
                helm,
                root,
                base,
                remote,
                charts_dir,
                Path(app.file),
                candidate.image,
                Proposal(app.app, candidate.release, branch, title, ""),
                driver,
                today,
                branch in remote_branches,
                record,
            )
            proposals.append(proposal)
    return proposals


def _transaction(
    helm: Helm,
    root: Path,
    base: str,
    remote: str,
    charts_dir: Path,
    file: Path,
    image: str,
    proposal: Proposal,
    driver: OlaresDriver | None,
    today: dt.date,
    on_remote: bool,
    record: Callable[[Proposal], None],
) -> Proposal:
    """One app's move in its worktree: made, committed, recorded, then pushed (or found pushed already)."""
    work = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX))
    try:
        _git(root, "worktree", "add", "--quiet", "--force", "-B", proposal.branch, str(work), base)
        here = work / file.resolve().relative_to(root.resolve())
        charts = work / charts_dir.resolve().relative_to(root.resolve())
        body = _moved(helm, Repo(work, base, charts), here, file, image, proposal.title, driver, today)
        made = dataclasses.replace(proposal, body=body)
        if on_remote:
            _git(work, "fetch", "--quiet", remote, proposal.branch)
            theirs = _git(work, "rev-parse", "FETCH_HEAD^{tree}").strip()
            if theirs != _git(work, "rev-parse", "HEAD^{tree}").strip():
                return dataclasses.replace(
                    proposal,
                    reason=f"{remote} has {proposal.branch} with other content "
                    "(edited since, or moved on another day): left as it is",
                )
            record(made)  # the same move, pushed by an earlier run whose proposal may never have been opened
            return made
        record(made)  # before the push: a branch the remote has is always one a proposal says
        _git(work, "push", "--quiet", remote, f"{proposal.branch}:{proposal.branch}")
        return made
    except UsageError as exc:
        return dataclasses.replace(proposal, reason=str(exc))
    finally:
        with contextlib.suppress(UsageError):
            _git(root, "worktree", "remove", "--force", str(work))
        shutil.rmtree(work, ignore_errors=True)


def _forget_worktrees(root: Path) -> None:
    """The worktrees an interrupted run left: removed (their branches are reset by the next move anyway)."""
    _git(root, "worktree", "prune")
    for line in _git(root, "worktree", "list", "--porcelain").splitlines():
        path = line.removeprefix("worktree ")
        if line.startswith("worktree ") and Path(path).name.startswith(WORKTREE_PREFIX):
            with contextlib.suppress(UsageError):
                _git(root, "worktree", "remove", "--force", path)


def _moved(
    helm: Helm, repo: Repo, file: Path, shown: Path, image: str, title: str, driver: OlaresDriver | None, today: dt.date
) -> str:
    """The move made and committed in the worktree `repo` stands for; the pull request's body (`shown`: the
    spec as people name it)."""
    with editing(file):  # from the read to the write, as bump holds it
        bumps = plan_moves(helm, repo, [file], image, "minor", None, today)
        apply_bumps(bumps, repo.charts_dir)
    [bump] = bumps
    _, [diff] = diffs(helm, repo, [file])
    _git(repo.root, "add", "--all", "--", str(file), str(repo.charts_dir))
    _git(
        repo.root,
        "-c",
        "user.name=olarespack",
        "-c",
        "user.email=olarespack@users.noreply.github.com",
        "commit",
        "--quiet",
        "-m",
        f"{title}\n\n{bump.note}",
    )
    lines = [
        MARKER,
        f"## {text(title)}",
        "",
        text(bump.note),
        "",
        f"- version {bump.edit.old_version} -> {bump.edit.new_version}, by `olarespack bump {shown} --image {image}`",
    ]
    if driver is not None:
        lines.append(f"- the image starts on the box: {text(driver.title)}")
    lines += [f"- {text(warning)}" for warning in bump.warnings]
    lines += ["", "### What the cluster runs differently", "", as_markdown([diff])]
    said = "\n".join(lines)
    for worktree in {f"{repo.root}/", f"{repo.root.resolve()}/"}:  # paths as the repository names them
        said = said.replace(worktree, "")
    return said + "\n"
