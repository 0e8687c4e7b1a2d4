"""Olares' rules on what helm rendered, as oac runs them after rendering a chart (chart.go
lintRenderedScenario; internal/resources/limits.go, hostpath.go, namespace.go, securitycontext.go,
serviceaccount.go), plus olarespack's own advice about the GPU (HAMi) and the Hugging Face token, marked as
such. Pure: the parsed documents of one render in, Problems out."""

from __future__ import annotations

from typing import Any

from olarespack.core.chart import MANIFEST, Chart
from olarespack.core.errors import Problem
from olarespack.olares.findings import as_list, as_map
from olarespack.olares.rendered import (
    FORBIDDEN_RESOURCES,
    FORBIDDEN_VERBS,
    POD_KINDS,
    WORKLOADS,
    Document,
    Out,
    Rendered,
    containers,
    name_of,
    pod_spec,
)
from olarespack.olares.workload_resources import gpu_memory, resource_limits


def rendered_problems(chart: Chart, rendered: Rendered, secret_sentinel: str | None) -> list[Problem]:
    out = Out(chart)
    manifest = chart.manifest
    documents = rendered.documents
    _upload_dest(out, manifest, documents)
    _deploymentname_of(out, manifest, documents, rendered.mode)
    _overlay_workloads(out, manifest, documents)
    _workload_options(out, manifest, documents)
    for source, document, text in documents:
        kind, name = str(document.get("kind")), name_of(document)
        _host_path(out, source, document)
        _namespace(out, source, document, rendered.namespace)
        if kind in POD_KINDS:
            _security_context(out, source, document)
            _sub_path_expr(out, source, document)
        if kind in WORKLOADS:
            gpu_memory(out, manifest, source, document, rendered.mode)
        if secret_sentinel and kind != "Secret" and secret_sentinel in text:
            out.add(
                source,
                f"{kind}/{name}",
                "the Hugging Face token appears outside a Secret",
                "put it in a Secret and reference it with secretKeyRef",
                "secret-outside-secret",
                "warning",
            )
    _service_accounts(out, documents)
    resource_limits(out, manifest, documents, rendered.mode)
    return out.found


def _overlay_workloads(out: Out, manifest: dict[str, Any], documents: list[Document]) -> None:
    """CheckOverlayGatewayWorkloads: each overlayGateway entrance names a rendered Deployment/StatefulSet."""
    names = {name_of(d) for _, d, _ in documents if d.get("kind") in WORKLOADS}
    for i, entry in enumerate(as_list(as_map(manifest.get("overlayGateway")).get("entrances"))):
        workload = str(as_map(entry).get("workload") or "")
        if workload and workload not in names:
            out.add(
                MANIFEST,
                f"overlayGateway.entrances[{i}].workload",
                f"workload {workload!r} does not match any rendered Deployment/StatefulSet",
                f"name one of: {', '.join(sorted(names)) or 'no workload was rendered'}",
                "olares-overlay-gateway",
            )


# beclab/api manifest/types.go: the capabilities that give a container a device of the node (one pod at a time)
DEVICE_CAPABILITIES = frozenset({"device.serial", "device.video", "device.audio", "device.hid"})


