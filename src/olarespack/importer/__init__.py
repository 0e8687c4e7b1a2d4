"""import: a hand-written chart becomes a spec whose build runs the same server.

The chart is rendered by the real helm with the values Olares injects, its engine container found, and the
command line it finally runs resolved (ConfigMaps, $(VAR), shell wrappers; importer/argv.py). That command
line is read back into the engine's spec fields by the engine (engines/<engine>/importer.py), the market
texts, resources and release notes into the rest (importer/facts.py). The spec is then built, and its server
command line compared with the chart's: the import says what differs and what the spec cannot express, never
dropping anything silently."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from olarespack.check import kube
from olarespack.check.inputs import Target
from olarespack.check.render import render_values
from olarespack.core.errors import OlaresPackError
from olarespack.core.types import SHARED_MODEL_DIR
from olarespack.engines import engine_of_command, titles
from olarespack.engines.importing import ImportSource, RemoteFile, remote_files
from olarespack.engines.protocol import EngineBase
from olarespack.helm import Helm, split_rendered, values_file
from olarespack.importer import facts
from olarespack.importer.argv import ContainerEnv, Resolved, container_env, mappings, mounted_files, resolve
from olarespack.importer.downloads import script_urls
from olarespack.importer.pinned import SHAPE_ENV, pinned_chart, shape_mount, spec_section
from olarespack.importer.tokens import is_secret, without_tokens
from olarespack.importer.verify import verify
from olarespack.olares.versions import render_modes

MAX_WRITTEN = 64 * 1024  # a chat template is a few KB; the spec holds at most this
WORKLOADS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})
MODEL_MOUNT = "/models"
# Env the spec's chart sets itself: the Hugging Face endpoint, token and cache, and HAMi's memory limit.
CHART_ENV = frozenset({"HF_HOME", "HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH", "CUDA_DEVICE_MEMORY_LIMIT_0"})


class ImportFailed(OlaresPackError):
    """A chart olarespack cannot read a server from (no spec is written)."""


@dataclass
class ImportResult:
    label: str
    name: str
    text: str  # the spec, as written
    notes: list[str] = field(default_factory=list)  # what the spec does differently on purpose
    unexpressed: list[str] = field(default_factory=list)  # what the spec cannot say
    chart_argv: list[str] = field(default_factory=list)
    spec_argv: list[str] = field(default_factory=list)
    buildable: bool = True  # false: the spec would not build, and is not written

    @property
    def complete(self) -> bool:
        return not self.unexpressed


@dataclass
class _Container:
    workload: str
    spec: Mapping[str, Any]
    env: ContainerEnv
    resolved: Resolved
    engine: EngineBase | None  # the engine whose server it runs, if any
    volumes: dict[str, Any]  # the pod's volumes by name

    @property
    def kind(self) -> str | None:
        return self.engine.kind if self.engine else None


def rendered_documents(target: Target, helm: Helm) -> list[dict[str, Any]]:
    """The chart as helm renders it for Olares (the values Olares injects), each object checked by the Kubernetes
    schemas lint uses."""
    chart = target.chart
    mode = render_modes(chart.manifest)[0]
    with values_file(render_values(chart, mode)) as values:
        out = helm.template(target.folder, chart.name, f"{chart.name}-alice", values)
    if not out.ok:
        raise ImportFailed(f"{chart.label}: helm {helm.version} template failed: {out.stderr.strip()[:2000]}")
    try:
        documents = [document for _, document, _ in split_rendered(out.stdout)]
    except yaml.YAMLError as exc:
        raise ImportFailed(f"{chart.label}: the rendered chart is not YAML ({exc})") from None
    # What import reads (workloads, ConfigMaps) must have the shapes Kubernetes gives them: a chart the
    # cluster would refuse is refused here, by the same schemas lint uses, before any field is read.
    refused = [
        f"{d.get('kind')}/{_name(d)} {error}"
        for d in documents
        if d.get("kind") in WORKLOADS | {"ConfigMap"}
        for error in kube.schema_errors(d)[:3]
    ]
    if refused:
        raise ImportFailed(f"{chart.label}: Kubernetes would refuse what it renders: {'; '.join(refused[:5])}")
    return documents


def _name(document: dict[str, Any]) -> str:
    metadata = document.get("metadata")
    return str(metadata.get("name")) if isinstance(metadata, dict) else "?"


def downloads(containers: list[_Container], configmaps: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The download lines of every container's script (init containers included), variables filled in."""
    found: dict[str, str] = {}
    for index, container in enumerate(containers):
        files = mounted_files(container.spec, container.volumes, configmaps)
        name = str(container.spec.get("name") or index)
        found.update(script_urls(container.spec, container.env, files, f"{container.workload}/{name}"))
    return found


