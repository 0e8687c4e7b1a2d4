"""The code around helm, with a fake helm: diff matches rendered resources and reports what changed, lint
turns helm's findings and rendered documents into Problems on the right chart, a failed render is a
problem in the chart (exit 1), and lint needs no helm when no chart reaches its layer. Runs without helm."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import APPS, CHARTS
from fakes import FakeHelm
from olarespack.check.lint import lint_apps
from olarespack.cli import main
from olarespack.core.errors import HelmError
from olarespack.project import render_apps
from olarespack.release.diff import chart_changes
from olarespack.write import read_folder
from specs import app_data, write_spec

VISION = "vllmgemma426ba4bvisionone"


def committed(name: str) -> dict[str, str]:
    return {path: data.decode("utf-8") for path, data in read_folder(CHARTS / name).items()}


def test_diff_reports_the_changed_argument_where_it_runs(tmp_path: Path) -> None:
    data = app_data("gemma4-vision")
    data["engine"]["speculative"]["num_speculative_tokens"] = 4
    (app,) = render_apps([write_spec(tmp_path, data, "gemma4-vision.yaml")])
    changes = {c.key: c for c in chart_changes(FakeHelm(), VISION, committed(VISION), dict(app.chart))}
    deployment = changes[f"Deployment/{VISION}"]
    # one line: the SPEC_CONFIG env of the pod template, as the seed post shows a release
    spec_config = """value: '{"method":"mtp","model":"google/gemma-4-26B-A4B-it-assistant","""
    assert [line[0] + line[1:].strip() for line in deployment.diff if line[:1] in "+-"] == [
        f"""-{spec_config}"num_speculative_tokens":3}}'""",
        f"""+{spec_config}"num_speculative_tokens":4}}'""",
    ]
    assert f"Service/{VISION}" not in changes
    assert "OlaresManifest.yaml" in changes


def test_a_chart_helm_cannot_render_is_a_problem_not_a_missing_tool() -> None:
    with pytest.raises(HelmError) as caught:
        chart_changes(FakeHelm(failing={VISION}), VISION, committed(VISION), committed(VISION))
    assert caught.value.exit_code == 1


def test_lint_puts_helms_findings_on_the_chart_that_has_them() -> None:
    apps = render_apps([APPS / "gemma4-vision.yaml", APPS / "gemma4-audio.yaml"], ["current", "legacy"])
    fake = FakeHelm(findings={VISION: ["[ERROR] templates/: something helm found"]})
    report = lint_apps(apps, [fake])
    found = [(p.file, p.rule) for p in report.problems]  # helm lint's findings are warnings (advice)
    vision = str(APPS / "gemma4-vision.yaml")
    assert {(f"{vision} [current]", "helm-lint"), (f"{vision} [legacy]", "helm-lint")} <= set(found)
    assert not [f for f, rule in found if "audio" in f and rule == "helm-lint"]
    assert ("template", "llamacppgemma4audione") in fake.calls


def test_lint_needs_no_helm_when_every_input_fails_before_it(tmp_path: Path) -> None:
    bad = Path(__file__).parent / "bad-specs" / "gemma4-flash-attn.yaml"
    result = CliRunner(env={"OLARESPACK_HELM": "/nonexistent/helm"}).invoke(main, ["lint", str(bad)])
    assert result.exit_code == 1, result.output
    assert "[gemma4-flash-attn]" in result.output
