"""Whether an app joins Olares' LLM gateway, Router (options.LLMGatewaySupported). Router calls an app through
its shared entrance (DOMAIN.md 6b); the single-Deployment charts have none, so an app listed there could not be
called: the flag is off, a spec asking for it is refused with the reason, and the legacy manifest never has it
(Olares before 1.12.6 refuses the field). The pinned-model shape has one: tests/test_pinned_model.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APP_FILES
from olarespack.core.errors import ProblemsError
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
def test_an_app_without_a_shared_entrance_stays_out_of_router(tmp_path: Path, app: str) -> None:
    """The shipped apps said LLMGatewaySupported: true with no sharedEntrances: listed in Router, not callable."""
    for generation in ("current", "legacy"):
        manifest_options = options(tmp_path, app, None, generation)
        assert "LLMGatewaySupported" not in manifest_options


def test_a_spec_asking_for_router_is_told_why_not(tmp_path: Path) -> None:
    data = app_data("gemma4-audio")
    data["olares"] = {"llm_gateway": True}
    path = write_spec(tmp_path, data)
    with pytest.raises(ProblemsError) as raised:
        load_spec(path)
    [problem] = [p for p in raised.value.problems if p.rule == "llm-gateway-route"]
    assert problem.path == "olares.llm_gateway" and "shared entrance" in problem.message
