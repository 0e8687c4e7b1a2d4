"""Whether an app joins Olares' LLM gateway (options.LLMGatewaySupported, as all 17 official v3 LLM engine
apps set it): on by default for an engine that serves the OpenAI API, off when the spec says so, and never in
the legacy manifest, which has no such field (Olares before 1.12.6 refuses it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APP_FILES
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from specs import app_data, write_spec


def options(tmp_path: Path, app: str, olares: dict[str, Any] | None, generation: str) -> dict[str, Any]:
    data = app_data(app)
    if olares is not None:
        data["olares"] = olares
    path = write_spec(tmp_path, data)
    chart = render_chart(load_spec(path), str(path), generation)  # type: ignore[arg-type]
    found: dict[str, Any] = yaml.safe_load(chart["OlaresManifest.yaml"])["options"]
    return found


@pytest.mark.parametrize("app", [p.stem for p in APP_FILES])
def test_an_openai_engine_joins_the_gateway_by_default(tmp_path: Path, app: str) -> None:
    assert options(tmp_path, app, None, "current").get("LLMGatewaySupported") is True
    assert "LLMGatewaySupported" not in options(tmp_path, app, None, "legacy")


def test_a_spec_can_keep_its_app_out_of_the_gateway(tmp_path: Path) -> None:
    assert "LLMGatewaySupported" not in options(tmp_path, "gemma4-audio", {"llm_gateway": False}, "current")
    assert options(tmp_path, "gemma4-audio", {"llm_gateway": True}, "current")["LLMGatewaySupported"] is True