def _workload_options(out: Out, manifest: dict[str, Any], documents: list[Document]) -> None:
    """CheckWorkloadOptions: when workloadOptions is declared, it names every rendered Deployment/StatefulSet and
    only those, each allow[] names containers of its workload, and a device capability needs one replica and, on a
    Deployment, strategy Recreate (a node's device cannot be held by an old and a new pod at once)."""
    if "workloadOptions" not in manifest:
        return
    options = as_map(manifest.get("workloadOptions"))
    workloads = {name_of(d): d for _, d, _ in documents if d.get("kind") in WORKLOADS}
    for name in sorted(set(workloads) - set(options)):
        out.add(
            MANIFEST,
            f"workloadOptions.{name}",
            f"workloadOptions is missing workload {name!r}",
            f"add workloadOptions.{name} (replicas: 1)",
            "olares-workload-options",
        )
    for name in sorted(set(map(str, options)) - set(workloads)):
        out.add(
            MANIFEST,
            f"workloadOptions.{name}",
            f"entry {name!r} does not match any rendered Deployment/StatefulSet",
            f"name one of: {', '.join(sorted(workloads)) or 'none was rendered'}",
            "olares-workload-options",
        )
    for name, document in sorted(workloads.items()):
        option = as_map(options.get(name))
        names = {str(c.get("name")) for _, c in containers(document, init=False)}
        device = False
        for i, capability in enumerate(as_list(option.get("allow"))):
            for container in map(str, as_list(as_map(capability).get("containers"))):
                if container not in names:
                    out.add(
                        MANIFEST,
                        f"workloadOptions.{name}.allow[{i}].containers",
                        f"targets unknown container {container!r}",
                        f"name one of: {', '.join(sorted(names))}",
                        "olares-workload-options",
                    )
            device = device or str(as_map(capability).get("type")) in DEVICE_CAPABILITIES
        if not device:
            continue
        replicas = option.get("replicas")
        if isinstance(replicas, bool) or replicas != 1:
            out.add(
                MANIFEST,
                f"workloadOptions.{name}.replicas",
                "must be 1 when a device capability is declared",
                "set replicas: 1",
                "olares-workload-options",
            )
        strategy = str(as_map(as_map(document.get("spec")).get("strategy")).get("type") or "RollingUpdate")
        if document.get("kind") == "Deployment" and strategy != "Recreate":
            out.add(
                "templates",
                f"Deployment/{name}.spec.strategy.type",
                f"Deployment {name!r} must use strategy.type=Recreate when a device capability is declared",
                "set strategy: {type: Recreate}",
                "olares-workload-options",
            )


def _upload_dest(out: Out, manifest: dict[str, Any], documents: list[Document]) -> None:
    """CheckUploadConfig: options.upload.dest is mounted by a main container of a workload."""
    dest = str(as_map(as_map(manifest.get("options")).get("upload")).get("dest") or "").rstrip("/")
    if not dest:
        return
    mounts = {
        str(as_map(m).get("mountPath", "")).rstrip("/")
        for _, d, _ in documents
        if d.get("kind") in WORKLOADS
        for _, c in containers(d, init=False)
        for m in as_list(c.get("volumeMounts"))
    }
    if dest not in mounts:
        out.add(
            MANIFEST, "options.upload.dest", f"no container mounts {dest!r}", "mount the upload folder", "olares-upload"
        )


def _deploymentname_of(out: Out, manifest: dict[str, Any], documents: list[Document], mode: str) -> None:
    """CheckDeploymentName: an app has a Deployment or StatefulSet named after it."""
    if str(manifest.get("olaresManifest.type") or "app") != "app":
        return
    app = str(as_map(manifest.get("metadata")).get("name", ""))
    if app not in {name_of(d) for _, d, _ in documents if d.get("kind") in WORKLOADS}:
        out.add(
            "templates",
            "",
            f"must have a Deployment or StatefulSet named {app!r} (mode {mode})",
            "name the main workload after the app",
            "olares-deployment",
        )


def _host_path(out: Out, source: str, document: dict[str, Any]) -> None:
    """CheckHostPath: a hostPath volume cannot be shared by an old and a new pod during a rolling update."""
    kind = document.get("kind")
    if kind not in WORKLOADS or not any("hostPath" in as_map(v) for v in as_list(pod_spec(document).get("volumes"))):
        return
    spec = as_map(document.get("spec"))
    field, strategy = (
        ("strategy", as_map(spec.get("strategy")).get("type"))
        if kind == "Deployment"
        else ("updateStrategy", as_map(spec.get("updateStrategy")).get("type"))
    )
    if strategy in (None, "", "RollingUpdate"):
        want = "Recreate" if kind == "Deployment" else "OnDelete"
        out.add(
            source,
            f"{kind}/{name_of(document)}.spec.{field}",
            "hostPath volumes cannot take a rolling update",
            f"set {field}: {{type: {want}}}",
            "olares-hostpath-recreate",
        )


