"""OlaresManifest.yaml beyond its texts and entrances, as Olares' own linter validates it (olares/manifest.py runs
these): the permissions, the workload replicas, the Olares the app needs, a shared app's limits, a v3 app's envs,
the taxonomy and the fields only a modern manifest may have. Each check mirrors the oac function named in its
comment."""

from __future__ import annotations

import re
from typing import Any, Final

from olarespack.olares.findings import Findings, as_list, as_map, as_text
from olarespack.olares.versions import is_legacy, is_modern, satisfies

SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# Fields only Olares 1.12.6 reads: a manifest below 0.12.0 that declares them would be refused there.
MODERN_ONLY = (
    ("apiVersion", "v3"),
    ("spec", "accelerator"),
    ("workloadReplicas", None),
    ("overlayGateway", None),
    ("options", "LLMGatewaySupported"),
    ("options", "templateOnly"),
    ("options", "shared"),
    ("permission", "appCommon"),
    ("permission", "loginOlaresCLI"),
)
LOGIN_CLI_APPS = frozenset({"lares"})


def scope_rules(out: Findings, manifest: dict[str, Any], api: str) -> None:
    _permission(out, manifest)
    _workload_replicas(out, manifest, api)
    _olares_dependency(out, manifest, api)
    _shared_app(out, manifest)
    _v3_envs(out, manifest, api)
    _taxonomy(out, manifest)
    if is_legacy(manifest):
        _modern_fields(out, manifest)


def _permission(out: Findings, manifest: dict[str, Any]) -> None:
    """validatePermission, validateRootProvider, and the loginOlaresCLI allow list."""
    permission = as_map(manifest.get("permission"))
    modern = is_modern(manifest)
    if permission.get("externalData") and is_legacy(manifest):
        out.add(
            "permission.externalData",
            "only supported for olaresManifest.version >= 0.12.0",
            "remove it",
            "olares-permission",
        )
    if modern and permission.get("provider"):
        out.add(
            "permission.provider",
            "must be empty for olaresManifest.version >= 0.12.0",
            "remove it",
            "olares-permission",
        )
    if modern and manifest.get("provider"):
        out.add(
            "provider",
            "the top-level provider section is no longer accepted for olaresManifest.version >= 0.12.0",
            "remove it",
            "olares-permission",
        )
    name = as_text(as_map(manifest.get("metadata")).get("name"))
    if permission.get("loginOlaresCLI") and name not in LOGIN_CLI_APPS:
        out.add("permission.loginOlaresCLI", f"not allowed for app {name!r}", "remove it", "olares-permission")


def _workload_replicas(out: Findings, manifest: dict[str, Any], api: str) -> None:
    """validateWorkloadReplicas."""
    if is_modern(manifest) and api != "v2" and not as_map(manifest.get("workloadReplicas")):
        out.add(
            "workloadReplicas",
            "workloadReplicas is required for olaresManifest.version >= 0.12.0",
            "declare workloadReplicas.<workload>: 1 for every Deployment/StatefulSet",
            "olares-workload-replicas",
        )


def _olares_dependency(out: Findings, manifest: dict[str, Any], api: str) -> None:
    """validateOlaresDependency: every manifest names the olares system dependency, and its version range keeps
    the app on the Olares releases that read its apiVersion (v3: 1.12.6 and later; v1/v2: 1.12.3-1.12.5)."""
    dependencies = [as_map(d) for d in as_list(as_map(manifest.get("options")).get("dependencies"))]
    olares = [d for d in dependencies if as_text(d.get("name")) == "olares" and as_text(d.get("type")) == "system"]
    v3 = api.lower() == "v3"
    want = ">=1.12.6-0" if v3 else ">=1.12.3-0,<1.12.6"
    if not olares:
        out.add(
            "options.dependencies",
            'must declare an entry with name="olares" and type="system"',
            f"add {{name: olares, version: '{want}', type: system}}",
            "olares-dependency",
        )
        return
    constraint = as_text(olares[0].get("version"))
    outside = ("1.12.5", "1.12.0", "0.1.0") if v3 else ("1.12.2", "1.12.6", "2.0.0")
    allowed = [v for v in outside if satisfies(v, constraint)]
    readable = satisfies("1.12.6" if v3 else "1.12.5", constraint) is not None
    if not readable:
        out.add(
            "options.dependencies",
            f"{constraint!r} is not a valid semver constraint",
            f"use '{want}'",
            "olares-dependency",
        )
    elif allowed:  # on every olaresManifest.version, as for the missing entry above
        out.add(
            "options.dependencies",
            f"{constraint!r} allows Olares {', '.join(allowed)}, which cannot run an apiVersion {api or 'v1'} app",
            f"use '{want}'",
            "olares-dependency",
        )


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
        out.add(
            "options.appScope.clusterScoped", "must be false when options.shared=true", "set it false", "olares-options"
        )
    if scope.get("appRef"):
        out.add("options.appScope.appRef", "must be empty when options.shared=true", "remove it", "olares-options")


def _v3_envs(out: Findings, manifest: dict[str, Any], api: str) -> None:
    """validateV3Configuration (envs.go): v3 apps name their envs themselves; OLARES_USER_* only as a source."""
    if api.lower() != "v3":
        return
    for i, raw in enumerate(as_list(manifest.get("envs"))):
        if as_text(as_map(raw).get("envName")).startswith("OLARES_USER"):
            out.add(
                f"envs[{i}].envName",
                'must not start with "OLARES_USER"',
                "declare an app-local name and map the user variable with valueFrom.envName",
                "olares-user-env",
            )


def _canonical_locale(locale: str) -> str:
    parts = locale.replace("_", "-").split("-")
    fixed = [parts[0].lower()]
    for part in parts[1:]:
        fixed.append(part.title() if len(part) == 4 else part.upper() if len(part) == 2 else part)
    return "-".join(fixed)


# A BCP 47 tag's shape (RFC 5646): a 2-3 letter language, then script, region, variants; or private use. oac parses
# with golang.org/x/text/language, which also knows the registry: a well-formed tag of no registered language
# ("qq") passes here.
_BCP47: Final = re.compile(
    r"^(?:[A-Za-z]{2,3}(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"
    r"(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*(?:-x(?:-[A-Za-z0-9]{1,8})+)?|x(?:-[A-Za-z0-9]{1,8})+)$"
)


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
                out.add(
                    at,
                    f"{value!r} must be lowercase alphanumeric words joined by single hyphens",
                    "write a-z, 0-9 and dashes",
                    "olares-taxonomy",
                )
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
            out.add(
                at,
                f"{locale!r} must use canonical spelling {_canonical_locale(locale)!r}",
                "fix the spelling",
                "olares-taxonomy",
            )
        elif locale == "und" or locale.startswith("und-"):
            out.add(
                at,
                f"{locale!r} names the undefined language",
                "list the languages the app is actually written in",
                "olares-taxonomy",
            )


def _modern_fields(out: Findings, manifest: dict[str, Any]) -> None:
    """validateModernFieldRequiresManifestVersion: 1.12.6-only fields on a manifest below 0.12.0."""
    for section, key in MODERN_ONLY:
        value = manifest.get(section)
        present = (
            (value == key)
            if section == "apiVersion"
            else (bool(value) if key is None else bool(as_map(value).get(key)))
        )
        if present:
            field = section if key is None or section == "apiVersion" else f"{section}.{key}"
            out.add(
                field,
                "only Olares 1.12.6 reads it: olaresManifest.version must be >= 0.12.0 and the olares "
                'dependency ">=1.12.6-0"',
                "remove it, or move to the current manifest generation",
                "olares-api-version",
            )
