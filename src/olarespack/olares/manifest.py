"""OlaresManifest.yaml as Olares' own linter validates it: each check mirrors a function of beclab/Olares
framework/oac (internal/manifest/validate.go, resources.go, envs.go, taxonomy.go), named in its comment.
Pure: a parsed manifest in, Problems out. Every rule here is an error in oac; olarespack's own advice
(a warning) is marked as such."""

from __future__ import annotations

import re
from typing import Any

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem
from olarespack.olares.findings import Findings, as_list, as_map, as_text
from olarespack.olares.manifest_scope import scope_rules
from olarespack.olares.resources import spec_rules
from olarespack.olares.versions import api_version, parse_version

ENTRANCE_NAME = re.compile(r"^[a-z0-9A-Z-]*$")
HOST = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])$")
SUBCHART = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DURATION = re.compile(r"^((?:[-+]?\d+(?:\.\d+)?([smhdwy]|us|ns|ms))+)$")
# ValidateResourceMode's modes (resources.go), with the ones newer Olares releases added, so that a chart
# for a newer box is not refused here; GPU memory is declared only on the modes with their own VRAM.
RESERVED_APP_IDS = frozenset(
    {
        "market",
        "auth",
        "citus",
        "desktop",
        "did",
        "docs",
        "files",
        "fsnotify",
        "headscale",
        "infisical",
        "intentprovider",
        "ksserver",
        "message",
        "mongo",
        "monitoring",
        "notifications",
        "profile",
        "redis",
        "recommend",
        "seafile",
        "search",
        "search-admin",
        "settings",
        "systemserver",
        "tapr",
        "vault",
        "video",
        "zinc",
        "accounts",
        "control-hub",
        "dashboard",
        "nitro",
        "olares-app",
    }
)


def validate_manifest(chart: Chart) -> list[Problem]:
    """oac ValidateAppConfiguration and the version gates around it, on a parsed manifest."""
    out = Findings(chart)
    manifest = chart.manifest
    if not as_text(manifest.get("olaresManifest.version")):
        out.add(
            "olaresManifest.version",
            "olaresManifest.version is required",
            "add olaresManifest.version",
            "olares-api-version",
        )
    api = api_version(manifest)
    if api not in ("", "v1", "v2", "v3"):  # validate.go: In("v1", "v2", "v3")
        out.add("apiVersion", f"{api!r}: not supported version", "use v1, v2 or v3", "olares-api-version")
    _metadata(out, as_map(manifest.get("metadata")))
    _entrances(out, manifest.get("entrances"))
    _ports(out, manifest.get("ports"))
    if not isinstance(manifest.get("spec"), dict):
        out.add("spec", "spec is required", "add the spec section", "olares-spec")
    else:
        spec_rules(out, manifest, api)
    _options(out, api, as_map(manifest.get("options")))
    _overlay_gateway(out, as_map(manifest.get("overlayGateway")))
    if api == "v2":
        _sub_charts(out, as_map(manifest.get("spec")))
    scope_rules(out, manifest, api)
    return out.found


def _metadata(out: Findings, metadata: dict[str, Any]) -> None:
    """validateAppMetaData."""
    name = as_text(metadata.get("name"))
    if not 1 <= len(name) <= 30:
        out.add("metadata.name", "metadata.name must be 1-30 characters", "name the app", "olares-name")
    icon = as_text(metadata.get("icon"))
    if not re.match(r"^https?://[^/\s]+", icon):
        out.add(
            "metadata.icon", "metadata.icon must be a valid http(s) URL", "point it at a hosted image", "olares-icon"
        )
    if not as_text(metadata.get("description")):
        out.add(
            "metadata.description",
            "metadata.description is required",
            "add a one-line description",
            "olares-description",
        )
    title = as_text(metadata.get("title"))
    if not 1 <= len(title) <= 30:
        out.add(
            "metadata.title",
            f"{len(title)} characters; metadata.title must be 1-30",
            "shorten the title",
            "olares-title",
        )
    if parse_version(metadata.get("version")) is None:
        out.add(
            "metadata.version",
            "metadata.version must be a valid semantic version (e.g. 1.2.3)",
            "write MAJOR.MINOR.PATCH",
            "olares-version",
        )
    if as_text(metadata.get("appid")) in RESERVED_APP_IDS:
        out.add(
            "metadata.appid",
            "collides with a reserved system app id",
            "drop appid (Olares derives it from the name)",
            "olares-name",
        )
    elif not as_text(metadata.get("appid")):
        # oac accepts it (the loader derives md5(name)[:8]), a market source serves it, but the upload path
        # (`olares-cli market upload`, beclab/market uploadevent) drops a chart without one; the official charts
        # all write it
        out.add(
            "metadata.appid",
            "missing: oac and a market source take the chart, `olares-cli market upload` drops it",
            f"add appid: {name or '<the app name>'}",
            "olares-appid",
            "warning",
        )
    if not as_list(metadata.get("categories")):  # olarespack's advice: the market files apps by category
        out.add(
            "metadata.categories",
            "no category: the Market cannot show the app in a section",
            "add categories: [AI]",
            "olares-categories",
            "warning",
        )


