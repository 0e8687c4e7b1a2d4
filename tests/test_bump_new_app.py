"""bump on an app that is new at the base (no chart there): the first bump is its first release in this
market; a second bump, with or without changes since, leaves it alone, as an app already above its base."""

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
def test_a_new_app_is_bumped_once(repo: Path, keep_spec: bool) -> None:
    new_at_base(repo, keep_spec)
    code, out, err = run("bump", "--minor")
    assert code == 0, err
    assert f"bumped {DFLASH} {V_DFLASH} -> {MINOR}: {FIRST}" in out
    after = (repo / SPEC).read_text(encoding="utf-8")
    for _ in range(2):  # a second run, and a third: nothing moves
        code, out, err = run("bump", "--minor")
        assert code == 0, err
        assert "bumped" not in out and f"skip {DFLASH}: already {MINOR}" in out, out
        assert (repo / SPEC).read_text(encoding="utf-8") == after
    # a change since the first bump does not raise an unreleased version again
    text = after.replace("max_model_len: 16384", "max_model_len: 8192")
    assert text != after
    (repo / SPEC).write_text(text, encoding="utf-8")
    assert run("build", SPEC)[0] == 0
    code, out, _ = run("bump", "--minor")
    assert code == 0 and "bumped" not in out and f"skip {DFLASH}: already {MINOR}" in out
    assert spec_data(repo)["version"] == MINOR
    # committed, then compared with the same base: still its first release
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the app")
    code, out, _ = run("bump", "--minor", "--base", "HEAD~1")
    assert code == 0 and "bumped" not in out and f"skip {DFLASH}: already {MINOR}" in out


def test_a_new_apps_own_note_keeps_the_first_release_words(repo: Path) -> None:
    new_at_base(repo, keep_spec=False)
    code, out, err = run("bump", "--minor", "--note", "DFlash drafter, 16K context")
    assert code == 0, err
    changelog = spec_data(repo)["changelog"]
    assert isinstance(changelog, list)
    assert changelog[0]["note"] == f"{FIRST} DFlash drafter, 16K context"
    code, out, _ = run("bump", "--minor", "--note", "again")
    assert code == 0 and "bumped" not in out and f"skip {DFLASH}: already {MINOR}" in out


def test_an_app_at_its_base_version_with_a_chart_there_still_bumps(repo: Path) -> None:
    text = (repo / SPEC).read_text(encoding="utf-8").replace("max_model_len: 16384", "max_model_len: 8192")
    (repo / SPEC).write_text(text, encoding="utf-8")
    code, out, err = run("bump", "--minor")
    assert code == 0, err
    assert f"bumped {DFLASH} {V_DFLASH} -> {MINOR}" in out and FIRST not in out


@pytest.mark.parametrize("keep_spec", [False, True], ids=["spec-new-too", "spec-at-base"])
def test_a_new_app_named_on_the_command_line_is_bumped_once_too(repo: Path, keep_spec: bool) -> None:
    new_at_base(repo, keep_spec)
    code, out, err = run("bump", "--minor", SPEC)
    assert code == 0, err
    assert f"bumped {DFLASH} {V_DFLASH} -> {MINOR}: {FIRST}" in out
    after = (repo / SPEC).read_text(encoding="utf-8")
    for args in ((), ("--note", "again")):  # a second run, with or without a note: nothing moves
        code, out, err = run("bump", "--minor", SPEC, *args)
        assert code == 0, err
        assert "bumped" not in out and f"skip {DFLASH}: already {MINOR}" in out, out
        assert (repo / SPEC).read_text(encoding="utf-8") == after
    changelog = spec_data(repo)["changelog"]
    assert isinstance(changelog, list)
    assert [entry["note"].startswith(FIRST) for entry in changelog].count(True) == 1  # said once