def _containers(documents: list[dict[str, Any]]) -> tuple[list[_Container], dict[str, dict[str, str]]]:
    configmaps = {
        str((d.get("metadata") or {}).get("name")): {str(k): str(v) for k, v in (d.get("data") or {}).items()}
        for d in documents
        if d.get("kind") == "ConfigMap"
    }
    found = []
    for document in documents:
        if document.get("kind") not in WORKLOADS:
            continue
        pod = ((document.get("spec") or {}).get("template") or {}).get("spec") or {}
        label = f"{document.get('kind')}/{(document.get('metadata') or {}).get('name')}"
        volumes = {str(v.get("name")): v for v in mappings(pod.get("volumes"))}
        for init, container in [
            *((True, c) for c in mappings(pod.get("initContainers"))),
            *((False, c) for c in mappings(pod.get("containers"))),
        ]:
            env = container_env(container, configmaps)
            resolved = resolve(container, env, mounted_files(container, volumes, configmaps))
            # an init container finishes before the pod serves: it may run the engine's image, never its server
            engine = None if init else engine_of_command(resolved.argv, str(container.get("image") or ""))
            found.append(_Container(label, container, env, resolved, engine, volumes))
    return found, configmaps


def _command(argv: list[str], model_name: str) -> list[str]:
    """The executable words of a pinned-model server's command line: what comes before the model (and the flag
    naming it); none where the wrapper's executable is unknown (set at boot)."""
    words = argv[: argv.index(model_name)] if model_name in argv else []
    if words and words[-1].startswith("-"):
        words = words[:-1]
    return words if words and all(words) else []


def _referenced(containers: list[_Container]) -> str:
    """Every command and arg of the pod's containers: an env var named there is consumed by the chart."""
    return "\n".join(str(x) for c in containers for x in [*(c.spec.get("command") or []), *(c.spec.get("args") or [])])


def server_command_line(target: Target, helm: Helm) -> tuple[str, list[str], list[str]]:
    """(engine kind, the command line its server finally runs, what could not be resolved) of a chart, as
    helm renders it for Olares: what import reads, and what a round trip compares."""
    containers, _ = _containers(rendered_documents(target, helm))
    engine, server = _server(target.chart.label, containers)
    return engine.kind, server.resolved.argv, server.resolved.unresolved


def server_container(target: Target, helm: Helm) -> tuple[EngineBase, list[str], dict[str, str], list[str]]:
    """(the engine, the command line its server finally runs, the container's env as the pod sees it, what could
    not be resolved) of a chart rendered for Olares: what smoke boots."""
    containers, _ = _containers(rendered_documents(target, helm))
    engine, server = _server(target.chart.label, containers)
    return engine, server.resolved.argv, dict(server.env.values), server.resolved.unresolved


def _server(label: str, containers: list[_Container]) -> tuple[EngineBase, _Container]:
    """The first container that runs an engine's server, and that engine."""
    for container in containers:
        if container.engine is not None:
            return container.engine, container
    images = ", ".join(sorted({str(c.spec.get("image")) for c in containers})) or "none"
    raise ImportFailed(f"{label}: no {' or '.join(titles())} server among its containers (images: {images})")


