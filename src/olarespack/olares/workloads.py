"""Olares' rules on what helm rendered, as oac runs them after rendering a chart (chart.go
lintRenderedScenario; internal/resources/limits.go, hostpath.go, namespace.go, securitycontext.go,
serviceaccount.go), plus olarespack's own advice about the GPU (HAMi) and the Hugging Face token, marked as
such. Pure: the parsed documents of one render in, Problems out."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from olarespack.core import quantity
from olarespack.core.chart import MANIFEST, Chart
from olarespack.core.errors import Problem
from olarespack.olares.versions import api_version, is_legacy, is_modern

WORKLOADS = frozenset({"Deployment", "StatefulSet"})
POD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"})
GPU_INJECT = "applications.app.bytetrade.io/gpu-inject"
FORBIDDEN_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection", "*"})
FORBIDDEN_RESOURCES = frozenset({"nodes", "networkpolicies", "*"})
Document = tuple[str, dict[str, Any], str]  # (template path, document, its text)


@dataclass(frozen=True)
class Rendered:
    """The manifests helm rendered for one accelerator mode, each with the template it came from."""

    mode: str
    namespace: str
    documents: list[Document]


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _name(document: dict[str, Any]) -> str:
    return str(_map(document.get("metadata")).get("name"))


def _pod_path(document: dict[str, Any]) -> str:
    kind = document.get("kind")
    return "spec" if kind == "Pod" else (
        "spec.jobTemplate.spec.template.spec" if kind == "CronJob" else "spec.template.spec")


def pod_spec(document: dict[str, Any]) -> dict[str, Any]:
    found: Any = document
    for part in _pod_path(document).split("."):
        found = _map(found).get(part)
    return _map(found)


def containers(document: dict[str, Any], init: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
    """(field path, container) of a workload's pod, init containers first."""
    pod = pod_spec(document)
    groups = (("initContainers", "containers") if init else ("containers",))
    for group in groups:
        for i, container in enumerate(_list(pod.get(group))):
            yield f"{_pod_path(document)}.{group}[{i}]", _map(container)


class _Out:
    def __init__(self, chart: Chart) -> None:
        self.chart = chart
        self.found: list[Problem] = []

    def add(self, source: str, field: str, message: str, fix: str, rule: str, severity: str = "error") -> None:
        self.found.append(Problem(self.chart.where(source), field, message, fix, rule=rule,
                                  severity="warning" if severity == "warning" else "error"))


def rendered_problems(chart: Chart, rendered: Rendered, secret_sentinel: str | None) -> list[Problem]:
    out = _Out(chart)
    manifest = chart.manifest
    documents = rendered.documents
    _upload_dest(out, manifest, documents)
    _deployment_name(out, manifest, documents, rendered.mode)
    _overlay_workloads(out, manifest, documents)
    _workload_options(out, manifest, documents)
    for source, document, text in documents:
        kind, name = str(document.get("kind")), _name(document)
        _host_path(out, source, document)
        _namespace(out, source, document, rendered.namespace)
        if kind in POD_KINDS:
            _security_context(out, source, document)
            _sub_path_expr(out, source, document)
        if kind in WORKLOADS:
            _gpu_memory(out, manifest, source, document, rendered.mode)
        if secret_sentinel and kind != "Secret" and secret_sentinel in text:
            out.add(source, f"{kind}/{name}", "the Hugging Face token appears outside a Secret", "put it in a "
                    "Secret and reference it with secretKeyRef", "secret-outside-secret", "warning")
    _service_accounts(out, documents)
    _resource_limits(out, manifest, documents, rendered.mode)
    return out.found


def _overlay_workloads(out: _Out, manifest: dict[str, Any], documents: list[Document]) -> None:
    """CheckOverlayGatewayWorkloads: each overlayGateway entrance names a rendered Deployment/StatefulSet."""
    names = {_name(d) for _, d, _ in documents if d.get("kind") in WORKLOADS}
    for i, entry in enumerate(_list(_map(manifest.get("overlayGateway")).get("entrances"))):
        workload = str(_map(entry).get("workload") or "")
        if workload and workload not in names:
            out.add(MANIFEST, f"overlayGateway.entrances[{i}].workload",
                    f"workload {workload!r} does not match any rendered Deployment/StatefulSet",
                    f"name one of: {', '.join(sorted(names)) or 'no workload was rendered'}", "olares-overlay-gateway")


# beclab/api manifest/types.go: the capabilities that give a container a device of the node (one pod at a time)
DEVICE_CAPABILITIES = frozenset({"device.serial", "device.video", "device.audio", "device.hid"})


