"""Helpers that derive spec files from the committed apps, changed in one place."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from conftest import APPS


def app_data(name: str = "gemma4-vision") -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((APPS / f"{name}.yaml").read_text(encoding="utf-8"))
    return copy.deepcopy(data)


def write_spec(folder: Path, data: dict[str, Any], filename: str = "app.yaml") -> Path:
    path = folder / filename
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
