from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
APPS = ROOT / "apps"
CHARTS = ROOT / "charts"
APP_FILES = sorted(APPS.glob("*.yaml"))


def spec_version(stem: str) -> str:
    """The version apps/<stem>.yaml carries now, so tests follow the committed apps through their bumps."""
    return str(yaml.safe_load((APPS / f"{stem}.yaml").read_text(encoding="utf-8"))["version"])


def spec_name(spec: Path) -> str:
    """The app name a spec file gives (its chart folder)."""
    return str(yaml.safe_load(spec.read_text(encoding="utf-8"))["name"])


SHARED = ROOT.parent / "shared"  # the design, reference charts and corpus: beside the clone in CI only


def shared(relative: str) -> Path:
    """A path under ../shared, or skip the test (with the reason) on a clone with nothing beside it."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is not here: ../shared lies beside the clone in CI, not on a user's machine")
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite charts/ and tests/golden/ from apps/ instead of comparing"
    )


@pytest.fixture(autouse=True)
def helm_only_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that reaches helm must carry the `helm` mark, so `pytest -m "not helm"` passes on a machine with no
    helm: unmarked tests find none, even here where make test installed it."""
    if request.node.get_closest_marker("helm") is not None:
        return
    import olarespack.helm

    real = olarespack.helm.find_binary
    monkeypatch.setattr(olarespack.helm, "find_binary", lambda name: None if name.startswith("helm") else real(name))


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch copy of the project's inputs (apps/ and charts/) to run commands in."""
    shutil.copytree(APPS, tmp_path / "apps")
    shutil.copytree(CHARTS, tmp_path / "charts")
    return tmp_path


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_cli(cwd: Path | None, *args: str) -> tuple[int, str]:
    """`olarespack ARGS` through its real entry point, in `cwd`; the exit code and everything it printed."""
    from olarespack.cli import main

    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout + result.stderr


GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return out.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """A scratch git repository holding the project's apps and charts, as the working folder."""
    shutil.copytree(APPS, tmp_path / "apps")
    shutil.copytree(CHARTS, tmp_path / "charts")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    old = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(old)


# Modules that boot real engine servers (seconds each): they carry the `engine` mark and run after every quick
# test, and the `boot` tests (smoke: a vLLM boot takes minutes) after them, so a mistake the quick tests catch is
# reported before the boots start; `pytest -m "not engine"` is the quick path.
ENGINE_BOOTS = (
    "test_llama_server_boot",
    "test_llamacpp_kv_real",
    "test_llamacpp_drafter_kv",
    "test_bench_llama_server",
    "test_model_files_fit",
    "test_smoke",
)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    def order(item: pytest.Item) -> int:
        if item.get_closest_marker("boot") is not None:
            return 2
        return 1 if item.get_closest_marker("engine") is not None else 0

    for item in items:
        if item.path.stem in ENGINE_BOOTS or item.get_closest_marker("boot") is not None:
            item.add_marker(pytest.mark.engine)
    items.sort(key=order)  # stable: the order within each group is kept
