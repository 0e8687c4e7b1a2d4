"""OlaresManifest.yaml as Olares' own linter validates it: each check mirrors a function of beclab/Olares
framework/oac (internal/manifest/validate.go, resources.go, envs.go, taxonomy.go), named in its comment.
Pure: a parsed manifest in, Problems out. Every rule here is an error in oac; olarespack's own advice
(a warning) is marked as such."""

from __future__ import annotations

import re
from typing import Any, Final

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem
from olarespack.olares.findings import Findings, as_list, as_map, as_text
from olarespack.olares.resources import spec_rules
from olarespack.olares.versions import api_version, is_legacy, is_modern, parse_version, satisfies

ENTRANCE_NAME = re.compile(r"^[a-z0-9A-Z-]*$")
HOST = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])$")
SUBCHART = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DURATION = re.compile(r"^((?:[-+]?\d+(?:\.\d+)?([smhdwy]|us|ns|ms))+)$")
# ValidateResourceMode's modes (resources.go), with the ones newer Olares releases added, so that a chart
# for a newer box is not refused here; GPU memory is declared only on the modes with their own VRAM.
RESERVED_APP_IDS = frozenset({
    "market", "auth", "citus", "desktop", "did", "docs", "files", "fsnotify", "headscale", "infisical",
    "intentprovider", "ksserver", "message", "mongo", "monitoring", "notifications", "profile", "redis", "recommend",
    "seafile", "search", "search-admin", "settings", "systemserver", "tapr", "vault", "video", "zinc", "accounts",
    "control-hub", "dashboard", "nitro", "olares-app"})
# Fields only Olares 1.12.6 reads: a manifest below 0.12.0 that declares them would be refused there.
MODERN_ONLY = (("apiVersion", "v3"), ("spec", "accelerator"), ("workloadReplicas", None), ("overlayGateway", None),
               ("options", "LLMGatewaySupported"), ("options", "templateOnly"), ("options", "shared"),
               ("permission", "appCommon"), ("permission", "loginOlaresCLI"))
LOGIN_CLI_APPS = frozenset({"lares"})


def validate_manifest(chart: Chart) -> list[Problem]:
    """oac ValidateAppConfiguration and the version gates around it, on a parsed manifest."""
    out = Findings(chart)
    manifest = chart.manifest
    if not as_text(manifest.get("olaresManifest.version")):
        out.add("olaresManifest.version", "olaresManifest.version is required", "add olaresManifest.version",
                "olares-api-version")
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
    _permission(out, manifest)
    _workload_replicas(out, manifest, api)
    _olares_dependency(out, manifest, api)
    _shared_app(out, manifest)
    _v3_envs(out, manifest, api)
    _taxonomy(out, manifest)
    if is_legacy(manifest):
        _modern_fields(out, manifest)
    return out.found


def _metadata(out: Findings, metadata: dict[str, Any]) -> None:
    """validateAppMetaData."""
    name = as_text(metadata.get("name"))
    if not 1 <= len(name) <= 30:
        out.add("metadata.name", "metadata.name must be 1-30 characters", "name the app", "olares-name")
    icon = as_text(metadata.get("icon"))
    if not re.match(r"^https?://[^/\s]+", icon):
        out.add("metadata.icon", "metadata.icon must be a valid http(s) URL", "point it at a hosted image",
                "olares-icon")
    if not as_text(metadata.get("description")):
        out.add("metadata.description", "metadata.description is required", "add a one-line description",
                "olares-description")
    title = as_text(metadata.get("title"))
    if not 1 <= len(title) <= 30:
        out.add("metadata.title", f"{len(title)} characters; metadata.title must be 1-30", "shorten the title",
                "olares-title")
    if parse_version(metadata.get("version")) is None:
        out.add("metadata.version", "metadata.version must be a valid semantic version (e.g. 1.2.3)",
                "write MAJOR.MINOR.PATCH", "olares-version")
    if as_text(metadata.get("appid")) in RESERVED_APP_IDS:
        out.add("metadata.appid", "collides with a reserved system app id", "drop appid (Olares derives it from "
                "the name)", "olares-name")
    elif not as_text(metadata.get("appid")):
        # oac accepts it (the loader derives md5(name)[:8]), a market source serves it, but the upload path
        # (`olares-cli market upload`, beclab/market uploadevent) drops a chart without one; the official charts
        # all write it
        out.add("metadata.appid", "missing: oac and a market source take the chart, `olares-cli market upload` "
                "drops it", f"add appid: {name or '<the app name>'}", "olares-appid", "warning")
    if not as_list(metadata.get("categories")):  # olarespack's advice: the market files apps by category
        out.add("metadata.categories", "no category: the Market cannot show the app in a section",
                "add categories: [AI]", "olares-categories", "warning")