def _entrances(out: Findings, entrances: Any) -> None:
    """validateEntranceValue and uniqueEntranceNames."""
    found = as_list(entrances)
    if not 1 <= len(found) <= 10:
        out.add(
            "entrances",
            f"{len(found)} entrances; entrances must have between 1 and 10 items",
            "declare the app's web or API entrance",
            "olares-entrances",
        )
    seen: set[str] = set()
    for i, raw in enumerate(found):
        entrance, at = as_map(raw), f"entrances[{i}]"
        name = as_text(entrance.get("name"))
        if len(name) > 63 or not ENTRANCE_NAME.match(name):
            out.add(f"{at}.name", f"{name!r}: at most 63 letters, digits or dashes", "rename it", "olares-entrances")
        if name in seen:
            out.add(f"{at}.name", f"duplicate entrance name {name!r}", "rename it", "olares-entrances")
        seen.add(name)
        host = as_text(entrance.get("host"))
        if len(host) > 63 or not HOST.match(host):
            out.add(
                f"{at}.host",
                f"{host!r} is not a Service name",
                "use the name of the Service in front of the app",
                "olares-entrances",
            )
        port = entrance.get("port")
        if isinstance(port, bool) or (port is not None and not isinstance(port, int)) or (port or 0) < 0:
            out.add(f"{at}.port", f"{port!r}: entrance.port must be > 0", "use the Service's port", "olares-entrances")
        icon = as_text(entrance.get("icon"))
        if icon and not re.match(r"^https?://[^/\s]+", icon):
            out.add(f"{at}.icon", "must be a valid http(s) URL", "point it at a hosted image", "olares-entrances")
        title = as_text(entrance.get("title"))
        if not 1 <= len(title) <= 30:
            out.add(f"{at}.title", f"{len(title)} characters; Olares takes 1-30", "shorten it", "olares-entrance-title")
        elif not re.match(r"^[a-zA-Z0-9-\s]*$", title):  # the linter of Olares before 1.12.6
            out.add(
                f"{at}.title",
                f"{title!r}: Olares before 1.12.6 refuses anything but letters, digits, spaces and dashes",
                "drop the dots and brackets",
                "olares-entrance-title",
                "warning",
            )
        if as_text(entrance.get("authLevel")) not in ("", "public", "private", "internal"):
            out.add(f"{at}.authLevel", "must be public, private or internal", "pick one", "olares-entrances")
        if as_text(entrance.get("openMethod")) not in ("", "default", "iframe", "window"):
            out.add(f"{at}.openMethod", "must be default, iframe or window", "pick one", "olares-entrances")


def _ports(out: Findings, ports: Any) -> None:
    """The top-level ports (beclab/api ServicePort) as oac validates them (validate_test.go's
    TestServicePortsValidation at its newest stored version): a name, a Service host, a port and an optional
    exposePort in 1-65535, protocol "", tcp or udp, names unique."""
    seen: set[str] = set()
    for i, raw in enumerate(as_list(ports)):
        port, at = as_map(raw), f"ports[{i}]"
        name, host = as_text(port.get("name")), as_text(port.get("host"))
        if not name:
            out.add(f"{at}.name", "port.name is required", "name the port", "olares-ports")
        elif len(name) > 63 or not ENTRANCE_NAME.match(name):
            out.add(
                f"{at}.name",
                f"port.name must match {ENTRANCE_NAME.pattern} (got {name!r})",
                "rename it",
                "olares-ports",
            )
        elif name in seen:
            out.add(f"{at}.name", f"duplicate port name {name!r}", "rename it", "olares-ports")
        seen.add(name)
        if not host:
            out.add(f"{at}.host", "port.host is required", "give the Service's name", "olares-ports")
        elif len(host) > 63 or not HOST.match(host):
            out.add(
                f"{at}.host",
                f"port.host must match {HOST.pattern} (got {host!r})",
                "give the Service's name",
                "olares-ports",
            )
        for key, required in (("port", True), ("exposePort", False)):
            value = port.get(key)
            if value is None or value == 0:
                if required:
                    out.add(f"{at}.{key}", f"port.{key} is required", "give the Service's port", "olares-ports")
            elif isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
                out.add(
                    f"{at}.{key}", f"port.{key} must be between 1 and 65535 (got {value!r})", "fix it", "olares-ports"
                )
        if port.get("protocol") not in (None, "", "tcp", "udp"):
            out.add(
                f"{at}.protocol",
                f'port.protocol must be one of "", "tcp", "udp" (got {port.get("protocol")!r})',
                "write tcp or udp, in lowercase",
                "olares-ports",
            )


