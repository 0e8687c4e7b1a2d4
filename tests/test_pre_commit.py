"""The pre-commit hooks (.pre-commit-hooks.yaml), run by pre-commit itself on a repository made by
`olarespack init`. Nothing reaches the network: the hooks are the published ones with `language: system`
(a local hook configuration built from .pre-commit-hooks.yaml, so the two cannot drift apart) and run the
olarespack and helm of this venv."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APPS, ROOT

pytestmark = pytest.mark.helm  # lint runs helm
HOOKS = ROOT / ".pre-commit-hooks.yaml"
BIN = Path(sys.executable).parent
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def hooks() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(HOOKS.read_text(encoding="utf-8"))
    assert isinstance(loaded, list)
    return loaded


def test_the_hooks_are_the_drift_check_and_lint_on_the_project_folders() -> None:
    by_id = {hook["id"]: hook for hook in hooks()}
    assert set(by_id) == {"olarespack-drift", "olarespack-lint"}
    assert by_id["olarespack-drift"]["entry"] == "olarespack build --check"
    assert by_id["olarespack-lint"]["entry"] == "olarespack lint"
    for hook in by_id.values():
        assert hook["language"] == "python" and hook["pass_filenames"] is False and hook["name"]
        files = re.compile(hook["files"])
        assert all(files.search(p) for p in ("apps/a.yaml", "models/m.yaml", "charts/a/Chart.yaml"))
        assert not any(files.search(p) for p in ("README.md", "src/apps/a.yaml", "myapps/a.yaml"))


@pytest.fixture
def market(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A market repository made by `olarespack init`, with one app built and committed, and pre-commit's
    configuration naming the published hooks as local ones."""
    env = {
        **os.environ,
        **GIT_ENV,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PRE_COMMIT_COLOR": "never",
    }
    if not (BIN / "pre-commit").exists():
        pytest.skip("pre-commit is not installed: `pip install -e '.[dev]'` (make test) installs it")
    root = tmp_path / "market"
    sh(env, tmp_path, "olarespack", "init", str(root))
    shutil.copy(APPS / "gemma4-audio.yaml", root / "apps/gemma4-audio.yaml")
    sh(env, root, "olarespack", "build")
    local = [{**hook, "language": "system"} for hook in hooks()]
    config = {"repos": [{"repo": "local", "hooks": local}]}
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    sh(env, root, "git", "init", "-q", "-b", "main")
    sh(env, root, "git", "add", "-A")
    sh(env, root, "git", "commit", "-qm", "market")
    return root, env


def sh(env: dict[str, str], cwd: Path, *args: str) -> str:
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"{' '.join(args)}: {out.stdout}{out.stderr}"
    return out.stdout


def pre_commit(env: dict[str, str], root: Path, *args: str) -> tuple[int, str]:
    out = subprocess.run(
        [str(BIN / "pre-commit"), "run", *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    return out.returncode, out.stdout + out.stderr


def verdicts(output: str) -> dict[str, str]:
    """hook name -> Passed / Failed / Skipped, from pre-commit's summary lines."""
    names = {hook["name"]: hook["id"] for hook in hooks()}
    found = {}
    for line in output.splitlines():
        match = re.match(r"^(.+?)\.{3,}(?:\(no files to check\))?(Passed|Failed|Skipped)$", line)
        if match and match.group(1) in names:
            found[names[match.group(1)]] = match.group(2)
    return found


def test_a_clean_repository_passes(market: tuple[Path, dict[str, str]]) -> None:
    root, env = market
    code, out = pre_commit(env, root, "--all-files")
    assert code == 0, out
    assert verdicts(out) == {"olarespack-drift": "Passed", "olarespack-lint": "Passed"}


def test_a_spec_edited_without_rebuilding_fails_the_drift_hook(market: tuple[Path, dict[str, str]]) -> None:
    root, env = market
    spec = root / "apps/gemma4-audio.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("ctx_size: 32768", "ctx_size: 16384"), encoding="utf-8")
    sh(env, root, "git", "add", "apps/gemma4-audio.yaml")
    code, out = pre_commit(env, root)  # what `git commit` runs: the staged files
    assert code == 1
    assert verdicts(out) == {"olarespack-drift": "Failed", "olarespack-lint": "Passed"}
    assert "DRIFT llamacppgemma4audione" in out
    assert "1 chart(s) differ from their specs: run `olarespack build` and commit" in out
    sh(env, root, "olarespack", "build")  # the fix it names
    sh(env, root, "git", "add", "charts")
    code, out = pre_commit(env, root)
    assert code == 0, out


def test_a_broken_spec_fails_lint(market: tuple[Path, dict[str, str]]) -> None:
    root, env = market
    spec = root / "apps/gemma4-audio.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("ctx_size: 32768", "ctx_sise: 32768"), encoding="utf-8")
    sh(env, root, "git", "add", "apps/gemma4-audio.yaml")
    code, out = pre_commit(env, root)
    assert code == 1
    assert verdicts(out)["olarespack-lint"] == "Failed"
    assert "ctx_sise: unknown key" in out and "[spec-unknown-key]" in out
    assert "FAIL apps/gemma4-audio.yaml: " in out


def test_files_outside_the_project_folders_run_no_hook(market: tuple[Path, dict[str, str]]) -> None:
    root, env = market
    (root / "README.md").write_text("edited\n", encoding="utf-8")
    sh(env, root, "git", "add", "README.md")
    code, out = pre_commit(env, root)
    assert code == 0, out
    assert verdicts(out) == {"olarespack-drift": "Skipped", "olarespack-lint": "Skipped"}
