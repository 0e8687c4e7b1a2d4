"""Olares' multiple-install probes (oac checkAllowMultipleInstall, resources.CheckClusterScopedFixedNames):
the chart rendered under two release names, and, when a cluster-scoped name does not change with the
release, under two owners. A cluster-scoped object (one rendered without metadata.namespace) whose name is
the same for every install collides with the next install; a second install of an app that allows several
needs a workload named after its release. Pure: the parsed renders in, Problems out."""

from __future__ import annotations

from typing import Any

from olarespack.core.chart import MANIFEST, Chart
from olarespack.core.errors import Problem

PROBE_RELEASES = ("oac-lint-probe-a", "oac-lint-probe-b")
USER_PROBES = ("oac-lint-user-a", "oac-lint-user-b")
USER_PROBE_RELEASE = "oac-lint-user-release"
WORKLOADS = frozenset({"Deployment", "StatefulSet"})
Documents = list[tuple[str, dict[str, Any], str]]  # (template path, document, its text), as helm rendered them


def _api(manifest: dict[str, Any]) -> str:
    return str(manifest.get("apiVersion") or "").strip().lower()


def allows_multiple_install(manifest: dict[str, Any]) -> bool:
    options = manifest.get("options")
    return isinstance(options, dict) and options.get("allowMultipleInstall") is True


def cluster_check_applies(manifest: dict[str, Any]) -> bool:
    """allowClusterScopedCheckApplies: apiVersion v1 (or none) always, v3 when it allows several installs,
    v2 never (its sub-charts are shared by design)."""
    api = _api(manifest)
    return api in ("", "v1") or (api == "v3" and allows_multiple_install(manifest))


def workload_check_applies(manifest: dict[str, Any]) -> bool:
    return allows_multiple_install(manifest) and _api(manifest) != "v2"


def probes_apply(manifest: dict[str, Any]) -> bool:
    return cluster_check_applies(manifest) or workload_check_applies(manifest)


def _metadata(document: dict[str, Any]) -> dict[str, Any]:
    metadata = document.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def cluster_scoped(documents: Documents) -> list[tuple[str, str, str]]:
    """(kind, name, template) of each object rendered without a namespace, sorted by kind and name: what oac
    counts as cluster-scoped, since a dry run leaves an unset namespace empty."""
    found = [
        (str(document.get("kind") or "Resource"), str(_metadata(document).get("name") or ""), source)
        for source, document, _ in documents
        if not _metadata(document).get("namespace")
    ]
    return sorted(found, key=lambda entry: f"{entry[0]}/{entry[1]}")


def fixed_names(probe_a: Documents, probe_b: Documents) -> list[tuple[str, str, str]]:
    """The cluster-scoped objects whose kind and name are the same under both release names."""
    in_b = {(kind, name) for kind, name, _ in cluster_scoped(probe_b)}
    return [entry for entry in dict.fromkeys(cluster_scoped(probe_a)) if entry[:2] in in_b]


def _named_after_owner(
    fixed: list[tuple[str, str, str]], release: Documents, user_a: Documents, user_b: Documents
) -> list[tuple[str, str, str]]:
    """filterUsernameScopedClusterKeys: drop the fixed names that change with the owner, pairing objects by
    their place in the kind-and-name order (kept only while all three renders list the same kinds)."""
    ordered, first, second = cluster_scoped(release), cluster_scoped(user_a), cluster_scoped(user_b)
    if not len(ordered) == len(first) == len(second):
        return fixed
    keep = []
    for entry in fixed:
        at = next(i for i, candidate in enumerate(ordered) if candidate[:2] == entry[:2])
        a, b = first[at], second[at]
        if a[0] == b[0] == ordered[at][0] and a[1] != b[1]:
            continue
        keep.append(entry)
    return keep


def needs_owner_probes(manifest: dict[str, Any], probe_a: Documents, probe_b: Documents) -> bool:
    return (
        cluster_check_applies(manifest)
        and not allows_multiple_install(manifest)
        and bool(fixed_names(probe_a, probe_b))
    )


def probe_problems(chart: Chart, probes: dict[str, Documents]) -> list[Problem]:
    """`probes` maps each release probe (and, when rendered, each owner probe) to its render."""
    manifest = chart.manifest
    a, b = (probes[name] for name in PROBE_RELEASES)
    problems: list[Problem] = []
    if cluster_check_applies(manifest):
        fixed = fixed_names(a, b)
        if not allows_multiple_install(manifest) and all(user in probes for user in USER_PROBES):
            fixed = _named_after_owner(fixed, a, *(probes[user] for user in USER_PROBES))
        for kind, name, source in fixed:
            why = "a second install" if allows_multiple_install(manifest) else "the same app installed by another user"
            problems.append(
                Problem(
                    chart.where(source),
                    f"{kind}/{name}.metadata.name",
                    f"cluster-scoped {kind} {name!r} has the same name for every install, so {why} collides with it",
                    "name it after the release ({{ .Release.Name }}) or the owner ({{ .Values.bfl.username }}), or "
                    "give it metadata.namespace",
                    rule="olares-cluster-names",
                )
            )
    if workload_check_applies(manifest):
        for release in PROBE_RELEASES:
            named = {str(_metadata(d).get("name")) for _, d, _ in probes[release] if d.get("kind") in WORKLOADS}
            if release not in named:
                problems.append(
                    Problem(
                        chart.where(MANIFEST),
                        "options.allowMultipleInstall",
                        "allowMultipleInstall is true but no Deployment or StatefulSet is named after the release: a "
                        "second install would collide on workload names",
                        "set a workload's metadata.name to {{ .Release.Name }}",
                        rule="olares-multiple-install",
                    )
                )
                break
    return problems
