"""The sweep inside a box: the installed app's Deployment patched to each value in turn, its rollout awaited, the
in-box bench run in the new pod (`kubectl exec`, bench/inbox.py), and the app put back to the spec's value. A
value whose pod never becomes ready (the engine refuses it) leaves a log saying so, with the pod's last lines,
and the sweep goes on; any other failed step ends the sweep, the spec's value put back.

Each value's chart is rendered here by helm, as a local sweep renders it, and compared with the spec's own
render: only the engine container's args and env may differ (what a speed setting changes). The patch is a JSON
patch (RFC 6902) whose `test` operations make the API server refuse it, changing nothing, unless the installed
Deployment runs the spec's image with the env names where the spec's chart has them. Before the first value a
patch of `test`s alone checks that the installed app is the spec's render (its args and the swept env values), so
putting it back restores what was installed. The steps are printed as a POSIX shell script; their logs are read
back by `olarespack bench sweep SPEC FIELD=... --responses DIR` into the local sweep's table, plot and --write."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from olarespack.core.errors import Problem, ProblemsError
from olarespack.engines.client import BenchError

if TYPE_CHECKING:
    from olarespack.bench.run import Result

ROLLOUT_MARGIN_S = 120  # beyond the startup probe's budget: the old pod's stop and the new pod's scheduling
ROLLOUT_FAILED = "### rollout failed"  # a value's log when its pod never became ready, the pod's log after it
POD_LOG_LINES = 40


@dataclass(frozen=True)
class Rendered:
    """The parts of a value's rendered chart the in-box sweep changes and checks."""

    value: Any
    deployment: dict[str, Any]
    others: dict[str, Any]  # every other rendered object, by kind/name: they must not change between values


def log_name(index: int) -> str:
    """The log of the index-th value (1-based), in the folder `--responses DIR` reads."""
    return f"sweep-{index}.log"


def _engine_container(deployment: dict[str, Any], container: str) -> tuple[int, dict[str, Any]]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    at = next(i for i, c in enumerate(containers) if c.get("name") == container)
    return at, containers[at]


def _without(deployment: dict[str, Any], at: int) -> dict[str, Any]:
    """The Deployment with the engine container's args and env values left out (env names kept)."""
    copy: dict[str, Any] = json.loads(json.dumps(deployment))
    engine = copy["spec"]["template"]["spec"]["containers"][at]
    engine.pop("args", None)
    engine["env"] = [entry.get("name") for entry in engine.get("env") or []]
    return copy


def _first_difference(left: Any, right: Any, path: str = "") -> str:
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right), key=str):
            if left.get(key) != right.get(key):
                return _first_difference(left.get(key), right.get(key), f"{path}.{key}")
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{index}]")
    return path.lstrip(".") or "the object"


def check_patchable(file: str, field: str, base: Rendered, variant: Rendered, container: str) -> None:
    """ProblemsError naming what a value changes beyond the engine container's args and env values."""
    at, _ = _engine_container(base.deployment, container)
    refuse = None
    if variant.others != base.others:
        changed = next(
            name
            for name in sorted(set(base.others) | set(variant.others))
            if base.others.get(name) != variant.others.get(name)
        )
        refuse = f"it changes {changed}"
    elif (before := _without(base.deployment, at)) != (after := _without(variant.deployment, at)):
        refuse = f"it changes the Deployment's {_first_difference(before, after)}"
    if refuse:
        raise ProblemsError(
            [
                Problem(
                    file,
                    field,
                    f"sweep {field}={variant.value} in the box: {refuse}, beyond the "
                    f"{container} container's args and env values that a patch changes",
                    "sweep it locally (--tiny or --models), or install the chart once per value",
                    rule="bump",
                )
            ]
        )


def _base(at: int) -> str:
    return f"/spec/template/spec/containers/{at}"