def _carried_env(
    server: EngineBase, engine: _Container, containers: list[_Container], result: ImportResult, pinned: bool = False
) -> dict[str, str]:
    text = _referenced(containers)
    carried: dict[str, str] = {}
    owned = CHART_ENV | SHAPE_ENV if pinned else CHART_ENV
    for name, value in sorted(engine.env.values.items()):
        used = re.search(rf"\$\(?{{?{re.escape(name)}\b", text) or name in engine.resolved.script_vars
        if used or name in owned:
            continue
        if is_secret(value) or "TOKEN" in name:
            result.notes.append(f"env {name}: a token is never copied into a spec (the chart's Secret carries it)")
            continue
        if engine.env.origin.get(name, "env") != "env" and not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            continue
        carried[name] = value
    result.notes += server.env_notes(engine.env.values)
    for name in sorted(engine.env.secret):
        if name in CHART_ENV:  # the token Olares gives: the spec's chart passes it from its own Secret
            result.notes.append(f"env {name}: from a Secret, as the spec's chart passes Olares' token")
            continue
        result.unexpressed.append(f"env {name}: comes from a Secret or the pod's own fields")
    return carried


def _mounts(
    engine: _Container,
    pod_volumes: Mapping[str, Any],
    files: set[str],
    argv: list[str],
    carried: set[str],
    result: ImportResult,
    pinned: bool = False,
) -> list[str]:
    """The scratch folders (emptyDir mounts) the spec carries; any other mount but /models (or a pinned-model
    pod's own) is reported."""
    scratch = []
    command = [str(x) for x in engine.spec.get("command") or []]
    for mount in mappings(engine.spec.get("volumeMounts")):
        path = str(mount.get("mountPath"))
        volume = pod_volumes.get(str(mount.get("name"))) or {}
        if path == MODEL_MOUNT or (pinned and shape_mount(mount, volume, command)) or _token_volume(volume):
            continue
        if path == SHARED_MODEL_DIR and "hostPath" in volume:
            result.notes.append(
                f"volume mount {path}: the box's shared model folder (hostPath "
                f"{(volume.get('hostPath') or {}).get('path')}); the spec's chart mounts Olares' "
                "sharedlib ai/model there, where a model folder under it lives"
            )
            continue
        if "emptyDir" in volume and not mount.get("subPath"):
            scratch.append(path)
            continue
        kind = next((k for k in volume if k != "name"), "unknown")
        result.unexpressed.append(
            f"volume mount {path} ({mount.get('name')}, {kind}): the spec's pod mounts "
            f"{MODEL_MOUNT} and empty scratch folders only"
        )
    for item in argv:
        if (
            item.startswith(f"{MODEL_MOUNT}/")
            and item.endswith((".jinja", ".json", ".txt", ".yaml"))
            and item.rsplit("/", 1)[-1] not in files
            and item not in carried
        ):
            result.unexpressed.append(
                f"{item}: written into the pod by the chart, not downloaded from a "
                "repository; the spec's chart does not write it"
            )
    return scratch


def _token_volume(volume: Mapping[str, Any]) -> bool:
    """A Secret volume holding the Hugging Face token alone: the spec's chart mounts Olares' token the same way."""
    secret = volume.get("secret")
    items = mappings(secret.get("items")) if isinstance(secret, Mapping) else []
    return bool(items) and all(str(item.get("key")) == "HF_TOKEN" for item in items)


_BASE64_WRITE = re.compile(
    r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?\"?\s*\|\s*base64\s+(?:-d|--decode)\s*>\s*"
    r"\"?([^\s\";|&]+)"
)


def written_files(chart: Any, containers: list[_Container]) -> dict[str, str]:
    """File name -> text of what a chart writes into its pod itself: a script's `echo "$X" | base64 -d > F`
    with X from the env or a ConfigMap (what the pod really gets), else a file of the chart of that name."""
    found: dict[str, str] = {}
    for path in sorted(chart):
        if "/" not in path and len(chart[path]) <= MAX_WRITTEN and path.endswith((".jinja", ".j2")):
            found[path] = chart[path]
    for container in containers:  # what the pod really gets wins over a chart file of the same name
        for match in _BASE64_WRITE.finditer(_referenced([container])):
            value = container.env.values.get(match.group(1), "")
            text = None
            try:
                if len(value) <= 2 * MAX_WRITTEN:
                    text = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                pass
            if text:
                found[match.group(2).rsplit("/", 1)[-1]] = text
    return found


