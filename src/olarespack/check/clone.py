"""A clone of an Olares engine-base app checked before `olares-cli market clone` makes it.

Olares' engine-base apps (vllmllmbasev3, llamacppllmbasev3) are cloned with install-time envs: MODEL_* for the
model, ENGINE_ARGS for the engine's own flags (the chart's wrapper appends them to the server's command line),
<ENGINE>_REQUIRED_GPU_MEMORY for the GPU memory it books. The clone checks only the title (DOMAIN.md 6b), so a
clone whose ENGINE_ARGS the engine refuses installs and then fails to serve. Here the chart is rendered with the
clone's envs as Olares would, the engine's container and image found in it, and ENGINE_ARGS judged by that
image's release table (engines/release_rules.command_line_problems); every env is held to what the manifest
declares of it (its name, regex, options) and the GPU memory to the hardware profile's card.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from olarespack.check.inputs import Target
from olarespack.check.render import render_values
from olarespack.core import quantity
from olarespack.core.errors import Problem, UsageError
from olarespack.core.hardware import profiles
from olarespack.engines.images import engine_of_image
from olarespack.engines.release_rules import command_line_problems
from olarespack.helm import Helm, split_rendered, values_file
from olarespack.olares.versions import render_modes

ENGINE_ARGS = "ENGINE_ARGS"
MAX_ARGS = 8_192  # characters of ENGINE_ARGS: a command line, not a file


@dataclass
class CloneReport:
    problems: list[Problem] = field(default_factory=list)
    engine: str = ""  # "vLLM docker.io/vllm/vllm-openai:v0.27.1", once found
    arguments: list[str] = field(default_factory=list)


def _declared(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(e.get("envName")): e for e in manifest.get("envs") or [] if isinstance(e, dict) and e.get("envName")}


def check_clone(target: Target, helm: Helm, env: dict[str, str], hardware: str) -> CloneReport:
    chart = target.chart
    label = chart.label
    report = CloneReport()
    declared = _declared(chart.manifest)
    if ENGINE_ARGS not in declared:
        report.problems.append(
            Problem(
                label,
                "envs",
                f"declares no {ENGINE_ARGS}: not an engine-base app a clone configures",
                "check an app cloned with --env ENGINE_ARGS=...",
                rule="clone-env",
            )
        )
        return report
    for name, value in env.items():
        report.problems += _env_problems(label, name, value, declared.get(name))
    values = {name: str(entry["default"]) for name, entry in declared.items() if entry.get("default") is not None}
    values.update(env)
    arguments = values.get(ENGINE_ARGS, "")
    if len(arguments) > MAX_ARGS:
        report.problems.append(
            Problem(
                label,
                f"olaresEnv.{ENGINE_ARGS}",
                f"{len(arguments)} characters (at most {MAX_ARGS})",
                "give the engine's flags only",
                rule="clone-env",
            )
        )
        return report
    try:
        tokens = shlex.split(arguments)
    except ValueError as exc:
        report.problems.append(
            Problem(
                label,
                f"olaresEnv.{ENGINE_ARGS}",
                f"cannot be split into words ({exc})",
                "close the quote",
                rule="clone-env",
            )
        )
        return report
    # llama.cpp's wrapper exports LLAMA_ARG_*=value words as env and drops other NAME=value words
    report.arguments = [token for token in tokens if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token)]
    images = _engine_images(target, helm, values, report)
    if images is None:
        return report
    if not images:
        report.problems.append(
            Problem(
                label,
                "templates",
                "no vLLM or llama.cpp container among what it renders",
                "check an engine-base app",
                rule="clone-env",
            )
        )
        return report
    kind, image = images[0]
    report.engine = f"{kind} {image}"
    report.problems += command_line_problems(label, f"olaresEnv.{ENGINE_ARGS}", kind, image, report.arguments)
    report.problems += _gpu_memory_problems(label, values, hardware)
    return report


def _env_problems(label: str, name: str, value: str, entry: dict[str, Any] | None) -> list[Problem]:
    where = f"olaresEnv.{name}"
    if entry is None:
        return [
            Problem(
                label,
                where,
                "is not an env the app declares: the clone ignores it",
                "use one of the manifest's envs[].envName",
                rule="clone-env",
            )
        ]
    problems = []
    pattern = entry.get("regex")
    if isinstance(pattern, str) and pattern:
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # a pattern Go reads and Python does not: Olares judges it
        if not matched:
            problems.append(
                Problem(
                    label,
                    where,
                    f"{value[:120]!r} does not match the app's pattern {pattern!r}",
                    "give a value of that form",
                    rule="clone-env",
                )
            )
    choices = [str(o.get("value")) for o in entry.get("options") or [] if isinstance(o, dict)]
    if choices:
        given = (
            [part.strip() for part in value.split(str(entry.get("splitter") or ","))]
            if entry.get("multiSelect")
            else [value]
        )
        problems += [
            Problem(
                label, where, f"{part[:60]!r} is not one of its options", f"use {', '.join(choices)}", rule="clone-env"
            )
            for part in given
            if part not in choices
        ]
    return problems


def _engine_images(
    target: Target, helm: Helm, values: dict[str, str], report: CloneReport
) -> list[tuple[str, str]] | None:
    """(kind, image) of every engine container the chart renders with the clone's envs; None when it does not
    render (the problem is in the report)."""
    chart = target.chart
    rendered = render_values(chart, render_modes(chart.manifest)[0])
    rendered["olaresEnv"] = {**rendered.get("olaresEnv", {}), **values}
    with values_file(rendered) as path:
        out = helm.template(target.folder, chart.name, f"{chart.name}-alice", path)
    if not out.ok:
        report.problems.append(
            Problem(
                chart.label,
                "",
                f"helm {helm.version} template with the clone's envs: {out.stderr.strip()[:2000]}",
                "fix the envs the template reads",
                rule="clone-env",
            )
        )
        return None
    try:
        documents = [document for _, document, _ in split_rendered(out.stdout)]
    except yaml.YAMLError as exc:
        report.problems.append(
            Problem(chart.label, "", f"what it renders is not YAML ({exc})", "fix the envs", rule="clone-env")
        )
        return None
    found = []
    for document in documents:
        pod = ((document.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or [] if isinstance(pod, dict) else []:
            image = str(container.get("image") or "") if isinstance(container, dict) else ""
            family = engine_of_image(image)
            if family is not None:
                found.append((family.engine, image))
    return found


def _gpu_memory_problems(label: str, values: dict[str, str], hardware: str) -> list[Problem]:
    """<ENGINE>_REQUIRED_GPU_MEMORY (8Gi, 8192Mi or 8192: MiB) against the card of the hardware profile."""
    found = profiles().get(hardware)
    if found is None:
        raise UsageError(f"--hardware: {hardware!r} is not a profile ({', '.join(sorted(profiles()))})")
    card = found.gpu_memory_mib * 2**20
    problems = []
    for name, value in values.items():
        if not name.endswith("_REQUIRED_GPU_MEMORY"):
            continue
        text = value.strip()
        try:
            booked = quantity.parse_bytes(text if text and not text.isdigit() else f"{text}Mi")
        except ValueError:
            problems.append(
                Problem(
                    label,
                    f"olaresEnv.{name}",
                    f"{value[:40]!r} is not a GPU memory size",
                    "write e.g. 20Gi or 20480Mi",
                    rule="clone-env",
                )
            )
            continue
        if booked > card:
            problems.append(
                Problem(
                    label,
                    f"olaresEnv.{name}",
                    f"books {booked / 2**30:.1f} GiB of GPU memory; the "
                    f"{hardware} card has {card / 2**30:.1f} GiB: the clone never schedules",
                    f"book at most {card // 2**20}Mi",
                    rule="clone-env",
                )
            )
    return problems