def _entrances(out: Findings, entrances: Any) -> None:
    """validateEntranceValue and uniqueEntranceNames."""
    found = as_list(entrances)
    if not 1 <= len(found) <= 10:
        out.add("entrances", f"{len(found)} entrances; entrances must have between 1 and 10 items",
                "declare the app's web or API entrance", "olares-entrances")
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
            out.add(f"{at}.host", f"{host!r} is not a Service name", "use the name of the Service in front of the "
                    "app", "olares-entrances")
        port = entrance.get("port")
        if isinstance(port, bool) or (port is not None and not isinstance(port, int)) or (port or 0) < 0:
            out.add(f"{at}.port", f"{port!r}: entrance.port must be > 0", "use the Service's port",
                    "olares-entrances")
        icon = as_text(entrance.get("icon"))
        if icon and not re.match(r"^https?://[^/\s]+", icon):
            out.add(f"{at}.icon", "must be a valid http(s) URL", "point it at a hosted image", "olares-entrances")
        title = as_text(entrance.get("title"))
        if not 1 <= len(title) <= 30:
            out.add(f"{at}.title", f"{len(title)} characters; Olares takes 1-30", "shorten it",
                    "olares-entrance-title")
        elif not re.match(r"^[a-zA-Z0-9-\s]*$", title):  # the linter of Olares before 1.12.6
            out.add(f"{at}.title", f"{title!r}: Olares before 1.12.6 refuses anything but letters, digits, "
                    "spaces and dashes", "drop the dots and brackets", "olares-entrance-title", "warning")
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
            out.add(f"{at}.name", f"port.name must match {ENTRANCE_NAME.pattern} (got {name!r})", "rename it",
                    "olares-ports")
        elif name in seen:
            out.add(f"{at}.name", f"duplicate port name {name!r}", "rename it", "olares-ports")
        seen.add(name)
        if not host:
            out.add(f"{at}.host", "port.host is required", "give the Service's name", "olares-ports")
        elif len(host) > 63 or not HOST.match(host):
            out.add(f"{at}.host", f"port.host must match {HOST.pattern} (got {host!r})", "give the Service's name",
                    "olares-ports")
        for key, required in (("port", True), ("exposePort", False)):
            value = port.get(key)
            if value is None or value == 0:
                if required:
                    out.add(f"{at}.{key}", f"port.{key} is required", "give the Service's port", "olares-ports")
            elif isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
                out.add(f"{at}.{key}", f"port.{key} must be between 1 and 65535 (got {value!r})", "fix it",
                        "olares-ports")
        if port.get("protocol") not in (None, "", "tcp", "udp"):
            out.add(f"{at}.protocol", f'port.protocol must be one of "", "tcp", "udp" (got {port.get("protocol")!r})',
                    "write tcp or udp, in lowercase", "olares-ports")


def _options(out: Findings, api: str, options: dict[str, Any]) -> None:
    """validateOptions."""
    for i, raw in enumerate(as_list(options.get("policies"))):
        policy = as_map(raw)
        for name in ("uriRegex", "level"):
            if not as_text(policy.get(name)):
                out.add(f"options.policies[{i}].{name}", "is required", f"set {name}", "olares-options")
        duration = as_text(policy.get("validDuration"))
        if duration and not DURATION.match(duration):
            out.add(f"options.policies[{i}].validDuration", "policy.validDuration is malformed",
                    "write a duration like 1h", "olares-options")
    for i, raw in enumerate(as_list(options.get("dependencies"))):
        dependency = as_map(raw)
        for name in ("name", "version", "type"):
            if not as_text(dependency.get(name)):
                out.add(f"options.dependencies[{i}].{name}", "is required", f"set {name}", "olares-options")
        if as_text(dependency.get("type")) and as_text(dependency.get("type")) not in ("system", "application",
                                                                                    "middleware"):
            out.add(f"options.dependencies[{i}].type", "dependency.type must be system, application or middleware",
                    "pick one", "olares-options")
    if options.get("templateOnly") is True and options.get("allowMultipleInstall") is not True:
        out.add("options.allowMultipleInstall", "must be true when options.templateOnly is true",
                "set allowMultipleInstall: true", "olares-options")
    if options.get("shared") is True and api != "v3":
        out.add("options.shared", f"options.shared=true is only supported for apiVersion=v3 (got {api!r})",
                "use apiVersion v3 or drop shared", "olares-options")


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
        out.add("spec.subCharts", "spec.subCharts is required for apiVersion=v2", "use apiVersion v1 (or v3) for a "
                "single chart, or list the sub-charts", "olares-subcharts")
        return
    for i, raw in enumerate(charts):
        name = as_text(as_map(raw).get("name"))
        if not name or len(name) > 53 or not SUBCHART.match(name):
            out.add(f"spec.subCharts[{i}].name", f"{name!r} is not a valid sub-chart name", "use a DNS-style name",
                    "olares-subcharts")
            break
    if not any(as_map(raw).get("shared") is True for raw in charts):
        out.add("spec.subCharts", "spec.subCharts must contain at least one entry with shared=true",
                "mark the shared sub-chart", "olares-subcharts")


