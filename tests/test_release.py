"""bump and diff on a scratch git repository holding a copy of the project's apps and charts."""

from __future__ import annotations

import difflib
import json
import os
import shutil
from pathlib import Path

import pytest
import semver
import yaml
from click.testing import CliRunner

from conftest import APPS, git, spec_version, tree_bytes
from olarespack.cli import main

pytestmark = pytest.mark.helm
VISION = "vllmgemma426ba4bvisionone"
AUDIO = "llamacppgemma4audione"
# the committed versions, and the ones a bump gives them
V_VISION, V_AUDIO, V_DFLASH = (spec_version(stem) for stem in ("gemma4-vision", "gemma4-audio", "gemma4-dflash"))
VISION_MINOR = str(semver.Version.parse(V_VISION).bump_minor())
AUDIO_PATCH = str(semver.Version.parse(V_AUDIO).bump_patch())


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]


def test_bump_minor_edits_the_spec_in_place_and_rerenders(repo: Path) -> None:
    spec = repo / "apps/gemma4-vision.yaml"
    before = spec.read_text(encoding="utf-8")
    code, out, err = run("bump", "--minor", "apps/gemma4-vision.yaml", "--note", "Longer prompts: 64K tested")
    assert code == 0, err
    assert f"bumped {VISION} {V_VISION} -> {VISION_MINOR}" in out
    after = spec.read_text(encoding="utf-8")
    changes = changed_lines(before, after)
    assert changes[:2] == [f"- version: {V_VISION}", f"+ version: {VISION_MINOR}"]
    assert changes[2:4] == [f"+   - version: {VISION_MINOR}", changes[3]] and changes[3].startswith("+     date: ")
    assert changes[4:] == ["+     note: 'Longer prompts: 64K tested'"] or changes[4:] == [
        '+     note: "Longer prompts: 64K tested"'
    ]
    assert "# vLLM's boot log at gpu_memory_utilization 0.94" in after  # comments survive
    chart = yaml.safe_load((repo / f"charts/{VISION}/Chart.yaml").read_text())
    manifest = yaml.safe_load((repo / f"charts/{VISION}/OlaresManifest.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == VISION_MINOR
    assert manifest["metadata"]["version"] == manifest["spec"]["versionName"] == VISION_MINOR
    assert manifest["spec"]["upgradeDescription"].startswith(
        f"v{VISION_MINOR}: Longer prompts: 64K tested\n\nv{V_VISION}: "
    )
    assert run("build", "--check")[0] == 0


def test_bump_without_paths_bumps_only_the_changed_app(repo: Path) -> None:
    replace_in(repo / "apps/gemma4-audio.yaml", "ctx_size: 32768", "ctx_size: 16384")
    untouched = {p: p.read_bytes() for p in (repo / "apps").glob("*.yaml") if p.name != "gemma4-audio.yaml"}
    code, out, err = run("bump", "--patch")
    assert code == 0, err
    assert out.count("bumped") == 1
    assert (
        f"bumped {AUDIO} {V_AUDIO} -> {AUDIO_PATCH}: Context 32K -> 16K. Upgrading restarts the app; the "
        "downloaded model files are kept."
    ) in out
    assert {p: p.read_bytes() for p in untouched} == untouched
    assert yaml.safe_load((repo / f"charts/{AUDIO}/Chart.yaml").read_text())["version"] == AUDIO_PATCH
    assert f"version: {V_DFLASH}" in (repo / "apps/gemma4-dflash.yaml").read_text()
    # once committed, the same command finds nothing; an app already raised is left alone
    git(repo, "commit", "-qam", f"audio {AUDIO_PATCH}")
    assert "nothing to bump" in run("bump", "--patch", "--base", "HEAD")[1]
    code, out, _ = run("bump", "--patch", "--base", "HEAD~1")
    assert code == 0 and f"skip {AUDIO}: already {AUDIO_PATCH} (base {V_AUDIO}), left alone" in out


def test_prerelease_bumps_go_forward(repo: Path) -> None:
    versions = []
    for part in ("--prerelease", "--prerelease", "--patch"):
        code, out, err = run("bump", part, "apps/gemma4-audio.yaml", "--note", "rc")
        assert code == 0, err
        versions.append(out.split(" -> ")[1].split(":")[0])
    assert versions == [f"{AUDIO_PATCH}-rc.1", f"{AUDIO_PATCH}-rc.2", AUDIO_PATCH]


def test_diff_shows_the_changed_argument_under_the_deployment_and_nothing_else(repo: Path) -> None:
    replace_in(repo / "apps/gemma4-vision.yaml", "num_speculative_tokens: 3", "num_speculative_tokens: 4")
    code, out, err = run("diff")
    assert code == 1  # the version gate: changed without a version increase
    assert "[version-gate]" in err
    headers = [line for line in out.splitlines() if line.startswith(f"{VISION}, ")]
    assert headers == [
        f"{VISION}, OlaresManifest.yaml has changed:",
        f"{VISION}, i18n/en-US/OlaresManifest.yaml has changed:",
        f"{VISION}, i18n/fr-FR/OlaresManifest.yaml has changed:",
        f"{VISION}, Deployment/{VISION} has changed:",
    ]
    deployment = out.split(f"{VISION}, Deployment/{VISION} has changed:")[1]
    removed = [line for line in deployment.splitlines() if line.startswith("-")]
    added = [line for line in deployment.splitlines() if line.startswith("+")]
    assert len(removed) == len(added) == 1
    # one line: the SPEC_CONFIG env of the pod template, as the seed post shows a release
    assert removed[0].strip().startswith("-") and 'value: \'{"method":"mtp"' in removed[0]
    assert '"num_speculative_tokens":3' in removed[0] and '"num_speculative_tokens":4' in added[0]
    assert "- name: SPEC_CONFIG" in deployment
    manifest = out.split(f"{VISION}, OlaresManifest.yaml has changed:")[1].split(f"{VISION}, i18n")[0]
    assert "drafting 4 tokens per step" in manifest and "\x1b[" not in out  # plain when not a terminal


def test_diff_after_a_bump_passes_the_gate(repo: Path) -> None:
    replace_in(repo / "apps/gemma4-vision.yaml", "num_speculative_tokens: 3", "num_speculative_tokens: 4")
    assert run("bump", "--patch")[0] == 0
    code, out, _ = run("diff", "--exit-code")
    assert code == 1 and f"Deployment/{VISION}" in out  # changed, so --exit-code says so
    assert run("diff")[0] == 0  # but the gate passes: the patch release is above the base


def test_diff_markdown_and_json(repo: Path) -> None:
    replace_in(repo / "apps/gemma4-audio.yaml", "ctx_size: 32768", "ctx_size: 16384")
    code, out, _ = run("diff", "--format", "markdown")
    assert code == 1
    assert f"### `{AUDIO}` {V_AUDIO} -> {V_AUDIO} **(version not raised)**" in out
    assert "--ctx-size 32768 -> 16384" in out
    assert f"<details><summary><code>Deployment/{AUDIO}</code> changed</summary>" in out
    assert "```diff" in out and out.count("```") % 2 == 0
    code, out, _ = run("diff", "--format", "json", "apps/gemma4-audio.yaml")
    [entry] = json.loads(out)
    assert (entry["app"], entry["version_raised"]) == (AUDIO, False)
    assert f"Deployment/{AUDIO}" in [c["resource"] for c in entry["changes"]]


def test_no_change_no_output(repo: Path) -> None:
    code, out, _ = run("diff", "--exit-code")
    assert code == 0 and "no rendered change" in out


@pytest.mark.parametrize("breakage", ["yaml", "hand-edited chart"])
def test_refusals_write_nothing(repo: Path, breakage: str) -> None:
    if breakage == "yaml":
        replace_in(repo / "apps/gemma4-audio.yaml", "ctx_size: 32768", "ctx_size: [32768")
    else:
        replace_in(repo / "apps/gemma4-audio.yaml", "ctx_size: 32768", "ctx_size: 16384")
        replace_in(repo / f"charts/{AUDIO}/templates/service.yaml", "name: http", "name: web")
    before = tree_bytes(repo / "apps"), tree_bytes(repo / "charts")
    code, _, err = run("bump", "--patch")
    assert code == 1
    assert ("[yaml]" if breakage == "yaml" else "[bump]") in err
    assert (tree_bytes(repo / "apps"), tree_bytes(repo / "charts")) == before


def test_usage_errors(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    assert run("bump", "apps/gemma4-audio.yaml")[0] == 2  # no part
    assert run("diff", "--base", "no-such-ref")[0] == 2
    outside = tmp_path_factory.mktemp("outside")
    shutil.copytree(APPS, outside / "apps")
    os.chdir(outside)
    assert run("diff")[0] == 2  # not a git repository


def test_lint_base_runs_the_version_gate(repo: Path) -> None:
    replace_in(repo / "apps/gemma4-audio.yaml", "ctx_size: 32768", "ctx_size: 16384")
    code, out, _ = run("lint", "--base", "HEAD", "apps/gemma4-audio.yaml")
    assert code == 1 and "[version-gate]" in out
