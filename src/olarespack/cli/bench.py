"""`olarespack bench`, a group of verbs: `run` measures an app's speed against its OpenAI-compatible server (or
reads an in-box bench's log), prints it as a table or JSON, draws it with --plot, and with --record writes it into
the spec's changelog entry for its version, where descriptions cite it as [[ bench.tps_avg ]]; `box` prints how to
run the same bench in the box; `sweep` is in cli/bench_sweep.py, `grid` in cli/bench_grid.py.

The spec is edited as calibrate edits it: only the entry's bench lines change, the edit is checked on the data,
the new spec must load, and it replaces the old one in one rename (write.write_file)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from olarespack.cli import options
from olarespack.cli.bench_grid import grid
from olarespack.cli.bench_inputs import (
    hardware_given,
    loaded,
    plot_target,
    progress_printer,
    read_given,
    spec_file,
)
from olarespack.cli.bench_options import (
    Request,
    box_options,
    examples,
    masking,
    namespace_of,
    request_options,
    server_options,
    shown_options,
)
from olarespack.cli.bench_sweep import sweep
from olarespack.core.errors import OlaresPackError, UsageError
from olarespack.spec.models import AppSpec

if TYPE_CHECKING:  # bench's modules (httpx, matplotlib) load only when the command runs
    from olarespack.bench.run import Result, Settings
    from olarespack.core.shown import Shown
    from olarespack.engines.base import EngineBench
    from olarespack.engines.client import Limits
    from olarespack.fit.bound import Findings


def record_values(
    spec: AppSpec, result: Result, today: dt.date, hardware: str | None = None, uneven: bool = False
) -> dict[str, Any]:
    """The bench record of a result, as the spec keeps it (rounded for reading; validated by BenchRecord), for
    the hardware it ran on (the spec's, unless told)."""
    from olarespack.engines import engine_for
    from olarespack.engines.client import BenchError
    from olarespack.fit.record import settings_hash
    from olarespack.spec.models import BenchRecord

    engine = engine_for(spec.engine)
    summary = result.summary()

    def rate(value: float) -> float:
        return max(round(value, 2), 0.01)  # monotonic, so min <= avg <= peak still holds

    values: dict[str, Any] = {
        "tps_avg": rate(summary["tps_avg"]),
        "tps_peak": rate(summary["tps_peak"]),
        "tps_min": rate(summary["tps_min"]),
        "tps_sigma": round(summary["tps_sigma"], 2),
        "tps_source": summary["tps_source"],
        "series": [rate(r) for r in result.rates],
        "runs": summary["runs"],
        "warmups": len(result.warmups),
        "tokens": result.settings.max_tokens,
        "prompt": result.settings.prompt_name,
        "temperature": result.settings.temperature,
        "top_p": result.settings.top_p,
        "ttft_ms": round(summary["ttft_ms"], 1) if summary["ttft_ms"] is not None else None,
        "acceptance": round(summary["acceptance"], 1) if summary["acceptance"] is not None else None,
        "drafted": summary["drafted"],
        "accepted": summary["accepted"],
        "engine_release": engine.version() or spec.engine.image.rsplit(":", 1)[-1],
        "hardware": hardware or spec.hardware,
        "context": engine.context_length(),
        "settings_hash": settings_hash(spec),
        "date": today,
        "uneven": True if uneven else None,
        "gpu_mode": result.settings.gpu_mode,
        "slow_runs": result.slow.runs if result.slow else None,
        "slow_phase": result.slow.describe() if result.slow else None,
    }
    try:
        BenchRecord.model_validate(values)
    except ValidationError as exc:  # measure() bounds every figure; this guards what the spec would refuse
        said = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise BenchError(f"{result.url}: the measurement does not make a record the spec accepts ({said})") from None
    return values


def _recorded_text(path: Path, current: str, values: dict[str, Any]) -> tuple[str, bool]:
    from olarespack.spec.bench_edit import record_bench
    from olarespack.spec.load import load_edited_spec

    text, replaced = record_bench(str(path), current, values)
    load_edited_spec(text, str(path))  # the edited spec must still load before it replaces the old one
    return text, replaced


def _try_record(path: Path, spec: AppSpec, settings: Settings, hardware: str) -> None:
    """The record a bench with these settings would write, tried on the spec's text before the first request
    (figures stand-ins): what the spec, the prompt's name or the edit would refuse is said before the bench runs,
    not after it."""
    from olarespack.bench.run import Result, Run

    stand_in = Result(
        "", settings, [Run(i, False, settings.max_tokens, 1.0, "request", 1.0) for i in range(1, settings.runs + 1)]
    )
    # a trial on the text as it is now: nothing is written, so no lock is taken (the real record takes it)
    _recorded_text(path, path.read_text(encoding="utf-8"), record_values(spec, stand_in, dt.date.today(), hardware))


def _record(path: Path, spec: AppSpec, result: Result, hardware: str, uneven: bool, shown: Shown) -> dict[str, Any]:
    from olarespack.spec.inplace import editing, read_spec_text, write_spec_text

    values: dict[str, Any] = shown.data(record_values(spec, result, dt.date.today(), hardware, uneven))
    with editing(path):  # held from the read to the write: a concurrent edit of the spec is not lost
        text, replaced = _recorded_text(path, read_spec_text(path), values)
        write_spec_text(path, text)
    click.echo(
        shown.text(
            f"ok {path}: changelog[0].bench {'replaced' if replaced else 'recorded'} for "
            f"{spec.version} ({values['tps_avg']} t/s average, settings {values['settings_hash']}); "
            "`olarespack build` renders the descriptions that cite it"
        ),
        err=True,
    )
    older = next((entry for entry in spec.changelog[1:] if entry.bench is not None), None)
    if older is not None and older.bench is not None:
        from olarespack.fit.record import compared
        from olarespack.spec.models import BenchRecord

        moved = compared(str(spec.version), BenchRecord.model_validate(values), str(older.version), older.bench)
        click.echo(shown.text(f"compared: {moved} (the upgrade description says it)"), err=True)
    return values


@click.group(epilog=examples("run", "box", "sweep", "grid"))
def bench() -> None:
    """Measure and tune an app's speed: run (a live server, or an in-box bench's log), box (the same bench in
    the box), sweep (one spec field, the engine restarted per value) and grid (concurrency and context depth).

    A run's rate is the server's own decode timing where it gives one (llama.cpp), else the streamed decode
    rate (completion tokens - 1 over first to last token, as vLLM's bench), else tokens over the whole request;
    the output says which. Acceptance comes from the engine's drafting counters."""


@bench.command(epilog=examples("run"))
@click.argument("app", metavar="APP_OR_SPEC")
@click.option("--url", help="The server's address, e.g. http://127.0.0.1:8000 (a /v1 suffix is fine).")
@click.option(
    "--responses",
    "log_file",
    type=click.Path(exists=True, path_type=Path),
    help="Read the log an in-box bench wrote (`bench box`) instead of sending requests.",
)
@server_options
@request_options
@click.option("--hardware", help="The hardware profile the server runs on (data/hardware.yaml); --record needs it.")
@shown_options
@click.option("--record", is_flag=True, help="Write the result into the spec's changelog entry for its version.")
@options.apps_dir
def run(
    app: str,
    url: str | None,
    log_file: Path | None,
    api_key: str | None,
    model: str | None,
    request: Request,
    hardware: str | None,
    as_json: bool,
    plot_file: Path | None,
    record: bool,
    apps_dir: Path,
) -> None:
    """Measure an app's tokens per second against its server (--url), or read an in-box bench's log
    (--responses): the standard prompt, warm-ups, then N runs.

    With --hardware the figures are checked against what that GPU can decode; --record needs it and writes them
    into the spec's changelog entry. Exits 1 when the server cannot be measured (unreachable, not
    OpenAI-compatible, impossible answers), after printing what was measured."""
    from olarespack.core.shown import Shown

    shown = Shown(api_key)
    with masking(shown):
        _run(shown, app, url, log_file, model, api_key, request, hardware, as_json, plot_file, record, apps_dir)


@bench.command(epilog=examples("box"))
@click.argument("app", metavar="APP_OR_SPEC")
@click.option("--job", "as_job", is_flag=True, help="Print a Kubernetes Job that runs the bench in the box.")
@click.option("--exec", "as_exec", is_flag=True, help="Print the kubectl exec line that runs it in the pod.")
@box_options
@click.option("--model", help="Model name to request (default: the spec's served name).")
@request_options
@options.apps_dir
def box(
    app: str,
    as_job: bool,
    as_exec: bool,
    user: str | None,
    namespace: str | None,
    model: str | None,
    request: Request,
    apps_dir: Path,
) -> None:
    """Print how to run the same bench in the box, next to the pod: a Kubernetes Job (--job) or a kubectl exec
    line (--exec). Its log is what `bench run APP --responses LOG` reads."""
    from olarespack.bench.inbox import exec_command, job, job_yaml
    from olarespack.engines import engine_for

    if as_job == as_exec:
        raise UsageError("give one of --job or --exec")
    spec = loaded(spec_file(app, apps_dir))
    engine = engine_for(spec.engine)
    engine_bench = engine.engine.bench()
    settings = request.settings(model or engine_bench.served_name(spec.engine) or spec.name)
    where = namespace_of(spec.name, namespace, user)
    if as_job:
        document = job(spec.name, where, engine.server_port(), settings, engine_bench, request.limits())
        click.echo(job_yaml(document), nl=False)
        name = document["metadata"]["name"]
        click.echo(
            f"# then: kubectl apply -f job.yaml && kubectl wait -n {where} --for=condition=complete "
            f"job/{name} --timeout={document['spec']['activeDeadlineSeconds']}s && kubectl logs -n "
            f"{where} job/{name} > bench.log",
            err=True,
        )
    else:
        click.echo(
            exec_command(
                spec.name,
                where,
                engine.engine.container_name,
                engine.server_port(),
                settings,
                engine_bench,
                request.limits(),
            )
        )
    click.echo(f"# and: olarespack bench run {spec.name} --responses bench.log [--hardware NAME --record]", err=True)


bench.add_command(sweep)
bench.add_command(grid)


def _run(
    shown: Shown,
    app: str,
    url: str | None,
    log_file: Path | None,
    model: str | None,
    api_key: str | None,
    request: Request,
    hardware: str | None,
    as_json: bool,
    plot_file: Path | None,
    record: bool,
    apps_dir: Path,
) -> None:
    from olarespack.engines import engine_for
    from olarespack.engines.client import BenchError, base_url

    if (url is None) == (log_file is None):
        raise UsageError("give one of --url (a live server) or --responses (an in-box bench's log)")
    if log_file is not None and log_file.is_dir():
        raise UsageError(
            f"--responses {log_file}: a folder (of an in-box sweep's logs: `bench sweep ... "
            "--responses DIR`); give the log file the in-box bench wrote"
        )
    if url is not None:
        base_url(url)  # a usage error before anything else is read
    path = spec_file(app, apps_dir)
    spec = loaded(path)
    hardware = hardware_given(hardware, spec, record)
    engine_bench = engine_for(spec.engine).engine.bench()
    served = model or engine_bench.served_name(spec.engine)
    settings = request.settings(served or spec.name)
    if plot_file is not None:
        plot_target(plot_file, [path, request.prompt_file, log_file])
    if record and hardware is not None:
        _try_record(path, spec, settings, hardware)
    result = _measured(url, log_file, api_key, model, served, settings, request.limits(), engine_bench)
    found = _checked(result, spec, hardware)
    failure: OlaresPackError | None = (
        BenchError(f"{result.url}: {found.errors[0]}: the figures cannot be, nothing recorded")
        if found.errors
        else None
    )
    values = None
    own = engine_bench.served_name(spec.engine) or spec.name
    if record and failure is None and hardware is not None:
        try:
            if result.settings.model != own:
                raise BenchError(
                    f"{result.url}: measured {result.settings.model!r}, not the spec's own model "
                    f"{own!r}: nothing recorded (bench the app's own server, or leave out --record)"
                )
            values = _record(path, spec, result, hardware, found.uneven, shown)
        except OlaresPackError as exc:  # the measurement is printed first, then the refusal
            failure = exc
    if plot_file is not None:
        from olarespack.bench.plot import plot_png
        from olarespack.write import write_file

        title = (
            f"{spec.name} {spec.version}: {result.settings.model}, {settings.prompt_name}, {request.max_tokens} tokens"
        )
        write_file(plot_file, plot_png(result, shown.text(title)))
        click.echo(f"ok {plot_file}: the runs drawn", err=True)
    _print(result, spec, values, found, as_json, shown)
    if failure is not None:
        raise failure


def _checked(result: Result, spec: AppSpec, hardware: str | None) -> Findings:
    """The result's own checks (fit/bound.py); its warnings join the notes it prints."""
    from olarespack.engines import engine_for
    from olarespack.fit.bound import findings

    found = findings(result, spec, hardware, engine_for(spec.engine).engine.bench())
    result.notes.extend(f"warning: {warning}" for warning in found.warnings)
    return found


def _print(
    result: Result, spec: AppSpec, values: dict[str, Any] | None, found: Findings, as_json: bool, shown: Shown
) -> None:
    if as_json:
        import json

        summary = {**result.as_dict(), "uneven": found.uneven, "errors": found.errors}
        click.echo(
            json.dumps(
                shown.data({"app": spec.name, "version": spec.version, **summary, "record": values}),
                indent=2,
                sort_keys=True,
                default=str,
            )
        )
    else:
        for line in result.table():
            click.echo(shown.text(line))


def _measured(
    url: str | None,
    log_file: Path | None,
    api_key: str | None,
    model: str | None,
    served: str | None,
    settings: Settings,
    limits: Limits,
    engine_bench: EngineBench,
) -> Result:
    from olarespack.bench.inbox import MAX_LOG, read_log
    from olarespack.bench.live import bench_live, pick_model
    from olarespack.engines.client import Server

    if log_file is not None:
        data = read_given(log_file, "--responses", "a bench log", MAX_LOG)
        if len(data) > MAX_LOG:
            raise UsageError(f"--responses {log_file}: over {MAX_LOG >> 20} MiB; give one bench's log")
        return read_log(data.decode("utf-8", errors="replace"), str(log_file), engine_bench, settings.gpu_mode)
    with Server(url or "", api_key, limits) as server:
        chosen, notes = pick_model(server.models(), model, served, server.shown)
        result = bench_live(server, engine_bench, replace(settings, model=chosen), progress_printer(settings))
    result.notes[:0] = notes
    return result