def _permission(out: Findings, manifest: dict[str, Any]) -> None:
    """validatePermission, validateRootProvider, and the loginOlaresCLI allow list."""
    permission = as_map(manifest.get("permission"))
    modern = is_modern(manifest)
    if permission.get("externalData") and is_legacy(manifest):
        out.add("permission.externalData", "only supported for olaresManifest.version >= 0.12.0", "remove it",
                "olares-permission")
    if modern and permission.get("provider"):
        out.add("permission.provider", "must be empty for olaresManifest.version >= 0.12.0", "remove it",
                "olares-permission")
    if modern and manifest.get("provider"):
        out.add("provider", "the top-level provider section is no longer accepted for olaresManifest.version >= "
                "0.12.0", "remove it", "olares-permission")
    name = as_text(as_map(manifest.get("metadata")).get("name"))
    if permission.get("loginOlaresCLI") and name not in LOGIN_CLI_APPS:
        out.add("permission.loginOlaresCLI", f"not allowed for app {name!r}", "remove it", "olares-permission")


def _workload_replicas(out: Findings, manifest: dict[str, Any], api: str) -> None:
    """validateWorkloadReplicas."""
    if is_modern(manifest) and api != "v2" and not as_map(manifest.get("workloadReplicas")):
        out.add("workloadReplicas", "workloadReplicas is required for olaresManifest.version >= 0.12.0",
                "declare workloadReplicas.<workload>: 1 for every Deployment/StatefulSet", "olares-workload-replicas")


def _olares_dependency(out: Findings, manifest: dict[str, Any], api: str) -> None:
    """validateOlaresDependency: every manifest names the olares system dependency, and its version range keeps
    the app on the Olares releases that read its apiVersion (v3: 1.12.6 and later; v1/v2: 1.12.3-1.12.5)."""
    dependencies = [as_map(d) for d in as_list(as_map(manifest.get("options")).get("dependencies"))]
    olares = [d for d in dependencies if as_text(d.get("name")) == "olares" and as_text(d.get("type")) == "system"]
    v3 = api.lower() == "v3"
    want = ">=1.12.6-0" if v3 else ">=1.12.3-0,<1.12.6"
    if not olares:
        out.add("options.dependencies", 'must declare an entry with name="olares" and type="system"',
                f"add {{name: olares, version: '{want}', type: system}}", "olares-dependency")
        return
    constraint = as_text(olares[0].get("version"))
    outside = ("1.12.5", "1.12.0", "0.1.0") if v3 else ("1.12.2", "1.12.6", "2.0.0")
    allowed = [v for v in outside if satisfies(v, constraint)]
    readable = satisfies("1.12.6" if v3 else "1.12.5", constraint) is not None
    if not readable:
        out.add("options.dependencies", f"{constraint!r} is not a valid semver constraint", f"use '{want}'",
                "olares-dependency")
    elif allowed:  # on every olaresManifest.version, as for the missing entry above
        out.add("options.dependencies", f"{constraint!r} allows Olares {', '.join(allowed)}, which cannot run "
                f"an apiVersion {api or 'v1'} app", f"use '{want}'", "olares-dependency")


def _shared_app(out: Findings, manifest: dict[str, Any]) -> None:
    """validateSharedAppRequirements."""
    options = as_map(manifest.get("options"))
    if options.get("shared") is not True:
        return
    spec, scope = as_map(manifest.get("spec")), as_map(options.get("appScope"))
    if spec.get("onlyAdmin") is not True:
        out.add("spec.onlyAdmin", "must be true when options.shared=true", "set onlyAdmin: true", "olares-options")
    if as_list(spec.get("subCharts")):
        out.add("spec.subCharts", "must be empty when options.shared=true", "remove them", "olares-options")
    if scope.get("clusterScoped") is True:
        out.add("options.appScope.clusterScoped", "must be false when options.shared=true", "set it false",
                "olares-options")
    if scope.get("appRef"):
        out.add("options.appScope.appRef", "must be empty when options.shared=true", "remove it", "olares-options")


