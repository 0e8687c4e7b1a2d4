"""One spec as every command takes it (project.load_resolved): loaded, its context resolved as the build
resolves it; a context that does not fit is the build's error, or returned to a command that may fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from olarespack.core.errors import ProblemsError
from olarespack.project import load_resolved
from specs import app_data, write_spec


def test_an_auto_context_is_resolved_once_for_every_command(tmp_path: Path) -> None:
    data = app_data("gemma4-vision")
    data["engine"]["max_model_len"] = "auto"
    loaded = load_resolved(write_spec(tmp_path, data))
    assert isinstance(loaded.spec.engine.max_model_len, int) and loaded.spec.engine.max_model_len > 0
    assert loaded.errors == []


def test_a_context_that_does_not_fit_is_the_builds_error_or_returned(tmp_path: Path) -> None:
    data = app_data("gemma4-vision")
    data["engine"]["max_model_len"] = 262144
    path = write_spec(tmp_path, data)
    with pytest.raises(ProblemsError) as raised:
        load_resolved(path)
    assert [p.rule for p in raised.value.problems] == ["context-fit"]
    lenient = load_resolved(path, "apps/vision.yaml", strict=False)
    assert lenient.spec.engine.max_model_len == 262144  # as written: a move or a sweep may make it fit
    assert [(p.file, p.rule) for p in lenient.errors] == [("apps/vision.yaml", "context-fit")]
