"""Legacy manifests written as templates (oac manifest.go renderManifestTemplate, pipeline.go
dualOwnerPipeline): below olaresManifest.version 0.12.0 Olares renders OlaresManifest.yaml with Helm's
engine before reading it, with `.Values.admin` and `.Values.bfl.username` set, and validates both installs:
the admin's own (owner == admin) and another user's. A manifest that branches on the two is YAML only once
rendered. Pure: the renders are helm's; here are what it renders and what becomes of the result."""

from __future__ import annotations

from typing import Any

from olarespack.core.chart import MANIFEST, Chart
from olarespack.olares.chartfiles import peek_modern

# (owner, admin) of the two installs dualOwnerPipeline validates; the first is the manifest the chart keeps
SCENARIOS = (("admin", "admin"), ("owner", "admin"))
TEMPLATE = f"templates/{MANIFEST}"
CHART_YAML = "apiVersion: v2\nname: chart\nversion: 0.0.1\n"


def templated(chart: Chart) -> bool:
    """A legacy manifest that is not YAML until rendered (a modern one is refused as it stands)."""
    text = chart.files.get(MANIFEST)
    return bool(chart.manifest_error) and text is not None and "{{" in text and not peek_modern(text)


def manifest_chart(chart: Chart) -> dict[str, str]:
    """The one-template chart oac hands Helm's engine: the manifest as its only template."""
    return {"Chart.yaml": CHART_YAML, TEMPLATE: chart.files[MANIFEST]}


def manifest_values(owner: str, admin: str) -> dict[str, Any]:
    return {"admin": admin, "bfl": {"username": owner}}


def rendered_text(stdout: str) -> str:
    """helm template's output without its `---` and `# Source:` header lines."""
    lines = stdout.split("\n")
    while lines and (lines[0].strip() in ("", "---") or lines[0].startswith("# Source:")):
        lines.pop(0)
    return "\n".join(lines)


def with_manifest(chart: Chart, text: str) -> Chart:
    """The chart as Olares reads it: its files, with the manifest rendered."""
    return Chart(chart.name, {**chart.files, MANIFEST: text}, chart.label)