def patch(base: Rendered, target: Rendered, container: str) -> list[dict[str, Any]]:
    """The JSON patch that puts target's args and env values into a Deployment that runs base's image with base's
    env names (its `test`s say so), from whichever value it runs now."""
    at, engine = _engine_container(base.deployment, container)
    _, wanted = _engine_container(target.deployment, container)
    root = _base(at)
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"{root}/name", "value": container},
        {"op": "test", "path": f"{root}/image", "value": engine.get("image")},
    ]
    if "args" in wanted:  # `add` sets a member whether or not it is there (RFC 6902 4.1)
        ops.append({"op": "add", "path": f"{root}/args", "value": wanted["args"]})
    for index, entry in enumerate(wanted.get("env") or []):
        ops += [
            {"op": "test", "path": f"{root}/env/{index}/name", "value": entry.get("name")},
            {"op": "replace", "path": f"{root}/env/{index}", "value": entry},
        ]
    return ops


def swept_env(renders: list[Rendered], container: str) -> list[int]:
    """The env entries' indexes whose value differs between the values (what the patches need to replace)."""
    entries = [_engine_container(r.deployment, container)[1].get("env") or [] for r in renders]
    return [i for i in range(len(entries[0])) if len({json.dumps(e[i], sort_keys=True) for e in entries}) > 1]


def narrowed(ops: list[dict[str, Any]], env_indexes: list[int]) -> list[dict[str, Any]]:
    """A patch with only the env entries that change between the values (an untouched entry, such as one whose
    value Olares injects at install, is neither tested nor replaced)."""
    keep = []
    for op in ops:
        match = re.search(r"/env/(\d+)", op["path"])
        if match is None or int(match.group(1)) in env_indexes:
            keep.append(op)
    return keep


def installed_check(base: Rendered, container: str, env_indexes: list[int]) -> list[dict[str, Any]]:
    """A patch of `test`s alone: the installed Deployment runs the spec's render (image, args, the swept env)."""
    at, engine = _engine_container(base.deployment, container)
    root = _base(at)
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"{root}/name", "value": container},
        {"op": "test", "path": f"{root}/image", "value": engine.get("image")},
    ]
    if "args" in engine:
        ops.append({"op": "test", "path": f"{root}/args", "value": engine["args"]})
    env = engine.get("env") or []
    ops += [{"op": "test", "path": f"{root}/env/{i}", "value": env[i]} for i in env_indexes]
    return ops


def rollout_seconds(deployment: dict[str, Any], container: str) -> int:
    """How long a rollout may take: the startup probe's whole budget, plus a margin."""
    _, engine = _engine_container(deployment, container)
    probe = engine.get("startupProbe") or {}
    budget = int(probe.get("periodSeconds", 10)) * int(probe.get("failureThreshold", 3)) + int(
        probe.get("initialDelaySeconds", 0)
    )
    return budget + ROLLOUT_MARGIN_S


def script(
    app: str,
    namespace: str,
    container: str,
    field: str,
    renders: list[Rendered],
    base: Rendered,
    bench_argv: list[str],
    version: str,
) -> str:
    """The shell script that runs the sweep in the box (kubectl on the box or with its kubeconfig); bench_argv is
    the in-box bench's `kubectl exec` command, the loop's script its last item."""
    indexes = swept_env([base, *renders], container)
    timeout = rollout_seconds(base.deployment, container)

    def kubectl_patch(ops: list[dict[str, Any]]) -> str:
        return (
            f"kubectl -n {shlex.quote(namespace)} patch deployment {shlex.quote(app)} --type=json -p "
            f"{shlex.quote(json.dumps(ops, separators=(',', ':'), ensure_ascii=False))}"
        )

    rollout = f"kubectl -n {shlex.quote(namespace)} rollout status deployment/{shlex.quote(app)} --timeout={timeout}s"
    values = _comment(", ".join(str(r.value) for r in renders))
    again = shlex.quote(f"{field}={','.join(str(r.value) for r in renders)}")
    lines = [
        "#!/bin/sh",
        "# $(VAR) in the patches is Kubernetes' reference, $VAR in the loop the pod's: single quotes on purpose",
        "# shellcheck disable=SC2016",
        f"# olarespack: the in-box sweep of {app} {version}, {field} = {values}",
        "# Each value: the Deployment patched, its rollout awaited, the bench run in the new pod; then the",
        "# spec's value put back (also when a step fails). The logs are read back here with",
        f"#   olarespack bench sweep SPEC {_comment(again)} --responses .",
        "set -eu",
        "# the installed app must be the spec's render (its image, args and swept env), so putting it back",
        "# restores what was installed",
        kubectl_patch(installed_check(base, container, indexes)) + " --dry-run=server > /dev/null",
        "restore() {",
        f"  {kubectl_patch(narrowed(patch(base, base, container), indexes))}",
        f"  {rollout}",
        "}",
        "trap restore EXIT",
        "trap 'exit 130' INT TERM  # an interrupted sweep puts the value back too (exit runs the EXIT trap)",
        "# the bench loop, run by the pod's sh",
        f"LOOP={shlex.quote(bench_argv[-1])}",
        "bench() {",
        f'  {" ".join(shlex.quote(item) for item in bench_argv[:-1])} "$LOOP" > "$1"',
        "}",
    ]
    pod_log = (
        f"kubectl -n {shlex.quote(namespace)} logs deployment/{shlex.quote(app)} -c {shlex.quote(container)} "
        f"--tail={POD_LOG_LINES}"
    )
    for index, render in enumerate(renders, start=1):
        log = log_name(index)
        lines += [
            f"echo {shlex.quote(f'--- {field} = {render.value} ({index}/{len(renders)})')} >&2",
            kubectl_patch(narrowed(patch(base, render, container), indexes)),
            f"if {rollout}; then",
            f"  bench {log}",
            "else  # the value's pod did not become ready: its engine's last words, and on to the next value",
            f"  printf '{ROLLOUT_FAILED}\\n' > {log}",
            f"  {pod_log} >> {log} 2>&1 || true",
            "fi",
        ]
    return "\n".join(lines) + "\n"


