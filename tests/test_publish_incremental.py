"""Publish follows change: an unchanged republish neither lints nor packages (it needs no helm at all), a
changed app is linted and packaged alone, and a new olarespack re-checks every app but keeps every
published archive it would otherwise rebuild."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import APPS, spec_version, tree_bytes
from olarespack.cli import main
from olarespack.market.publish import STATE_FILE

pytestmark = pytest.mark.helm
NO_HELM = {"OLARESPACK_HELM": "/nonexistent/helm", "OLARESPACK_HELM4": "/nonexistent/helm4"}


def publish(apps: Path, market: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner(env=env).invoke(
        main, ["publish", "--apps-dir", str(apps), "--market-dir", str(market)], catch_exceptions=False
    )
    return result.exit_code, result.stdout + result.stderr


@pytest.fixture
def published(tmp_path: Path) -> tuple[Path, Path]:
    apps, market = tmp_path / "apps", tmp_path / "market"
    shutil.copytree(APPS, apps)
    code, output = publish(apps, market)
    assert code == 0, output
    return apps, market


def test_an_unchanged_republish_needs_no_helm(published: tuple[Path, Path]) -> None:
    apps, market = published
    before = tree_bytes(market)
    code, output = publish(apps, market, NO_HELM)
    assert code == 0, output
    assert tree_bytes(market) == before


def test_a_changed_app_alone_is_linted_and_packaged(published: tuple[Path, Path]) -> None:
    apps, market = published
    spec = apps / "gemma4-audio.yaml"
    text = spec.read_text(encoding="utf-8")
    old = spec_version("gemma4-audio")
    major, minor, patch = old.split(".")
    new = f"{major}.{minor}.{int(patch) + 1}"
    text = text.replace(f"\nversion: {old}\n", f"\nversion: {new}\n").replace("threads: 8", "threads: 4")
    spec.write_text(
        text.replace("\nchangelog:\n", f"\nchangelog:\n  - version: {new}\n    note: threads 4\n"), encoding="utf-8"
    )
    code, output = publish(apps, market, NO_HELM)
    assert code == 3 and "helm" in output  # the changed app needs helm, and only it does
    code, output = publish(apps, market)
    assert code == 0, output
    assert f"llamacppgemma4audione {new}: current" in output and "(created)" in output
    assert output.count("(unchanged)") == 4  # the two other apps, both generations
    # never silent, and every hash says what it is
    assert "... linting 1 changed app(s) with helm: llamacppgemma4audione" in output
    assert "... 2 app(s) unchanged since the last publish" in output
    assert f"... packaged llamacppgemma4audione {new} (legacy)" in output
    assert "current chart sha256 " in output and "current catalog hash " in output
    state = json.loads((market / STATE_FILE).read_bytes())
    assert set(state["archives"]["current"]) == {
        f"llamacppgemma4audione-{new}.tgz",
        f"vllmgemma4dflashone-{spec_version('gemma4-dflash')}.tgz",
        f"vllmgemma426ba4bvisionone-{spec_version('gemma4-vision')}.tgz",
    }


def test_another_olarespack_rechecks_but_keeps_the_archives(published: tuple[Path, Path]) -> None:
    apps, market = published
    state_file = market / STATE_FILE
    state = json.loads(state_file.read_bytes())
    state["tools"] = "an older olarespack"
    state_file.write_text(json.dumps(state))
    archives = {p: data for p, data in tree_bytes(market / "charts").items()}
    code, output = publish(apps, market, NO_HELM)
    assert code == 3  # the apps are linted again, which needs helm
    code, output = publish(apps, market)
    assert code == 0, output
    assert tree_bytes(market / "charts") == archives
    assert json.loads(state_file.read_bytes())["tools"] != "an older olarespack"


def test_publish_never_moves_an_app_back_without_saying_so(published: tuple[Path, Path]) -> None:
    """The market offers the audio app at its version; a spec carrying an older one (a branch behind main, a
    revert) is refused naming both, and published only with --allow-older (a rollback on purpose)."""
    apps, market = published
    spec = apps / "gemma4-audio.yaml"
    now = spec_version("gemma4-audio")
    major, minor, patch = (int(n) for n in now.split("."))
    older = f"{major}.{minor - 1 if minor else 0}.{patch if minor else max(patch - 1, 0)}"
    assert older != now
    import datetime

    import semver
    import yaml

    data = yaml.safe_load(spec.read_text(encoding="utf-8"))  # the spec as a branch behind main has it
    data["version"] = older
    data["changelog"] = [
        e for e in data["changelog"] if semver.Version.parse(e["version"]) < semver.Version.parse(older)
    ]
    data["changelog"].insert(0, {"version": older, "date": datetime.date(2026, 12, 1), "note": "back"})
    spec.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    before = tree_bytes(market)
    code, output = publish(apps, market)
    assert code == 1 and f"{older} is older than {now}" in output and "--allow-older" in output, output
    assert tree_bytes(market) == before  # nothing written
    result = CliRunner().invoke(
        main, ["publish", "--apps-dir", str(apps), "--market-dir", str(market), "--allow-older"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    offered = json.loads((market / "catalog.json").read_bytes())["generations"]["current"]["charts"]
    assert offered["llamacppgemma4audione"] == f"llamacppgemma4audione-{older}.tgz"
