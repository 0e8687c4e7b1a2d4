"""`olarespack lint --engine-config`: each spec's chart rendered and templated by the real helm with Olares'
values, its server container read as the pod runs it ($(SPEC_CONFIG) and the rest expanded: importer's reader),
and that command line handed to its engine's judge (EngineSmoke.judge: vLLM's own config code for the image's
release, engines/vllm/judging.py). An engine without a judge says nothing; a spec that does not load or render is
left to lint, which reports why."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from olarespack.check.inputs import Target
from olarespack.core.errors import OlaresPackError, Problem
from olarespack.engines import engine_for
from olarespack.engines.release_files import cache_dir
from olarespack.engines.smoke import ChartCommand, EngineSmoke
from olarespack.helm import HelmBinary
from olarespack.importer import server_container
from olarespack.project import load_resolved
from olarespack.render import render_chart
from olarespack.write import write_chart


def _command(spec_file: Path, work: Path, strict: bool) -> tuple[EngineSmoke[Any], Any, ChartCommand] | None:
    """The spec's engine's smoke, its engine section and its pod's command line. strict: a spec with errors is
    left to lint (ProblemsError), which reports them; otherwise it is judged as it renders (the tests hold lint's
    own refusals against the engine's)."""
    file = str(spec_file)
    spec = load_resolved(spec_file, file, strict=strict).spec
    if spec.olares.pinned_model is not None:  # ENGINE_ARGS is the same command line but the wrapper's words
        olares = spec.olares.model_copy(update={"pinned_model": None, "llm_gateway": None})
        spec = spec.model_copy(update={"olares": olares})
    chart = render_chart(spec, file)
    folder = work / chart.name
    write_chart(chart, folder)
    engine, argv, env, unresolved = server_container(Target(chart, folder), HelmBinary())
    if unresolved:
        return None  # lint says the pod would not resolve them
    return engine.smoke(), engine_for(spec.engine).spec, ChartCommand(file, spec_file, spec.hardware, argv, env)


def judge_specs(
    spec_files: Sequence[Path],
    cache: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
    *,
    strict: bool = True,
) -> list[Problem]:
    """What each spec's engine's own config code says of its chart (nothing for an engine without a judge)."""
    by_engine: dict[int, tuple[EngineSmoke[Any], list[tuple[Any, ChartCommand]]]] = {}
    with tempfile.TemporaryDirectory(prefix="olarespack-judge-") as tmp:
        for index, spec_file in enumerate(spec_files):
            try:
                found = _command(spec_file, Path(tmp) / str(index), strict)
            except OlaresPackError:
                continue  # lint reports the spec's own problems
            if found is not None:
                smoke, engine, command = found
                by_engine.setdefault(id(smoke), (smoke, []))[1].append((engine, command))
    problems: list[Problem] = []
    for smoke, charts in by_engine.values():
        problems += smoke.judge(charts, cache or cache_dir(), say)
    return problems