def _options(out: Findings, api: str, options: dict[str, Any]) -> None:
    """validateOptions."""
    for i, raw in enumerate(as_list(options.get("policies"))):
        policy = as_map(raw)
        for name in ("uriRegex", "level"):
            if not as_text(policy.get(name)):
                out.add(f"options.policies[{i}].{name}", "is required", f"set {name}", "olares-options")
        duration = as_text(policy.get("validDuration"))
        if duration and not DURATION.match(duration):
            out.add(
                f"options.policies[{i}].validDuration",
                "policy.validDuration is malformed",
                "write a duration like 1h",
                "olares-options",
            )
    for i, raw in enumerate(as_list(options.get("dependencies"))):
        dependency = as_map(raw)
        for name in ("name", "version", "type"):
            if not as_text(dependency.get(name)):
                out.add(f"options.dependencies[{i}].{name}", "is required", f"set {name}", "olares-options")
        if as_text(dependency.get("type")) and as_text(dependency.get("type")) not in (
            "system",
            "application",
            "middleware",
        ):
            out.add(
                f"options.dependencies[{i}].type",
                "dependency.type must be system, application or middleware",
                "pick one",
                "olares-options",
            )
    if options.get("templateOnly") is True and options.get("allowMultipleInstall") is not True:
        out.add(
            "options.allowMultipleInstall",
            "must be true when options.templateOnly is true",
            "set allowMultipleInstall: true",
            "olares-options",
        )
    if options.get("shared") is True and api != "v3":
        out.add(
            "options.shared",
            f"options.shared=true is only supported for apiVersion=v3 (got {api!r})",
            "use apiVersion v3 or drop shared",
            "olares-options",
        )


def _overlay_gateway(out: Findings, gateway: dict[str, Any]) -> None:
    """validateOverlayGateway."""
    for i, raw in enumerate(as_list(gateway.get("entrances"))):
        entry, at = as_map(raw), f"overlayGateway.entrances[{i}]"
        if not 1 <= len(as_text(entry.get("title"))) <= 30:
            out.add(f"{at}.title", "title is required, 1-30 characters", "set a title", "olares-options")
        port = entry.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or port < 1:
            out.add(f"{at}.port", "port is required (at least 1)", "set the port", "olares-options")
        if not as_text(entry.get("workload")):
            out.add(f"{at}.workload", "workload is required", "name the Deployment or StatefulSet", "olares-options")
        if as_text(entry.get("protocol")) not in ("", "tcp", "udp"):
            out.add(f"{at}.protocol", "must be tcp or udp", "pick one", "olares-options")


def _sub_charts(out: Findings, spec: dict[str, Any]) -> None:
    """checkSubCharts: apiVersion v2 apps are a set of sub-charts, at least one shared."""
    charts = as_list(spec.get("subCharts"))
    if not charts:
        out.add(
            "spec.subCharts",
            "spec.subCharts is required for apiVersion=v2",
            "use apiVersion v1 (or v3) for a single chart, or list the sub-charts",
            "olares-subcharts",
        )
        return
    for i, raw in enumerate(charts):
        name = as_text(as_map(raw).get("name"))
        if not name or len(name) > 53 or not SUBCHART.match(name):
            out.add(
                f"spec.subCharts[{i}].name",
                f"{name!r} is not a valid sub-chart name",
                "use a DNS-style name",
                "olares-subcharts",
            )
            break
    if not any(as_map(raw).get("shared") is True for raw in charts):
        out.add(
            "spec.subCharts",
            "spec.subCharts must contain at least one entry with shared=true",
            "mark the shared sub-chart",
            "olares-subcharts",
        )