def render(spec_file: Path, value: Any, text: str, folder: Path, app: str) -> Rendered:
    """One value's chart rendered by the real helm (from a copy as a local sweep makes it, sweep.spec_copy), its
    Deployment and its other objects."""
    from olarespack.bench.sweep import spec_copy
    from olarespack.check.inputs import Target
    from olarespack.helm import HelmBinary
    from olarespack.importer import rendered_documents
    from olarespack.project import load_resolved
    from olarespack.render import render_chart
    from olarespack.write import write_chart

    copy = spec_copy(spec_file, text, folder)
    label = str(spec_file)
    spec = load_resolved(copy, label, strict=False).spec
    chart = render_chart(spec, label)
    write_chart(chart, folder / "chart" / chart.name)
    documents = rendered_documents(Target(chart, folder / "chart" / chart.name), HelmBinary())
    objects = {f"the {d.get('kind')} {(d.get('metadata') or {}).get('name')}": d for d in documents}
    deployment = objects.pop(f"the Deployment {app}", None)
    if deployment is None:
        raise BenchError(f"{spec_file}: its chart renders no Deployment {app}, which the in-box sweep patches")
    return Rendered(value, deployment, objects)


def _comment(text: str) -> str:
    """Text for a `#` comment line of the script: one line, printable (a value's newline must not start a
    command)."""
    from olarespack.core.text import printable

    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", "?", printable(text))


def read_logs(
    folder: Path, count: int, read: Callable[[str, str], Result], refusal: Callable[[str], str | None], field: str
) -> list[Result | str]:
    """Each value's log from the folder (sweep-1.log ...), read by `read(text, name)`, or why that value was not
    measured (its pod never became ready, with the engine's words by `refusal`; a log that is not a finished
    bench); BenchError naming a missing log."""
    from olarespack.bench.inbox import MAX_LOG

    found: list[Result | str] = []
    for index in range(1, count + 1):
        path = folder / log_name(index)
        if not path.is_file():
            raise BenchError(
                f"{path}: no log of value {index} of {field} (the in-box sweep writes "
                f"{log_name(1)} to {log_name(count)} in the folder it runs in)"
            )
        with path.open("rb") as handle:
            data = handle.read(MAX_LOG + 1)
        if len(data) > MAX_LOG:
            raise BenchError(f"{path}: larger than {MAX_LOG >> 20} MiB, not a bench log")
        text = data.decode("utf-8", errors="replace")
        if text.startswith(ROLLOUT_FAILED):
            said = refusal(text[len(ROLLOUT_FAILED) :])
            found.append(f"the pod did not become ready (the rollout timed out){': ' + said if said else ''}")
            continue
        try:
            found.append(read(text, str(path)))
        except BenchError as exc:
            found.append(f"log: {exc}")
    return found