def _workload_options(out: _Out, manifest: dict[str, Any], documents: list[Document]) -> None:
    """CheckWorkloadOptions: when workloadOptions is declared, it names every rendered Deployment/StatefulSet and
    only those, each allow[] names containers of its workload, and a device capability needs one replica and, on a
    Deployment, strategy Recreate (a node's device cannot be held by an old and a new pod at once)."""
    if "workloadOptions" not in manifest:
        return
    options = _map(manifest.get("workloadOptions"))
    workloads = {_name(d): d for _, d, _ in documents if d.get("kind") in WORKLOADS}
    for name in sorted(set(workloads) - set(options)):
        out.add(MANIFEST, f"workloadOptions.{name}", f"workloadOptions is missing workload {name!r}",
                f"add workloadOptions.{name} (replicas: 1)", "olares-workload-options")
    for name in sorted(set(map(str, options)) - set(workloads)):
        out.add(MANIFEST, f"workloadOptions.{name}", f"entry {name!r} does not match any rendered "
                "Deployment/StatefulSet", f"name one of: {', '.join(sorted(workloads)) or 'none was rendered'}",
                "olares-workload-options")
    for name, document in sorted(workloads.items()):
        option = _map(options.get(name))
        names = {str(c.get("name")) for _, c in containers(document, init=False)}
        device = False
        for i, capability in enumerate(_list(option.get("allow"))):
            for container in map(str, _list(_map(capability).get("containers"))):
                if container not in names:
                    out.add(MANIFEST, f"workloadOptions.{name}.allow[{i}].containers", f"targets unknown container "
                            f"{container!r}", f"name one of: {', '.join(sorted(names))}", "olares-workload-options")
            device = device or str(_map(capability).get("type")) in DEVICE_CAPABILITIES
        if not device:
            continue
        replicas = option.get("replicas")
        if isinstance(replicas, bool) or replicas != 1:
            out.add(MANIFEST, f"workloadOptions.{name}.replicas", "must be 1 when a device capability is declared",
                    "set replicas: 1", "olares-workload-options")
        strategy = str(_map(_map(document.get("spec")).get("strategy")).get("type") or "RollingUpdate")
        if document.get("kind") == "Deployment" and strategy != "Recreate":
            out.add("templates", f"Deployment/{name}.spec.strategy.type", f"Deployment {name!r} must use "
                    "strategy.type=Recreate when a device capability is declared", "set strategy: {type: Recreate}",
                    "olares-workload-options")


def _upload_dest(out: _Out, manifest: dict[str, Any], documents: list[Document]) -> None:
    """CheckUploadConfig: options.upload.dest is mounted by a main container of a workload."""
    dest = str(_map(_map(manifest.get("options")).get("upload")).get("dest") or "").rstrip("/")
    if not dest:
        return
    mounts = {str(_map(m).get("mountPath", "")).rstrip("/") for _, d, _ in documents if d.get("kind") in WORKLOADS
              for _, c in containers(d, init=False) for m in _list(c.get("volumeMounts"))}
    if dest not in mounts:
        out.add(MANIFEST, "options.upload.dest", f"no container mounts {dest!r}", "mount the upload folder",
                "olares-upload")


def _deployment_name(out: _Out, manifest: dict[str, Any], documents: list[Document], mode: str) -> None:
    """CheckDeploymentName: an app has a Deployment or StatefulSet named after it."""
    if str(manifest.get("olaresManifest.type") or "app") != "app":
        return
    app = str(_map(manifest.get("metadata")).get("name", ""))
    if app not in {_name(d) for _, d, _ in documents if d.get("kind") in WORKLOADS}:
        out.add("templates", "", f"must have a Deployment or StatefulSet named {app!r} (mode {mode})",
                "name the main workload after the app", "olares-deployment")


def _host_path(out: _Out, source: str, document: dict[str, Any]) -> None:
    """CheckHostPath: a hostPath volume cannot be shared by an old and a new pod during a rolling update."""
    kind = document.get("kind")
    if kind not in WORKLOADS or not any("hostPath" in _map(v) for v in _list(pod_spec(document).get("volumes"))):
        return
    spec = _map(document.get("spec"))
    field, strategy = ("strategy", _map(spec.get("strategy")).get("type")) if kind == "Deployment" else (
        "updateStrategy", _map(spec.get("updateStrategy")).get("type"))
    if strategy in (None, "", "RollingUpdate"):
        want = "Recreate" if kind == "Deployment" else "OnDelete"
        out.add(source, f"{kind}/{_name(document)}.spec.{field}", "hostPath volumes cannot take a rolling update",
                f"set {field}: {{type: {want}}}", "olares-hostpath-recreate")


