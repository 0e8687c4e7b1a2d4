"""bump on an app that is new at the base (no chart there): nothing of it is out, so it ships as the version it is
written with and bump leaves it alone, named or not; once published, it bumps as any app."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import semver
import yaml
from click.testing import CliRunner

from conftest import git, spec_version
from olarespack.cli import main

pytestmark = pytest.mark.helm
DFLASH = "vllmgemma4dflashone"
SPEC = "apps/gemma4-dflash.yaml"
V_DFLASH = spec_version("gemma4-dflash")
MINOR = str(semver.Version.parse(V_DFLASH).bump_minor())
FIRST = "First release of this app in this market."


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def new_at_base(repo: Path, keep_spec: bool) -> None:
    """A base commit without the app's chart (and without its spec unless keep_spec); the working tree has
    both, as a pull request adding the app does."""
    saved = Path(tempfile.mkdtemp(prefix="saved-", dir=repo))
    shutil.copytree(repo / "charts" / DFLASH, saved / DFLASH)
    shutil.copy(repo / SPEC, saved / "spec.yaml")
    (repo / ".git" / "info" / "exclude").write_text(f"/{saved.name}/\n")
    git(repo, "rm", "-rq", f"charts/{DFLASH}", *([] if keep_spec else [SPEC]))
    git(repo, "commit", "-qm", "base without the app")
    shutil.copytree(saved / DFLASH, repo / "charts" / DFLASH)
    shutil.copy(saved / "spec.yaml", repo / SPEC)


def spec_data(repo: Path) -> dict[str, object]:
    data: dict[str, object] = yaml.safe_load((repo / SPEC).read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("keep_spec", [False, True], ids=["spec-new-too", "spec-at-base"])
@pytest.mark.parametrize("named", [False, True], ids=["all", "named"])
def test_a_new_app_ships_as_the_version_it_is_written_with(repo: Path, keep_spec: bool, named: bool) -> None:
    """A new app written as 1.0.0 shipped as 1.1.0 (its first release was a bump), and "nothing to bump: no
    rendered chart differs" was printed for a chart the base does not have."""
    new_at_base(repo, keep_spec)
    before = (repo / SPEC).read_text(encoding="utf-8")
    for args in ((), ("--note", "again")):  # with or without a note, named or not: its version stays
        code, out, err = run("bump", "--minor", *([SPEC] if named else []), *args)
        assert code == 0, err
        assert "bumped" not in out and f"skip {DFLASH}: new in this market, ships as {V_DFLASH}" in out, out
        assert "no rendered chart differs" not in out
        assert (repo / SPEC).read_text(encoding="utf-8") == before
    # the version gate lets it through as it is
    assert run("diff")[0] == 0
    # once it is at the base (published), a change bumps it as any app
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the app")
    text = before.replace("max_model_len: 16384", "max_model_len: 8192")
    (repo / SPEC).write_text(text, encoding="utf-8")
    assert run("build", SPEC)[0] == 0
    code, out, err = run("bump", "--minor", "--base", "HEAD")
    assert code == 0 and f"bumped {DFLASH} {V_DFLASH} -> {MINOR}" in out and FIRST not in out, (out, err)


def test_an_app_at_its_base_version_with_a_chart_there_still_bumps(repo: Path) -> None:
    text = (repo / SPEC).read_text(encoding="utf-8").replace("max_model_len: 16384", "max_model_len: 8192")
    (repo / SPEC).write_text(text, encoding="utf-8")
    code, out, err = run("bump", "--minor")
    assert code == 0, err
    assert f"bumped {DFLASH} {V_DFLASH} -> {MINOR}" in out and FIRST not in out
