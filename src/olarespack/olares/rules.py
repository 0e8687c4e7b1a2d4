"""Olares' own offline chart rules (those of `olares-cli chart lint`), on a chart folder's files and on its
manifests as rendered with Olares' values. Pure: texts and parsed documents in, Problems out."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import semver
import yaml

from olarespack import quantity
from olarespack.chart import MANIFEST, Chart
from olarespack.errors import Problem
from olarespack.olares.generations import RESERVED_APP_NAMES
from olarespack.yamltext import load_yaml

NAME_RE = re.compile(r"^[a-z0-9]{1,30}$")
ENTRANCE_NAME_RE = re.compile(r"^[a-z0-9A-Z-]*$")
HOST_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])$")
ENTRANCE_TITLE_RE = re.compile(r"^[a-zA-Z0-9-\s]*$")
GPU_MODES = frozenset({"nvidia", "amd-gpu"})
FLAT_FIELDS = ("requiredCpu", "limitedCpu", "requiredMemory", "limitedMemory", "requiredDisk", "limitedDisk",
               "requiredGpu", "limitedGpu")
PAIRS = (("requiredCpu", "limitedCpu", quantity.parse_cpu), ("requiredMemory", "limitedMemory", quantity.parse_bytes),
         ("requiredDisk", "limitedDisk", quantity.parse_bytes),
         ("requiredGPUMemory", "limitedGPUMemory", quantity.parse_bytes),
         ("requiredGpu", "limitedGpu", quantity.parse_bytes))
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass",
                            "CustomResourceDefinition", "PriorityClass", "MutatingWebhookConfiguration",
                            "ValidatingWebhookConfiguration", "APIService", "IngressClass", "RuntimeClass"})
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet"})


def _problem(chart: Chart, path: str, field_path: str, message: str, fix: str, rule: str,
             severity: str = "error") -> Problem:
    return Problem(chart.where(path), field_path, message, fix, rule=rule,
                   severity="warning" if severity == "warning" else "error")


def generation_of(manifest: dict[str, Any]) -> str:
    return "current" if str(manifest.get("apiVersion", "")) == "v3" else "legacy"


def file_problems(chart: Chart) -> list[Problem]:
    """The manifest exists, parses, and holds no template outside a quoted string."""
    text = chart.files.get(MANIFEST)
    if text is None:
        return [_problem(chart, MANIFEST, "", "missing", "add an OlaresManifest.yaml", "olares-files")]
    problems = [_problem(chart, MANIFEST, f"line {n}", "{{ outside a quoted string: Olares reads the "
                         "manifest literally", "quote the value or drop the template", "olares-manifest-template")
                for n, line in enumerate(text.splitlines(), 1)
                if "{{" in re.sub(r"'[^']*'|\"(?:[^\"\\\\]|\\\\.)*\"", "", line.split(" #")[0])]
    if chart.manifest_error:
        problems.append(_problem(chart, MANIFEST, "", chart.manifest_error, "fix the YAML", "olares-files"))
    return problems


def manifest_problems(chart: Chart) -> list[Problem]:
    """The rules that need only the chart's files."""
    problems = file_problems(chart)
    if not chart.manifest:
        return problems
    for check in (_names, _versions, _metadata, _entrances, _resources, _permissions, _generation_rules):
        problems += check(chart)
    return problems


def _chart_yaml(chart: Chart) -> dict[str, Any]:
    try:
        data = load_yaml(chart.files.get("Chart.yaml", "")) or {}
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _names(chart: Chart) -> Iterator[Problem]:
    metadata = chart.manifest.get("metadata") or {}
    name = str(metadata.get("name", ""))
    if not NAME_RE.match(chart.name) or chart.name in RESERVED_APP_NAMES:
        yield _problem(chart, "", "folder", f"{chart.name!r} must match [a-z0-9]{{1,30}} and not be reserved",
                       "rename the folder and the app", "olares-name")
    chart_name = str(_chart_yaml(chart).get("name", ""))
    if not (chart.name == chart_name == name):
        yield _problem(chart, "OlaresManifest.yaml", "metadata.name", f"folder {chart.name!r}, Chart.yaml name "
                       f"{chart_name!r} and metadata.name {name!r} must be equal", "use one name", "olares-name")


