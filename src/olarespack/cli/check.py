"""`olarespack lint` and `olarespack fit`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from olarespack.cli import options
from olarespack.cli.group import echo_verdict, helm_binary
from olarespack.core.errors import Problem, UsageError
from olarespack.core.rule_catalog import catalog
from olarespack.helm import Helm
from olarespack.project import orphan_charts, spec_files

if TYPE_CHECKING:
    from olarespack.models.arch import ModelInfo
    from olarespack.spec.models import AppSpec


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@options.jobs
@click.option(
    "--helm4/--no-helm4",
    default=True,
    show_default=True,
    help="Also lint with Helm 4 (Helm 3.19, what Olares embeds, always runs).",
)
@click.option("--rules", "list_rules", is_flag=True, help="List the rule ids and what each checks, then exit.")
@click.option("--base", help="Also run the version gate on the specs against this git ref.")
@click.option(
    "--engine-config",
    is_flag=True,
    help="Also judge each vLLM spec's command line with its image's release's own config code (parser, serve "
    "checks, create_engine_config; a judge venv per release: make vllm-judges). A release's first judgement "
    "takes about a minute; an unchanged chart's verdict is kept.",
)
@options.charts_dir
@options.apps_dir
def lint(
    paths: tuple[str, ...],
    jobs: int,
    helm4: bool,
    list_rules: bool,
    base: str | None,
    engine_config: bool,
    charts_dir: Path,
    apps_dir: Path,
) -> None:
    """Check specs, chart folders (or folders of charts) and chart .tgz files; default: apps/*.yaml.

    Every problem of every input is reported with its rule id, file, field path and fix."""
    from olarespack.check.lint import lint as run_lint

    if list_rules:
        for rule_id, rule in catalog().items():
            click.echo(f"{rule_id:28} {rule.layer:7} {rule.text} [{rule.source}]")
        return

    def helms() -> Sequence[Helm]:
        return [helm_binary("helm")] + ([helm_binary("helm4")] if helm4 else [])

    targets = list(paths) or [str(p) for p in spec_files((), apps_dir)]
    if not targets:
        click.echo(
            f"no apps: {apps_dir}/ holds no spec, nothing to lint; write {apps_dir}/<app>.yaml or "
            "`olarespack import CHART`",
            err=True,
        )
    report = run_lint(targets, helms, jobs)
    specs = [Path(t) for t in targets if t.endswith((".yaml", ".yml")) and Path(t).is_file()]
    if not paths:
        report.problems += orphan_charts(charts_dir, set(report.spec_names))
    if base is not None and specs and not report.errors:
        from olarespack.release.bump import Repo, diffs, gate_problems

        _, found = diffs(helms()[0], Repo.at(Path.cwd(), base, charts_dir), specs)
        report.problems += gate_problems(found)
    if engine_config and specs:
        from olarespack.smoke.judge import judge_specs

        report.problems += judge_specs(specs, say=lambda text: click.echo(text, err=True))
    for problem in report.problems:
        click.echo(f"{'ERROR' if problem.severity == 'error' else 'WARN'} {problem}")
    for label in report.checked:
        mine = [p for p in report.errors if _belongs(p, label)]
        click.echo(f"FAIL {label}: {len(mine)} problem(s)" if mine else f"ok {label}")
    if report.errors:
        click.echo(f"{len(report.errors)} problem(s) in {len(report.checked)} input(s)", err=True)
        sys.exit(1)


def _belongs(problem: Problem, label: str) -> bool:
    return problem.file == label or problem.file.startswith((f"{label}/", f"{label} ["))


@click.command()
@click.argument("spec_file", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
@click.option("--max-model-len", type=click.IntRange(min=1), help="Context to check instead of the spec's.")
@click.option(
    "--gpu-memory-utilization",
    type=click.FloatRange(0, 1, min_open=True),
    help="Utilization to check instead of the spec's (vLLM).",
)
@click.option(
    "--kv-available-bytes",
    type=click.IntRange(min=1),
    help="KV cache budget as a vLLM boot reported it (replaces the estimate and any calibration).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A local Hugging Face config.json for a model olarespack has no data for.",
)
@click.option(
    "--weights-bytes",
    type=click.IntRange(min=0),
    default=0,
    help="With --config: the model's weights on the GPU, in bytes.",
)
@click.option(
    "--gguf",
    "gguf_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A llama.cpp app's local GGUF file (repeat for the projector), for a model olarespack has no data for.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the budget as a JSON object.")
def fit(
    spec_file: str,
    max_model_len: int | None,
    gpu_memory_utilization: float | None,
    kv_available_bytes: int | None,
    config_file: Path | None,
    weights_bytes: int,
    gguf_files: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Will the model, its context and its drafter fit the GPU? vLLM's own KV-cache arithmetic.

    The models come from the project's models/ folder (beside the spec's folder), then the shipped data.
    Also says whether the image starts: its CUDA against the NVIDIA driver of the oldest Olares the market
    installs on. Exits 0 when it fits and starts, 1 when it does not, 5 when a model has no data (the message
    says how to add it)."""
    from olarespack.fit.budget import fit_report, spec_calibration
    from olarespack.fit.starts import WithStarts, market_driver, starts
    from olarespack.models import registry
    from olarespack.spec.load import load_spec

    spec = load_spec(Path(spec_file))
    found: dict[str, Any] = {"max_model_len": max_model_len, "gpu_memory_utilization": gpu_memory_utilization}
    if kv_available_bytes is not None:
        found["kv_available_bytes"] = kv_available_bytes
    else:
        found.update(spec_calibration(spec))
    found["registry"] = registry.models_for(spec_file)
    if config_file is not None or gguf_files:
        local = _local_model(spec, config_file, weights_bytes, gguf_files)
        found["registry"] = {**found["registry"], local.repo: local}
    report = fit_report(spec, **found)
    driver = market_driver()
    echo_verdict(WithStarts(report, (starts(spec.name, spec.engine, driver),) if driver else ()), as_json)


def _local_model(
    spec: AppSpec, config_file: Path | None, weights_bytes: int, gguf_files: tuple[Path, ...]
) -> ModelInfo:
    """The spec's model from local files given to fit: a config.json or GGUF files, as its engine takes it."""
    from olarespack.engines import engine_for
    from olarespack.models import add, hf_config, registry

    engine = engine_for(spec.engine)
    repo, title, weights = engine.model_repo(), engine.title, engine.engine.weights_format
    gguf_app = engine.engine.model_source == "gguf"
    if config_file is not None and gguf_files:
        raise UsageError("give --config (a config.json model) or --gguf (GGUF files), not both")
    if config_file is not None:
        if gguf_app:
            raise UsageError(
                f"{repo} is served by {title} from {weights}: give them with --gguf FILE.gguf "
                f"(again for the projector), or record them once with `{registry.add_command(repo)}`"
            )
        return hf_config.model_from_hf_config(config_file, repo=repo, weights_bytes=weights_bytes)
    if not gguf_app:
        raise UsageError(f"{repo} is served by {title} from {weights}: give --config config.json --weights-bytes N")
    described = add.Described(repo, command="olarespack fit --gguf " + " --gguf ".join(p.name for p in gguf_files))
    return registry.model_from_data("--gguf", add.gguf_data(described, add.gguf_headers(gguf_files)))