def _sub_path_expr(out: _Out, source: str, document: dict[str, Any]) -> None:
    """CheckSubPathExpr (oac resources/subpathexpr.go, beclab/Olares PR #3943): Olares prepares a pod's host
    folders before it starts and cannot expand a subPathExpr's variables, so it would prepare the wrong folder;
    the form is refused in every container of every pod kind."""
    for path, container in containers(document):
        for i, mount in enumerate(_list(container.get("volumeMounts"))):
            expression = _map(mount).get("subPathExpr")
            if expression:
                out.add(source, f"{path}.volumeMounts[{i}].subPathExpr", f"volumeMounts.subPathExpr is not "
                        f"supported ({expression!r} in container {container.get('name')!r}, mount "
                        f"{_map(mount).get('name')!r})", "use a static subPath instead", "olares-subpathexpr")


def _namespace(out: _Out, source: str, document: dict[str, Any], namespace: str) -> None:
    """CheckResourceNamespace: workloads in the app's namespace, other objects there or in user-system-*."""
    found = _map(document.get("metadata")).get("namespace")
    if not found:
        return  # oac takes an object without a namespace for cluster-scoped
    kind = str(document.get("kind"))
    allowed = found == namespace or (kind not in {"Deployment", "StatefulSet", "DaemonSet"}
                                     and str(found).startswith("user-system-"))
    if not allowed:
        out.add(source, f"{kind}/{_name(document)}.metadata.namespace", f"illegal namespace {found!r}",
                'use namespace: "{{ .Release.Namespace }}"', "olares-namespace")


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


def _security_context(out: _Out, source: str, document: dict[str, Any]) -> None:
    """CheckSecurityContextForNonBeclabImage: only beclab's images may run privileged or as root."""
    pod = _root(_map(pod_spec(document).get("securityContext")))
    for at, container in containers(document):
        image = str(container.get("image") or "")
        reason = _root(_map(container.get("securityContext"))) or pod
        if reason and not _beclab(image):
            out.add(source, f"{document.get('kind')}/{_name(document)}.{at}.securityContext",
                    f"non-beclab image {image!r} runs with a root-equivalent securityContext ({reason})",
                    "drop privileged, runAsUser: 0 and runAsNonRoot: false", "olares-privileged")


def _service_accounts(out: _Out, documents: list[Document]) -> None:
    """CheckServiceAccountRules: no role bound to a service account may change nodes or network policies."""
    bound = {str(_map(d.get("roleRef")).get("name")) for _, d, _ in documents
             if d.get("kind") in ("RoleBinding", "ClusterRoleBinding")
             and any(_map(s).get("kind") == "ServiceAccount" for s in _list(d.get("subjects")))}
    for source, document, _ in documents:
        if document.get("kind") not in ("Role", "ClusterRole") or _name(document) not in bound:
            continue
        for i, rule in enumerate(_list(document.get("rules"))):
            rule = _map(rule)
            if set(map(str, _list(rule.get("resources")))) & FORBIDDEN_RESOURCES and \
                    set(map(str, _list(rule.get("verbs")))) & FORBIDDEN_VERBS:
                out.add(source, f"{document.get('kind')}/{_name(document)}.rules[{i}]", "service account role "
                        "grants forbidden permissions (changing nodes or network policies)", "narrow the rule",
                        "olares-service-account")


def _requirement(manifest: dict[str, Any], mode: str) -> dict[str, Any] | None:
    """The requirement fields Olares compares a render with, or None when it compares nothing (v2, or a
    0.12.0 manifest without spec.accelerator)."""
    spec = _map(manifest.get("spec"))
    if api_version(manifest) == "v2":
        return None
    if is_legacy(manifest):
        return spec
    accelerator = [_map(e) for e in _list(spec.get("accelerator"))]
    if is_modern(manifest) and not accelerator:
        return None
    return next((e for e in accelerator if str(e.get("mode")) == mode), None)