def _versions(chart: Chart) -> Iterator[Problem]:
    chart_version = str(_chart_yaml(chart).get("version", ""))
    version = str((chart.manifest.get("metadata") or {}).get("version", ""))
    for label, value, path in (("Chart.yaml version", chart_version, "Chart.yaml"),
                               ("metadata.version", version, "OlaresManifest.yaml")):
        try:
            semver.Version.parse(value)
        except ValueError:
            yield _problem(chart, path, "version", f"{label} {value!r} is not SemVer", "write MAJOR.MINOR.PATCH",
                           "olares-version")
    if chart_version != version:
        yield _problem(chart, "OlaresManifest.yaml", "metadata.version", f"{version!r} differs from Chart.yaml "
                       f"version {chart_version!r}", "make them equal", "olares-version")


def _metadata(chart: Chart) -> Iterator[Problem]:
    metadata = chart.manifest.get("metadata") or {}
    title = str(metadata.get("title", ""))
    if not 1 <= len(title) <= 30:
        yield _problem(chart, "OlaresManifest.yaml", "metadata.title", f"{len(title)} characters; the market takes "
                       "1-30", "shorten the title", "olares-title")
    if not metadata.get("description"):
        yield _problem(chart, "OlaresManifest.yaml", "metadata.description", "missing", "add a one-line description",
                       "olares-description")
    if not re.match(r"^https?://\S+$", str(metadata.get("icon", ""))):
        yield _problem(chart, "OlaresManifest.yaml", "metadata.icon", "must be an http(s) URL", "point it at a "
                       "hosted PNG", "olares-icon")
    if not metadata.get("categories"):
        yield _problem(chart, "OlaresManifest.yaml", "metadata.categories", "missing", "add categories: [AI]",
                       "olares-categories")


def _entrances(chart: Chart) -> Iterator[Problem]:
    entrances = chart.manifest.get("entrances") or []
    if not 1 <= len(entrances) <= 10:
        yield _problem(chart, "OlaresManifest.yaml", "entrances", f"{len(entrances)} entrances; Olares takes 1-10",
                       "declare the app's web or API entrance", "olares-entrances")
    seen: set[str] = set()
    for i, entrance in enumerate(entrances):
        at = f"entrances[{i}]"
        name = str(entrance.get("name", ""))
        if not name or len(name) > 63 or not ENTRANCE_NAME_RE.match(name) or name in seen:
            yield _problem(chart, "OlaresManifest.yaml", f"{at}.name", f"{name!r} must be unique, at most 63 "
                           "letters, digits or dashes", "rename it", "olares-entrances")
        seen.add(name)
        if not HOST_RE.match(str(entrance.get("host", ""))):
            yield _problem(chart, "OlaresManifest.yaml", f"{at}.host", "must be a Service name", "use the name of "
                           "the Service in front of the app", "olares-entrances")
        port = entrance.get("port")
        if not isinstance(port, int) or port < 1:
            yield _problem(chart, "OlaresManifest.yaml", f"{at}.port", f"{port!r} is not a port", "use the "
                           "Service's port", "olares-entrances")
        title = str(entrance.get("title", ""))
        if not 1 <= len(title) <= 30:
            yield _problem(chart, "OlaresManifest.yaml", f"{at}.title", f"{len(title)} characters; Olares takes "
                           "1-30", "shorten it", "olares-entrance-title")
        elif not ENTRANCE_TITLE_RE.match(title):
            yield _problem(chart, "OlaresManifest.yaml", f"{at}.title", f"{title!r}: Olares before 1.12.6 refuses "
                           "anything but letters, digits, spaces and dashes", "drop the dots and brackets",
                           "olares-entrance-title", severity="warning")
        if entrance.get("authLevel", "private") not in ("public", "private", "internal"):
            yield _problem(chart, "OlaresManifest.yaml", f"{at}.authLevel", "must be public, private or internal",
                           "pick one", "olares-entrances")
        if entrance.get("openMethod", "default") not in ("default", "iframe", "window"):
            yield _problem(chart, "OlaresManifest.yaml", f"{at}.openMethod", "must be default, iframe or window",
                           "pick one", "olares-entrances")


