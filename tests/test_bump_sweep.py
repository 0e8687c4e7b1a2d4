"""bump and a sweep's record: `bench sweep ... --write` sets a value and records the sweep in the current
version's entry; the setting ships in the next version, so bump moves an unreleased sweep into the entry it
opens. A sweep already at the base (released with its version) stays where it is."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from conftest import git
from olarespack.bench.run import Result, Run, Settings
from olarespack.bench.sweep import Point, Sweep, record
from olarespack.cli import main
from olarespack.core.yamledit import set_scalar
from olarespack.spec.bench_edit import record_bench
from olarespack.spec.load import load_spec

pytestmark = pytest.mark.helm
SPEC = "apps/gemma4-audio.yaml"


def swept(repo: Path) -> dict[str, Any]:
    """The spec as `bench sweep SPEC engine.threads=1,2 --write` leaves it: threads set to the chosen 2, the sweep
    in the current entry (the figures built here, not measured)."""
    path = repo / SPEC
    text = path.read_text(encoding="utf-8")
    settings = Settings(model="m", prompt="p", prompt_name="space-invaders", max_tokens=16, runs=2, warmups=0)

    def measured(rates: list[float]) -> Result:
        return Result(
            "http://127.0.0.1:1",
            settings,
            [Run(i, False, 16, r, "server", 1.0, None, None, None) for i, r in enumerate(rates, start=1)],
        )

    points = [Point(1, measured([10.0, 11.0])), Point(2, measured([20.0, 21.0]))]
    values = record(
        Sweep("engine.threads", (1, 2)),
        points,
        "average",
        settings,
        "llama-server b9101 (CPU build)",
        dt.date(2026, 12, 2),
    )
    text = set_scalar(text, ("engine", "threads"), 2)
    text, _ = record_bench(str(path), text, values, key="sweep")
    path.write_text(text, encoding="utf-8")
    return values


def bump() -> tuple[int, str]:
    result = CliRunner().invoke(main, ["bump", "--minor"], catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr


def entries(repo: Path) -> list[dict[str, Any]]:
    changelog: list[dict[str, Any]] = yaml.safe_load((repo / SPEC).read_text(encoding="utf-8"))["changelog"]
    return changelog


def test_bump_moves_a_sweep_written_since_the_base_into_the_new_entry(repo: Path) -> None:
    before = entries(repo)
    values = swept(repo)
    code, out = bump()
    assert code == 0, out
    after = entries(repo)
    assert after[0]["version"] != before[0]["version"] and after[0]["sweep"] == values
    assert after[1] == before[0]  # the released entry is as it was, without the sweep
    assert "threads" in after[0]["note"]
    assert load_spec(repo / SPEC).changelog[0].sweep is not None


def test_a_sweep_released_with_its_version_stays_in_its_entry(repo: Path) -> None:
    values = swept(repo)
    code, out = bump()
    assert code == 0, out
    git(repo, "commit", "-qam", "release with the sweep")  # the sweep is now at the base, with its version
    text = (repo / SPEC).read_text(encoding="utf-8")
    (repo / SPEC).write_text(set_scalar(text, ("engine", "threads"), 1), encoding="utf-8")
    code, out = bump()
    assert code == 0, out
    after = entries(repo)
    assert "sweep" not in after[0] and after[1]["sweep"] == values