def _resource_limits(out: _Out, manifest: dict[str, Any], documents: list[Document], mode: str) -> None:
    """checkResourceLimits / CheckResourceLimits: every main container of a workload sets cpu and memory
    requests and limits, and their sums fit the manifest's requirement for this mode. Where oac compares
    nothing (apiVersion v2, or a 0.12.0 manifest without accelerator[]), the same findings are olarespack's
    advice: Olares admits the app by what the manifest declares, Kubernetes schedules the pod by its requests."""
    mirrored = _requirement(manifest, mode)
    fields = mirrored if mirrored is not None else _map(manifest.get("spec"))
    severity = "error" if mirrored is not None else "warning"
    advice = "" if mirrored is not None else "; Olares does not compare these for this manifest, so this is advice"
    sums = {"requests.cpu": Fraction(0), "requests.memory": Fraction(0), "limits.cpu": Fraction(0),
            "limits.memory": Fraction(0)}
    for source, document, _ in documents:
        if document.get("kind") not in WORKLOADS:
            continue
        for at, container in containers(document, init=False):
            where = f"{document.get('kind')}/{_name(document)}.{at}.resources"
            resources = _map(container.get("resources"))
            amounts: dict[str, Fraction] = {}
            for side in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    raw = _map(resources.get(side)).get(resource)
                    try:
                        amount = quantity.parse_quantity(str(raw)) if raw is not None else Fraction(0)
                    except ValueError as exc:
                        out.add(source, f"{where}.{side}.{resource}", str(exc), "write a quantity",
                                "olares-container-resources", severity)
                        amount = Fraction(0)
                    if amount == 0:
                        out.add(source, where, f"must set {resource} {side[:-1]}{advice}", f"set {side}.{resource}",
                                "olares-container-resources", severity)
                    amounts[f"{side}.{resource}"] = amount
                    sums[f"{side}.{resource}"] += amount
            for resource in ("cpu", "memory"):
                if amounts[f"limits.{resource}"] and amounts[f"requests.{resource}"] > amounts[f"limits.{resource}"]:
                    out.add(source, f"{where}.requests.{resource}",
                            f"requests.{resource} must be <= limits.{resource}{advice}",
                            "lower the request or raise the limit", "olares-container-resources", severity)
    for total, declared in (("limits.cpu", "limitedCpu"), ("limits.memory", "limitedMemory"),
                            ("requests.cpu", "requiredCpu"), ("requests.memory", "requiredMemory")):
        raw = str(fields.get(declared) or "").strip()
        if not raw or raw == "-1":
            continue
        try:
            allowed = quantity.parse_quantity(raw)
        except ValueError:
            allowed = Fraction(0)
        if sums[total] > allowed:
            shown = quantity.format_cpu(int(sums[total] * 1000)) if "cpu" in total else \
                quantity.format_bytes(int(sums[total]))
            out.add(MANIFEST, f"{_path(manifest, mode)}.{declared}",
                    f"sum of container resources.{total} ({shown}, mode {mode or 'default'}) must be <= {declared} "
                    f"({raw}){advice}", f"declare at least {shown} or lower the containers' resources",
                    "olares-resource-sums", severity)


def _path(manifest: dict[str, Any], mode: str) -> str:
    accelerator = _list(_map(manifest.get("spec")).get("accelerator"))
    for i, entry in enumerate(accelerator):
        if str(_map(entry).get("mode")) == mode:
            return f"spec.accelerator[{i}]"
    return "spec"


def _injected(document: dict[str, Any], name: str) -> bool:
    value = str(_map(_map(document.get("metadata")).get("annotations")).get(GPU_INJECT, ""))
    return value == "true" or name in {part.strip() for part in value.split(",")}


def _gpu_memory(out: _Out, manifest: dict[str, Any], source: str, document: dict[str, Any], mode: str) -> None:
    """olarespack's advice, from HAMi and Olares' GPU webhook (app-service webhook.go addGpuResourceLimits):
    HAMi reads nvidia.com/gpumem as bare MiB, and the webhook sets the limit of an injected container to
    requiredGPUMemory in MiB; a request that differs makes Kubernetes refuse the pod (extended resources need
    requests equal to limits)."""
    fields = _requirement(manifest, mode) or {}
    required = fields.get("requiredGPUMemory") if mode == "nvidia" else None
    try:
        booked = quantity.mib(quantity.parse_bytes(str(required))) if required not in (None, "", "-1") else None
    except ValueError:
        booked = None
    for at, container in containers(document):
        resources = _map(container.get("resources"))
        where = f"{document.get('kind')}/{_name(document)}.{at}.resources"
        for side in ("requests", "limits"):
            value = _map(resources.get(side)).get("nvidia.com/gpumem")
            if value is not None and not str(value).isdigit():
                out.add(source, f"{where}.{side}.nvidia.com/gpumem", f"{value!r}: HAMi reads a bare integer of MiB "
                        "and misreads unit suffixes", "write the MiB as a bare integer, e.g. 23552", "gpumem-bare-mib")
        request = _map(resources.get("requests")).get("nvidia.com/gpumem")
        if booked is not None and request is not None and str(request).isdigit() and \
                _injected(document, str(container.get("name"))) and int(str(request)) != booked:
            out.add(source, f"{where}.requests.nvidia.com/gpumem", f"{request} MiB, but Olares sets the limit to "
                    f"requiredGPUMemory ({required} = {booked} MiB): Kubernetes refuses a pod whose GPU memory request "
                    "differs from its limit", f"request {booked}", "gpu-memory-request")