def import_chart(
    target: Target, helm: Helm, spec_file: Path, hardware: str = "rtx5090-laptop", owners: tuple[str, ...] = ()
) -> ImportResult:
    """Read one chart into a spec (not written: the caller writes `text` to spec_file)."""
    chart = target.chart
    documents = rendered_documents(target, helm)
    containers, configmaps = _containers(documents)
    server, engine = _server(chart.label, containers)
    result = ImportResult(chart.label, chart.name, "")
    image = str(engine.spec.get("image") or "")
    pinned = pinned_chart(containers, engine, chart.manifest)
    read = pinned and server.read_pinned(
        pinned.model_name,
        pinned.model_source,
        pinned.engine_args,
        _command(engine.resolved.argv, pinned.model_name),
        image,
    )
    if pinned and read:
        result.notes.append(
            f"a pinned-model chart: the server runs what its wrapper makes of MODEL_NAME and "
            f"ENGINE_ARGS ({pinned.model_name}; a wrapper that rewrites ENGINE_ARGS at boot, from a "
            "tune script or the Model Console's hand-off file, is not followed)"
        )
        engine.resolved.argv, engine.resolved.unresolved = read.chart_argv, []
        engine.resolved.env_prefix.update(read.env)
        result.unexpressed += [f"ENGINE_ARGS word {word}: the wrapper drops it (not a flag)" for word in read.dropped]
    # the command line compared is the chart's without its secrets: the token becomes the spec's Secret
    engine.resolved.argv = without_tokens(engine.resolved.argv, result.notes, result.unexpressed)
    result.chart_argv = engine.resolved.argv
    result.unexpressed += [f"server command line: {u}" for u in engine.resolved.unresolved]
    for other in {c.workload for c in containers} - {engine.workload} - {pinned.workload if pinned else ""}:
        result.unexpressed.append(f"{other}: a second workload; the spec's chart runs one pod")
    values = {k: v for c in containers for k, v in c.env.values.items()}
    values.update(downloads(containers, configmaps))
    files = remote_files(values)
    if read:
        files.update({name: RemoteFile(repo, "main", path) for name, (repo, path) in read.files.items()})
    imported = server.import_argv(
        read.argv if read else engine.resolved.argv, image, ImportSource(files, written_files(chart, containers))
    )
    result.unexpressed += imported.unexpressed
    result.notes += imported.notes
    prefixed = {k: v for k, v in engine.resolved.env_prefix.items() if not (is_secret(v) or "TOKEN" in k)}
    for name in sorted(set(engine.resolved.env_prefix) - set(prefixed)):
        result.notes.append(f"env {name}: a token is never copied into a spec (the chart's Secret carries it)")
    env = {**_carried_env(server, engine, containers, result, pinned is not None), **prefixed}
    if env:
        imported.data["env"] = env
    downloaded = set(remote_files(values))
    carried = {str(imported.data["chat_template"]["path"])} if "chat_template" in imported.data else set()
    scratch = _mounts(engine, engine.volumes, downloaded, engine.resolved.argv, carried, result, pinned is not None)
    if scratch:
        imported.data["scratch"] = scratch
    data = facts.spec_data(chart, engine.spec, engine.env.values, imported.data, hardware, result, owners)
    if pinned:
        model = imported.data.get("model")
        data["olares"] = {"pinned_model": spec_section(pinned, model.get("file") if isinstance(model, dict) else None)}
    verify(result, data, spec_file)
    if not result.buildable:
        # a spec that would not build is never written: what it could not carry, each on its own line
        raise ImportFailed(
            f"{chart.label}: its spec would not build, so none is written; not carried:\n"
            + "\n".join(f"  - {item}" for item in result.unexpressed)
            + "\n "
        )
    return result
