"""The olarespack command line: the only place that prints, catches errors and exits.

Exit codes:
  0  success (nothing to report, or nothing would change)
  1  problems found in the input, or --check found charts that differ from their specs
  2  usage error (unknown option, missing file, bad option value)
  3  a required external tool (helm) is missing or too old
  4  an internal error: a bug in olarespack (one line says what to report; never a traceback)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, cast

import click

from olarespack import __version__
from olarespack.cli_support import CatchingGroup, helm_binary, output_folder
from olarespack.errors import Problem, UsageError
from olarespack.project import orphan_charts, render_apps, sibling_names, spec_files
from olarespack.render import GenerationName, generation_for_olares
from olarespack.rule_catalog import RULES
from olarespack.spec import AppSpec, VllmEngine, load_spec
from olarespack.version import Part
from olarespack.write import changed_files, write_chart, write_file

SCHEMA_PATH = Path("schemas/app-spec.schema.json")


@click.group(cls=CatchingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="olarespack")
def main() -> None:
    """Turn one typed spec per app into a versioned, validated Olares Helm chart."""


@main.command()
@click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the charts differ from what the specs render.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("charts"),
              show_default=True, help="Folder that receives one chart folder per app.")
@click.option("--apps-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("apps"),
              show_default=True, help="Where to find specs when none are given.")
@click.option("--olares-version", metavar="VERSION",
              help="Render the manifest generation this Olares release installs (1.12.3-1.12.5: legacy "
                   "0.10.0; 1.12.6 and later: current 0.12.0) instead of the spec's choice.")
def build(specs: tuple[str, ...], check: bool, out_dir: Path, apps_dir: Path, olares_version: str | None) -> None:
    """Render charts/<app>/ from each SPEC (default: every apps/*.yaml)."""
    output_folder(out_dir, "--out")
    generation: GenerationName | None = generation_for_olares(olares_version) if olares_version else None
    files = spec_files(specs, apps_dir)
    others = sibling_names(apps_dir, files) if specs else None
    apps = render_apps(files, generation, others)
    for app in apps:
        for warning in app.warnings:
            click.echo(f"WARN {warning}", err=True)
    orphans = [] if specs else orphan_charts(out_dir, {app.spec.name for app in apps})
    for orphan in orphans:
        click.echo(f"{'ORPHAN' if check else 'WARN'} {orphan}", err=True)
    drifted = len(orphans) if check else 0
    for app in apps:
        folder = out_dir / app.spec.name
        if check:
            changes = changed_files(app.chart, folder)
            if changes:
                drifted += 1
                click.echo(f"DRIFT {app.spec.name} ({folder}): {', '.join(changes)}")
            else:
                click.echo(f"ok {app.spec.name}: up to date")
        else:
            status = write_chart(app.chart, folder)
            click.echo(f"ok {app.spec.name} {app.spec.version}: {status} ({folder})")
    if drifted:
        click.echo(f"{drifted} chart(s) differ from their specs: run `olarespack build` and commit", err=True)
        sys.exit(1)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=2, show_default=True,
              help="helm processes run at once.")
@click.option("--helm4/--no-helm4", default=True, show_default=True,
              help="Also lint with Helm 4 (Helm 3.19, what Olares embeds, always runs).")
@click.option("--rules", "list_rules", is_flag=True, help="List the rule ids and what each checks, then exit.")
@click.option("--base", help="Also run the version gate on the specs against this git ref.")
@click.option("--charts-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("charts"),
              show_default=True, help="Where the rendered charts are (orphan check; with --base: the base's).")
@click.option("--apps-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("apps"),
              show_default=True, help="Where to find specs when no PATH is given.")
def lint(paths: tuple[str, ...], jobs: int, helm4: bool, list_rules: bool, base: str | None,
         charts_dir: Path, apps_dir: Path) -> None:
    """Check specs, chart folders (or folders of charts) and chart .tgz files; default: apps/*.yaml.

    Every problem of every input is reported with its rule id, file, field path and fix."""
    from olarespack.validate import lint as run_lint

    if list_rules:
        for rule_id, (layer, text) in RULES.items():
            click.echo(f"{rule_id:28} {layer:7} {text}")
        return
    targets = list(paths) or [str(p) for p in spec_files((), apps_dir)]
    helms = [helm_binary("helm")] + ([helm_binary("helm4")] if helm4 else [])
    report = run_lint(targets, helms, jobs)
    specs = [Path(t) for t in targets if t.endswith((".yaml", ".yml")) and Path(t).is_file()]
    if not paths:
        report.problems += orphan_charts(charts_dir, set(report.spec_names))
    if base is not None and specs and not report.errors:
        from olarespack.release import Repo, diffs, gate_problems

        _, found = diffs(helms[0], Repo.at(Path.cwd(), base, charts_dir), specs)
        report.problems += gate_problems(found)
    for problem in report.problems:
        click.echo(f"{'ERROR' if problem.severity == 'error' else 'WARN'} {problem}")
    for label in report.checked:
        mine = [p for p in report.errors if _belongs(p, label)]
        click.echo(f"FAIL {label}: {len(mine)} problem(s)" if mine else f"ok {label}")
    if report.errors:
        click.echo(f"{len(report.errors)} problem(s) in {len(report.checked)} input(s)", err=True)
        sys.exit(1)


def _register_market_commands() -> None:
    from olarespack.cli_market import package, publish, serve

    for command in (package, publish, serve):
        main.add_command(command)


def _belongs(problem: Problem, label: str) -> bool:
    return problem.file == label or problem.file.startswith((f"{label}/", f"{label} ["))


@main.command("bump")
@click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--major", "part", flag_value="major", help="X.0.0: an incompatible change.")
@click.option("--minor", "part", flag_value="minor", help="x.Y.0: a new feature or setting.")
@click.option("--patch", "part", flag_value="patch", help="x.y.Z: a fix.")
@click.option("--prerelease", "part", flag_value="prerelease", help="x.y.z-rc.N: never below the current version.")
@click.option("--note", help="The changelog entry (default: a summary of what changed in the rendered chart).")
@click.option("--base", help="Git ref to compare with (default: merge base with main, or HEAD on main).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("charts"),
              show_default=True, help="The charts folder to re-render into.")
@click.option("--apps-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("apps"),
              show_default=True)
def bump_command(specs: tuple[str, ...], part: str | None, note: str | None, base: str | None, out_dir: Path,
                 apps_dir: Path) -> None:
    """Raise versions (SemVer): edit each spec in place, add a changelog entry, re-render its chart.

    With no SPEC, bumps exactly the apps whose rendered chart differs from the base."""
    import datetime as dt

    from olarespack.release import Repo, apply_bumps, plan_bumps

    if part is None:
        raise UsageError("say which part to raise: --major, --minor, --patch or --prerelease")
    output_folder(out_dir, "--out")
    repo = Repo.at(Path.cwd(), base, out_dir)
    files = spec_files(specs, apps_dir)
    bumps, skipped = plan_bumps(helm_binary("helm"), repo, files, bool(specs), cast(Part, part), note,
                                dt.date.today())
    apply_bumps(bumps, out_dir)
    for line in skipped:
        click.echo(f"skip {line}")
    for planned in bumps:
        click.echo(f"bumped {planned.name} {planned.edit.old_version} -> {planned.edit.new_version}: {planned.note}")
    if not bumps:
        click.echo(f"nothing to bump: no rendered chart differs from {repo.base[:12]}")


@main.command("diff")
@click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--base", help="Git ref to compare with (default: merge base with main, or HEAD on main).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--exit-code", is_flag=True, help="Exit 1 when something changed.")
@click.option("--charts-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("charts"),
              show_default=True, help="Where the base's charts are (as committed).")
@click.option("--apps-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("apps"),
              show_default=True)
def diff_command(specs: tuple[str, ...], base: str | None, fmt: str, exit_code: bool, charts_dir: Path,
                 apps_dir: Path) -> None:
    """What the cluster would run differently: each app rendered at the base and now, per resource.

    Also the version gate: an app whose rendered chart changed without a version increase is an error."""
    from olarespack import diff as formats
    from olarespack.release import Repo, diffs, gate_problems

    repo = Repo.at(Path.cwd(), base, charts_dir)
    apps, found = diffs(helm_binary("helm"), repo, spec_files(specs, apps_dir))
    if fmt == "json":
        click.echo(formats.as_json(found))
    elif fmt == "markdown":
        click.echo(formats.as_markdown(found))
    else:
        text = formats.as_text(found, color=sys.stdout.isatty())
        click.echo(text if text else f"no rendered change since {repo.base[:12]}")
    gate = gate_problems(found) + ([] if specs else orphan_charts(charts_dir, {app.spec.name for app in apps}))
    for problem in gate:
        click.echo(f"ERROR {problem}", err=True)
    if gate or (exit_code and any(d.changed for d in found)):
        sys.exit(1)


@main.command()
@click.argument("spec_file", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
@click.option("--max-model-len", type=click.IntRange(min=1), help="Context to check instead of the spec's.")
@click.option("--gpu-memory-utilization", type=click.FloatRange(0, 1, min_open=True),
              help="Utilization to check instead of the spec's (vLLM).")
@click.option("--kv-available-bytes", type=click.IntRange(min=1),
              help="KV cache budget as a vLLM boot reported it (replaces the estimate and any calibration).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A local Hugging Face config.json for a model olarespack has no data for.")
@click.option("--weights-bytes", type=click.IntRange(min=0), default=0,
              help="With --config: the model's weights on the GPU, in bytes.")
@click.option("--json", "as_json", is_flag=True, help="Print the budget as a JSON object.")
def fit(spec_file: str, max_model_len: int | None, gpu_memory_utilization: float | None,
        kv_available_bytes: int | None, config_file: Path | None, weights_bytes: int, as_json: bool) -> None:
    """Will the model, its context and its drafter fit the GPU? vLLM's own KV-cache arithmetic.

    Exits 0 when it fits, 1 when it does not."""
    from olarespack import arch
    from olarespack.fit import fit_report, spec_calibration

    spec = load_spec(Path(spec_file))
    options: dict[str, Any] = {"max_model_len": max_model_len, "gpu_memory_utilization": gpu_memory_utilization}
    engine = spec.engine
    if kv_available_bytes is not None:
        options["kv_available_bytes"] = kv_available_bytes
    else:
        options.update(spec_calibration(spec))
    if config_file is not None:
        repo = engine.model if isinstance(engine, VllmEngine) else engine.model.repo
        local = arch.model_from_hf_config(config_file, repo=repo, weights_bytes=weights_bytes)
        options["registry"] = {**arch.models(), repo: local}
    report = fit_report(spec, **options)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        for line in report.table():
            click.echo(line)
    if not report.fits:
        sys.exit(1)


@main.command()
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the schema file is out of date.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=SCHEMA_PATH,
              show_default=True)
def schema(check: bool, out_file: Path) -> None:
    """Write the JSON Schema of app specs (for editors and validation) from the models."""
    text = app_spec_schema()
    current = out_file.read_text(encoding="utf-8") if out_file.is_file() else None
    if check:
        if current != text:
            click.echo(f"DRIFT {out_file}: run `olarespack schema` and commit", err=True)
            sys.exit(1)
        click.echo(f"ok {out_file}: up to date")
        return
    write_file(out_file, text.encode("utf-8"))
    click.echo(f"ok {out_file}: {'unchanged' if current == text else 'written'}")


def app_spec_schema() -> str:
    document = AppSpec.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "https://olarespack.invalid/app-spec.schema.json"
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_register_market_commands()
