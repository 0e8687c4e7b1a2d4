"""A chart folder's files as Olares' linter reads them before rendering anything: the layout and names
(oac internal/chartfolder/folder.go), the manifest parsed with template syntax refused outside YAML strings
(template_syntax.go), and the scans of the templates (chart.go checkChartTemplateRules, appdata.go,
chartscan.go). Pure: a Chart in, Problems out."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import yaml

from olarespack.core.chart import MANIFEST, Chart
from olarespack.core.errors import Problem
from olarespack.core.yamltext import load_yaml
from olarespack.olares.generations import APP_NAME, RESERVED_APP_NAMES
from olarespack.olares.manifest import validate_manifest
from olarespack.olares.versions import api_version, is_modern

_BLOCK_HEADER = re.compile(r"(?:^|[\s:\-])[|>][+\-0-9]*\s*(?:#.*)?$")
_TEMPLATE = re.compile(r"\{\{|\}\}")
_OLARES_USER = re.compile(r"\bOLARES_USER")


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _problem(
    chart: Chart, path: str, field: str, message: str, fix: str, rule: str, severity: str = "error"
) -> Problem:
    return Problem(
        chart.where(path), field, message, fix, rule=rule, severity="warning" if severity == "warning" else "error"
    )


def _chart_yaml(chart: Chart) -> dict[str, Any]:
    try:
        data = load_yaml(chart.files.get("Chart.yaml", "")) or {}
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def mask_strings(text: str) -> list[str]:
    """maskYAMLStringRegions: each line with the inside of quoted strings and block scalars blanked, so
    braces that are text are not taken for template syntax."""
    masked: list[str] = []
    block_indent: int | None = None
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None:
            if not line.strip() or indent > block_indent:
                masked.append(" " * len(line))
                continue
            block_indent = None
        out: list[str] = []
        quote: str | None = None
        i = 0
        while i < len(line):
            char = line[i]
            if quote == '"':
                if char == "\\" and i + 1 < len(line):
                    out.append("  ")
                    i += 2
                    continue
                if char == '"':
                    quote = None
                out.append(char if char == '"' else " ")
            elif quote == "'":
                if char == "'" and line[i + 1 : i + 2] == "'":
                    out.append("  ")
                    i += 2
                    continue
                if char == "'":
                    quote = None
                out.append(char if char == "'" else " ")
            elif char in "\"'":
                quote = char
                out.append(char)
            elif char == "#" and (i == 0 or line[i - 1] in " \t"):
                break
            else:
                out.append(char)
            i += 1
        kept = "".join(out)
        if _BLOCK_HEADER.search(kept.rstrip()):
            block_indent = indent
        masked.append(kept)
    return masked


def peek_modern(text: str) -> bool:
    """manifest.Peek: the version read line by line, for a manifest that does not parse as YAML."""
    match = re.search(r"^olaresManifest\.version:\s*['\"]?([^'\"\s#]+)", text, re.M)
    return bool(match) and is_modern({"olaresManifest.version": match.group(1) if match else ""})


def file_problems(chart: Chart) -> list[Problem]:
    """CheckLayout, the manifest's parse and, for 0.12.0 and later, its template-syntax gate."""
    problems: list[Problem] = []
    if not APP_NAME.match(chart.name):
        problems.append(
            _problem(
                chart,
                "",
                "folder",
                f"invalid folder name {chart.name!r}: must match ^[a-z0-9]{{1,30}}$",
                "rename the folder and the app",
                "olares-name",
            )
        )
    elif chart.name in RESERVED_APP_NAMES:  # oac checks these only on a PR title; the install refuses them
        problems.append(
            _problem(
                chart,
                "",
                "folder",
                f"{chart.name!r} is a name Olares reserves",
                "rename the app",
                "olares-name",
                "warning",
            )
        )
    for required in ("Chart.yaml", "values.yaml"):
        if required not in chart.files:
            problems.append(_problem(chart, required, "", f"missing {required}", f"add {required}", "olares-files"))
    if not any(path.startswith("templates/") for path in chart.files):
        problems.append(
            _problem(chart, "templates", "", "missing templates folder", "add the chart's templates", "olares-files")
        )
    if chart.manifest_error:
        problems.append(_problem(chart, MANIFEST, "", chart.manifest_error, "fix the YAML", "olares-files"))
    text = chart.files.get(MANIFEST)
    if text is not None and (is_modern(chart.manifest) or (chart.manifest_error and peek_modern(text))):
        for number, line in enumerate(mask_strings(text), 1):
            if _TEMPLATE.search(line):
                problems.append(
                    _problem(
                        chart,
                        MANIFEST,
                        f"line {number}",
                        "template syntax outside any YAML string: Olares reads a 0.12.0 manifest as plain YAML",
                        "quote the value or move it into a | or > block scalar",
                        "olares-manifest-template",
                    )
                )
                break
    return problems


