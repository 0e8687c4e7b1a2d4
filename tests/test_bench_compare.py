"""Releases compared: a version's bench record against the next older one, in the upgrade description and in
`bench --record`'s output, only when both were measured the same way."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from conftest import APPS
from olarespack.fit.record import compared
from olarespack.render.texts import changelog_text
from olarespack.spec.load import load_spec
from olarespack.spec.models import BenchRecord


def record(tps: float, **changed: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "tps_avg": tps,
        "tps_peak": tps + 1,
        "tps_min": tps - 1,
        "tps_sigma": 0.5,
        "tps_source": "server",
        "series": [tps - 1, tps, tps + 1],
        "runs": 3,
        "warmups": 2,
        "tokens": 2000,
        "prompt": "space-invaders",
        "temperature": 0.6,
        "top_p": 0.95,
        "engine_release": "b9101",
        "hardware": "rtx5090-laptop",
        "context": 32768,
        "settings_hash": "0123456789abcdef",
        "date": dt.date(2026, 12, 1),
        "gpu_mode": "exclusive",
    }
    return {**values, **changed}


def test_two_releases_measured_the_same_way_are_compared() -> None:
    old = BenchRecord.model_validate(record(135.0))
    new = BenchRecord.model_validate(record(250.5, engine_release="b11434", settings_hash="fedcba9876543210"))
    said = compared("1.1.0", new, "1.0.4", old)
    assert said.startswith("250.5 t/s, +86% against 1.0.4's 135 t/s (engine b9101 -> b11434, settings changed")
    assert "GPU exclusive" in said


def test_records_measured_another_way_say_why_they_are_not_compared() -> None:
    old = BenchRecord.model_validate(record(135.0, gpu_mode="time-slicing"))
    new = BenchRecord.model_validate(record(250.5, prompt="other@12345678"))
    said = compared("1.1.0", new, "1.0.4", old)
    assert said.startswith("250.5 t/s; not compared with 1.0.4's 135 t/s: measured another way")
    assert "prompt space-invaders against other@12345678" in said and "GPU mode time-slicing against exclusive" in said
    unknown = BenchRecord.model_validate(record(135.0, gpu_mode=None))
    same_prompt = new.model_copy(update={"prompt": "space-invaders"})
    assert "(GPU mode not recorded against exclusive)" in compared("1.1.0", same_prompt, "1.0.4", unknown)
    both_unknown = same_prompt.model_copy(update={"gpu_mode": None})
    assert "(the GPU mode was not recorded)" in compared("1.1.0", both_unknown, "1.0.4", unknown)


def test_the_upgrade_description_says_how_the_figures_moved(tmp_path: Path) -> None:
    data = yaml.safe_load((APPS / "gemma4-audio.yaml").read_text(encoding="utf-8"))
    data["changelog"][0]["bench"] = record(250.5, engine_release="b11434")
    data["changelog"][1]["bench"] = record(135.0)
    spec_file = tmp_path / "gemma4-audio.yaml"
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    text = changelog_text(load_spec(spec_file))
    newest, older = text.split("\n\n")[:2]
    version, previous = data["changelog"][0]["version"], data["changelog"][1]["version"]
    assert newest.endswith(
        f" Measured: 250.5 t/s, +86% against {previous}'s 135 t/s (engine b9101 -> b11434, same "
        "settings, same prompt space-invaders, rtx5090-laptop, GPU exclusive)."
    )
    assert newest.startswith(f"v{version}: ") and "Measured" not in older  # the oldest record has nothing to compare