def accelerator_modes(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(mode, the requirement fields of that mode, their field path); flat legacy fields are mode nvidia."""
    spec = manifest.get("spec") or {}
    entries = spec.get("accelerator")
    if isinstance(entries, list) and entries:
        return [(str(e.get("mode", "")), e, f"spec.accelerator[{i}]") for i, e in enumerate(entries)]
    return [("nvidia", spec, "spec")]


def _resources(chart: Chart) -> Iterator[Problem]:
    spec = chart.manifest.get("spec") or {}
    if spec.get("accelerator") and any(f in spec for f in FLAT_FIELDS):
        yield _problem(chart, "OlaresManifest.yaml", "spec", "mixes flat requirement fields with accelerator[]",
                       "keep only accelerator[] (current) or only the flat fields (legacy)", "olares-accelerator")
    for mode, fields, at in accelerator_modes(chart.manifest):
        if mode == "nvidia" and "amd64" not in (spec.get("supportArch") or []):
            yield _problem(chart, "OlaresManifest.yaml", "spec.supportArch", "nvidia mode needs amd64",
                           "add amd64", "olares-accelerator")
        if mode not in GPU_MODES and ("requiredGPUMemory" in fields or "limitedGPUMemory" in fields):
            yield _problem(chart, "OlaresManifest.yaml", at, f"GPU memory fields on mode {mode!r}",
                           "declare GPU memory only on nvidia or amd-gpu modes", "olares-accelerator")
        for required, limited, parse in PAIRS:
            if required in fields and limited in fields:
                try:
                    low, high = parse(str(fields[required])), parse(str(fields[limited]))
                except ValueError as exc:
                    yield _problem(chart, "OlaresManifest.yaml", f"{at}.{required}", str(exc), "write a quantity",
                                   "olares-accelerator")
                    continue
                if high < low:
                    yield _problem(chart, "OlaresManifest.yaml", f"{at}.{limited}", f"below {required}",
                                   f"raise it to at least {fields[required]}", "olares-accelerator")


def _permissions(chart: Chart) -> Iterator[Problem]:
    permission = chart.manifest.get("permission") or {}
    templates = "".join(text for path, text in chart.files.items() if path.startswith("templates/"))
    for key in ("appData", "appCommon"):
        if f".Values.userspace.{key}" in templates and not permission.get(key):
            yield _problem(chart, "OlaresManifest.yaml", f"permission.{key}", f"templates use "
                           f".Values.userspace.{key}", f"set permission.{key}: true", "olares-permission")


def _generation_rules(chart: Chart) -> Iterator[Problem]:
    manifest = chart.manifest
    version = str(manifest.get("olaresManifest.version", ""))
    current = generation_of(manifest) == "current"
    expected = "0.12.0" if current else "0.10.0"
    if version != expected:
        # a known version on the wrong generation is a mix Olares refuses; other versions it may know
        known = version in ("0.12.0", "0.10.0")
        yield _problem(chart, "OlaresManifest.yaml", "olaresManifest.version", f"{version!r} with apiVersion "
                       f"{manifest.get('apiVersion')!r}", f"use '{expected}'", "olares-generation",
                       severity="error" if known else "warning")
    dependencies = (manifest.get("options") or {}).get("dependencies") or []
    olares = [d for d in dependencies if d.get("name") == "olares" and d.get("type") == "system"]
    want = ">=1.12.6-0" if current else ">=1.12.3-0"
    if not olares:
        yield _problem(chart, "OlaresManifest.yaml", "options.dependencies", "no olares system dependency",
                       f"add {{name: olares, version: '{want}', type: system}}", "olares-dependency")
    elif current and str(olares[0].get("version")) != want:
        yield _problem(chart, "OlaresManifest.yaml", "options.dependencies", f"{olares[0].get('version')!r}: v3 "
                       "apps need Olares 1.12.6 or later", f"use '{want}'", "olares-dependency")
    if not current:
        return
    if "OLARES_USER" in "".join(chart.files.values()):
        yield _problem(chart, "OlaresManifest.yaml", "envs", "v3 apps must not name or mention OLARES_USER* envs",
                       "use OLARES_SYSTEM_HUGGINGFACE_SERVICE / _TOKEN through envs[].valueFrom", "olares-user-env")
    replicas = manifest.get("workloadReplicas")
    if not isinstance(replicas, dict) or not replicas:
        yield _problem(chart, "OlaresManifest.yaml", "workloadReplicas", "missing", "list each Deployment: 1",
                       "olares-workload-replicas")
        return
    values = load_yaml(chart.files.get("values.yaml", "")) or {}
    workloads = values.get("workloads") if isinstance(values, dict) else None
    for name in replicas:
        if not isinstance(workloads, dict) or "replicaCount" not in (workloads.get(name) or {}):
            yield _problem(chart, "values.yaml", f"workloads.{name}.replicaCount", "missing", "add replicaCount: 1",
                           "olares-workload-replicas")