def _sub_path_expr(out: Out, source: str, document: dict[str, Any]) -> None:
    """CheckSubPathExpr (oac resources/subpathexpr.go, beclab/Olares PR #3943): Olares prepares a pod's host
    folders before it starts and cannot expand a subPathExpr's variables, so it would prepare the wrong folder;
    the form is refused in every container of every pod kind."""
    for path, container in containers(document):
        for i, mount in enumerate(as_list(container.get("volumeMounts"))):
            expression = as_map(mount).get("subPathExpr")
            if expression:
                out.add(
                    source,
                    f"{path}.volumeMounts[{i}].subPathExpr",
                    f"volumeMounts.subPathExpr is not "
                    f"supported ({expression!r} in container {container.get('name')!r}, mount "
                    f"{as_map(mount).get('name')!r})",
                    "use a static subPath instead",
                    "olares-subpathexpr",
                )


def _namespace(out: Out, source: str, document: dict[str, Any], namespace: str) -> None:
    """CheckResourceNamespace: workloads in the app's namespace, other objects there or in user-system-*."""
    found = as_map(document.get("metadata")).get("namespace")
    if not found:
        return  # oac takes an object without a namespace for cluster-scoped
    kind = str(document.get("kind"))
    allowed = found == namespace or (
        kind not in {"Deployment", "StatefulSet", "DaemonSet"} and str(found).startswith("user-system-")
    )
    if not allowed:
        out.add(
            source,
            f"{kind}/{name_of(document)}.metadata.namespace",
            f"illegal namespace {found!r}",
            'use namespace: "{{ .Release.Namespace }}"',
            "olares-namespace",
        )


def _beclab(image: str) -> bool:
    return image.startswith("beclab/") or "/beclab/" in image


def _root(context: dict[str, Any]) -> str | None:
    if context.get("privileged") is True:
        return "privileged: true"
    if context.get("runAsUser") == 0:
        return "runAsUser: 0"
    if context.get("runAsNonRoot") is False:
        return "runAsNonRoot: false"
    return None


def _security_context(out: Out, source: str, document: dict[str, Any]) -> None:
    """CheckSecurityContextForNonBeclabImage: only beclab's images may run privileged or as root."""
    pod = _root(as_map(pod_spec(document).get("securityContext")))
    for at, container in containers(document):
        image = str(container.get("image") or "")
        reason = _root(as_map(container.get("securityContext"))) or pod
        if reason and not _beclab(image):
            out.add(
                source,
                f"{document.get('kind')}/{name_of(document)}.{at}.securityContext",
                f"non-beclab image {image!r} runs with a root-equivalent securityContext ({reason})",
                "drop privileged, runAsUser: 0 and runAsNonRoot: false",
                "olares-privileged",
            )


def _service_accounts(out: Out, documents: list[Document]) -> None:
    """CheckServiceAccountRules: no role bound to a service account may change nodes or network policies."""
    bound = {
        str(as_map(d.get("roleRef")).get("name"))
        for _, d, _ in documents
        if d.get("kind") in ("RoleBinding", "ClusterRoleBinding")
        and any(as_map(s).get("kind") == "ServiceAccount" for s in as_list(d.get("subjects")))
    }
    for source, document, _ in documents:
        if document.get("kind") not in ("Role", "ClusterRole") or name_of(document) not in bound:
            continue
        for i, rule in enumerate(as_list(document.get("rules"))):
            rule = as_map(rule)
            if (
                set(map(str, as_list(rule.get("resources")))) & FORBIDDEN_RESOURCES
                and set(map(str, as_list(rule.get("verbs")))) & FORBIDDEN_VERBS
            ):
                out.add(
                    source,
                    f"{document.get('kind')}/{name_of(document)}.rules[{i}]",
                    "service account role grants forbidden permissions (changing nodes or network policies)",
                    "narrow the rule",
                    "olares-service-account",
                )
