"""The seams an engine package fills are typed by its spec model: a smoke is `EngineSmoke[TheSpec]`, abstract in
every step, so a stub engine whose smoke lacks a step, or takes another engine's spec, fails mypy where its SMOKE
is made (it used to pass mypy and the architecture test, then `smoke --tiny` exited 4 with an empty message)."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest

import olarespack.engines
from conftest import ROOT
from olarespack.engines.smoke import EngineSmoke


@pytest.mark.parametrize("kind", sorted(olarespack.engines.ENGINES))
def test_each_engines_smoke_is_typed_by_its_spec(kind: str) -> None:
    engine = olarespack.engines.ENGINES[kind]
    smoke = engine.smoke()
    [base] = [b for b in type(smoke).__orig_bases__ if typing.get_origin(b) is EngineSmoke]  # type: ignore[attr-defined]
    assert typing.get_args(base) == (engine.model,)  # type: ignore[attr-defined]


def test_a_smoke_missing_a_step_cannot_be_made() -> None:
    class Half(EngineSmoke):  # type: ignore[type-arg]
        pass

    with pytest.raises(TypeError, match="abstract"):
        Half()  # type: ignore[abstract]


STUB = """
from olarespack.engines.smoke import EngineSmoke
from olarespack.engines.llamacpp.spec import LlamaCppEngine
from olarespack.engines.vllm.smoke import VllmSmoke


class Stub(EngineSmoke[LlamaCppEngine]):
    pass


class Borrowed(VllmSmoke):
    def requests(self, engine: LlamaCppEngine, files: object) -> list[object]:
        return []


SMOKE = Stub()
"""


def test_mypy_refuses_a_stub_smoke(tmp_path: Path) -> None:
    planted = tmp_path / "stub_smoke.py"
    planted.write_text(STUB, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(planted)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"MYPYPATH": str(ROOT / "src"), "PATH": str(Path(sys.executable).parent)},
    )
    assert 'Cannot instantiate abstract class "Stub"' in done.stdout, done.stdout + done.stderr
    assert "violates the Liskov substitution principle" in done.stdout, done.stdout


def test_a_flag_rows_owner_is_a_field_of_its_spec() -> None:
    """Each row names the spec field it renders; a typo there (`engine.max_model_lenn`) rendered, built and linted
    without a word. The registry refuses it when the tables are built (engines/__init__.py)."""
    from olarespack.engines.base import Flag, owner_problems
    from olarespack.engines.llamacpp.spec import LlamaCppEngine

    for engine in olarespack.engines.ENGINES.values():
        assert owner_problems(engine.spec_model, engine.flags) == []  # type: ignore[attr-defined]
    rows = (
        Flag("--ctx-size", "engine.ctx_sise", lambda e: 1),
        Flag("--spec-draft-n-max", "engine.speculative.max", lambda e: 1),
        Flag("--alias", "alias", lambda e: 1),
        Flag("--port", "chart", lambda e: 1),
        Flag("--draft", "engine.speculative.draft_max", lambda e: 1),
    )
    assert owner_problems(LlamaCppEngine, rows) == [
        "--ctx-size: owner 'engine.ctx_sise' is no field of LlamaCppEngine",
        "--spec-draft-n-max: owner 'engine.speculative.max' is no field of LlamaCppEngine",
        "--alias: owner 'alias' is no field of LlamaCppEngine",
    ]