def consistency_problems(chart: Chart) -> list[Problem]:
    """validateChartFields and CheckConsistency: Chart.yaml, folder and manifest agree on name and version."""
    problems: list[Problem] = []
    chart_yaml = _chart_yaml(chart)
    for key in ("apiVersion", "name", "version"):
        if not str(chart_yaml.get(key) or "").strip():
            problems.append(
                _problem(chart, "Chart.yaml", key, f"{key} field empty in Chart.yaml", f"set {key}", "olares-files")
            )
    metadata = _map(chart.manifest.get("metadata"))
    name, chart_name = str(metadata.get("name", "")), str(chart_yaml.get("name", ""))
    if not chart.name == chart_name == name:
        problems.append(
            _problem(
                chart,
                MANIFEST,
                "metadata.name",
                f"folder {chart.name!r}, Chart.yaml name {chart_name!r} and metadata.name {name!r} must be equal",
                "use one name",
                "olares-name",
            )
        )
    version, chart_version = str(metadata.get("version", "")), str(chart_yaml.get("version", ""))
    if version != chart_version:
        problems.append(
            _problem(
                chart,
                MANIFEST,
                "metadata.version",
                f"{version!r} differs from Chart.yaml version {chart_version!r}",
                "make them equal",
                "olares-version",
            )
        )
    return problems


def scan_problems(chart: Chart) -> list[Problem]:
    """checkPermissionTemplateUsage, checkV3OLARESUserInChart and checkWorkloadReplicaValues."""
    problems: list[Problem] = []
    manifest = chart.manifest
    permission = _map(manifest.get("permission"))
    templates = {
        path: text
        for path, text in sorted(chart.files.items())
        if path.startswith("templates/") and path.endswith((".yaml", ".yml"))
    }
    uses = (
        ("userspace.appdata", "appData", True),
        ("userspace.appcommon", "appCommon", True),
        ("sharedlib", "externalData", is_modern(manifest)),
    )
    for needle, key, applies in uses:
        user = next((path for path, text in templates.items() if f".values.{needle}" in text.lower()), None)
        if applies and user and not permission.get(key):
            problems.append(
                _problem(
                    chart,
                    MANIFEST,
                    f"permission.{key}",
                    f"{user} reads .Values.{needle} but permission.{key} is not set",
                    f"set permission.{key}: true",
                    "olares-permission",
                )
            )
    if api_version(manifest).lower() == "v3":
        for path, text in sorted(chart.files.items()):
            parts = PurePosixPath(path)
            scanned = parts.name in ("values.yaml", "values.yml") or (
                parts.suffix in (".yaml", ".yml") and parts.parent.name == "templates"
            )
            if scanned and parts.name != MANIFEST and _OLARES_USER.search(text):
                problems.append(
                    _problem(
                        chart,
                        path,
                        "",
                        "mentions OLARES_USER: apiVersion v3 apps must not use OLARES_USER_* names in chart files",
                        "declare envs[].envName in the manifest and read .Values.olaresEnv.<envName>",
                        "olares-user-env",
                    )
                )
    replicas = manifest.get("workloadReplicas")
    if isinstance(replicas, dict) and replicas:
        try:
            values = load_yaml(chart.files.get("values.yaml", "")) or {}
        except yaml.YAMLError:
            values = {}
        workloads = _map(_map(values).get("workloads"))
        for name in sorted(map(str, replicas)):
            entry = workloads.get(name)
            if not isinstance(entry, dict) or "replicaCount" not in entry:
                problems.append(
                    _problem(
                        chart,
                        "values.yaml",
                        f"workloads.{name}.replicaCount",
                        f"values.yaml must define workloads.{name}.replicaCount",
                        "add replicaCount: 1",
                        "olares-workload-replicas",
                    )
                )
    return problems


def chart_problems(chart: Chart) -> list[Problem]:
    """Everything oac checks before rendering, on a chart folder's files."""
    problems = file_problems(chart)
    if not chart.manifest:
        return problems
    return problems + validate_manifest(chart) + consistency_problems(chart) + scan_problems(chart)