def _v3_envs(out: Findings, manifest: dict[str, Any], api: str) -> None:
    """validateV3Configuration (envs.go): v3 apps name their envs themselves; OLARES_USER_* only as a source."""
    if api.lower() != "v3":
        return
    for i, raw in enumerate(as_list(manifest.get("envs"))):
        if as_text(as_map(raw).get("envName")).startswith("OLARES_USER"):
            out.add(f"envs[{i}].envName", 'must not start with "OLARES_USER"', "declare an app-local name and map "
                    "the user variable with valueFrom.envName", "olares-user-env")


def _canonical_locale(locale: str) -> str:
    parts = locale.replace("_", "-").split("-")
    fixed = [parts[0].lower()]
    for part in parts[1:]:
        fixed.append(part.title() if len(part) == 4 else part.upper() if len(part) == 2 else part)
    return "-".join(fixed)


# A BCP 47 tag's shape (RFC 5646): a 2-3 letter language, then script, region, variants; or private use. oac parses
# with golang.org/x/text/language, which also knows the registry: a well-formed tag of no registered language
# ("qq") passes here.
_BCP47: Final = re.compile(r"^(?:[A-Za-z]{2,3}(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"
                           r"(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*(?:-x(?:-[A-Za-z0-9]{1,8})+)?|x(?:-[A-Za-z0-9]{1,8})+)$")


def _taxonomy(out: Findings, manifest: dict[str, Any]) -> None:
    """ValidateTaxonomy (oac manifest/taxonomy.go): categories_v2 and tags are unique, non-empty slugs without
    surrounding whitespace; spec.locale holds unique, well-formed, canonical BCP 47 tags, none of them `und`."""
    metadata = as_map(manifest.get("metadata"))
    for key in ("categories_v2", "tags"):
        values = ["" if v is None else str(v) for v in as_list(metadata.get(key))]  # as written: spaces count
        for i, value in enumerate(values):
            at = f"metadata.{key}[{i}]"
            if value in values[:i]:
                out.add(at, f"{value!r} is listed more than once", "remove it", "olares-taxonomy")
            elif not value:
                out.add(at, "must not be empty", "remove it or write a slug", "olares-taxonomy")
            elif value != value.strip():
                out.add(at, f"{value!r} must not have surrounding whitespace", "trim it", "olares-taxonomy")
            elif not SLUG.match(value):
                out.add(at, f"{value!r} must be lowercase alphanumeric words joined by single hyphens",
                        "write a-z, 0-9 and dashes", "olares-taxonomy")
    locales = ["" if v is None else str(v) for v in as_list(as_map(manifest.get("spec")).get("locale"))]
    for i, locale in enumerate(locales):
        at = f"spec.locale[{i}]"
        if locale in locales[:i]:
            out.add(at, f"duplicate locale {locale!r}", "remove it", "olares-taxonomy")
        elif not locale:
            out.add(at, "must not be empty", "remove it", "olares-taxonomy")
        elif not _BCP47.match(locale):
            out.add(at, f"{locale!r} must be a valid BCP 47 language tag", "write e.g. en-US", "olares-taxonomy")
        elif locale != _canonical_locale(locale):
            out.add(at, f"{locale!r} must use canonical spelling {_canonical_locale(locale)!r}",
                    "fix the spelling", "olares-taxonomy")
        elif locale == "und" or locale.startswith("und-"):
            out.add(at, f"{locale!r} names the undefined language", "list the languages the app is actually "
                    "written in", "olares-taxonomy")


def _modern_fields(out: Findings, manifest: dict[str, Any]) -> None:
    """validateModernFieldRequiresManifestVersion: 1.12.6-only fields on a manifest below 0.12.0."""
    for section, key in MODERN_ONLY:
        value = manifest.get(section)
        present = (value == key) if section == "apiVersion" else (
            bool(value) if key is None else bool(as_map(value).get(key)))
        if present:
            field = section if key is None or section == "apiVersion" else f"{section}.{key}"
            out.add(field, 'only Olares 1.12.6 reads it: olaresManifest.version must be >= 0.12.0 and the olares '
                    'dependency ">=1.12.6-0"', "remove it, or move to the current manifest generation",
                    "olares-api-version")
