"""olarespack calibrate: a boot log measured on the box becomes the spec's engine.calibration.

The spec is edited in place the way `bump` edits it (release/edit.py): only the lines of engine.calibration
change (or the block is added at the end of engine:), the edit is checked on the data (everything else must load
back equal), the new spec must load, and it replaces the old one in one rename, under the spec's edit lock and
with its line endings (spec/inplace.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from ruamel.yaml import YAML

from olarespack.core.errors import Problem, ProblemsError
from olarespack.core.hardware import profiles
from olarespack.core.yamledit import scalar, splice_block
from olarespack.engines import ENGINES, engine_for, read_boot_log, titles
from olarespack.engines.bootlog import MAX_LOG_BYTES, BootLog, EngineLog
from olarespack.spec.inplace import editing, read_spec_text, write_spec_text
from olarespack.spec.load import load_edited_spec, load_spec
from olarespack.spec.models import AppSpec

_BOUNDS = {"gt": "more than", "ge": "at least", "lt": "less than", "le": "at most"}


def _refuse(file: str, path: str, message: str, fix: str) -> ProblemsError:
    return ProblemsError([Problem(file, path, message, fix, rule="calibration-log")])


def _block(values: dict[str, Any], indent: str, step: str) -> list[str]:
    lines = [f"{indent}calibration:\n"]
    for key, value in values.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{scalar(k)}: {scalar(v)}" for k, v in value.items())
            lines.append(f"{indent}{step}{key}: {{{inner}}}\n")
        else:
            lines.append(f"{indent}{step}{key}: {scalar(value)}\n")
    return lines


def edit_calibration(file: str, text: str, values: dict[str, Any]) -> str:
    """The spec text with engine.calibration set to `values`; nothing else changes (checked on the data)."""
    data: Any = YAML(typ="rt").load(text)
    by_hand = "edit engine.calibration by hand (block style, under engine:)"
    engine = data.get("engine") if hasattr(data, "lc") else None
    if not hasattr(engine, "lc") or not engine:
        raise _refuse(file, "engine", "no engine mapping to write a calibration into", by_hand)
    first_line, column = engine.lc.key(next(iter(engine)))
    if first_line == data.lc.key("engine")[0]:
        raise _refuse(file, "engine", "engine is written in flow style ({...}) and cannot be edited in place", by_hand)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    step = " " * max(column - data.lc.key("engine")[1], 2)
    splice_block(data, ("engine", "calibration"), _block(values, " " * column, step), lines)
    new_text = "".join(lines)
    safe = YAML(typ="safe", pure=True)
    before, after = safe.load(text), safe.load(new_text)
    expected = {**before, "engine": {**before["engine"], "calibration": values}}
    if after != expected:
        raise _refuse(file, "engine.calibration", "the spec's layout defeats an in-place edit", by_hand)
    return new_text


def _check_log(file: str, spec: AppSpec, log: BootLog) -> None:
    engine = engine_for(spec.engine)
    kind, title = engine.kind, engine.title
    looks = ENGINES[log.engine].title if log.engine else None
    if looks is not None and log.engine != kind and not log.calibrated(kind):
        raise _refuse(
            log.path,
            "",
            f"looks like a {looks} boot log, but {file} runs {title}",
            f"take the log of this app's pod (kubectl logs), or calibrate the {looks} app's spec",
        )
    reading = log.readings[kind]
    if reading.unreadable:
        raise ProblemsError(
            [
                Problem(
                    log.path,
                    f"line {number}",
                    f"{what}: the figure is not a size {title} prints "
                    "(a negative number, or one written with an exponent)",
                    "give the unedited log of one complete boot of this app (kubectl logs POD > boot.log)",
                    rule="calibration-log",
                )
                for number, what in reading.unreadable[:10]
            ]
        )
    if reading.impossible:
        raise ProblemsError(
            [
                Problem(
                    log.path,
                    f"line {number}",
                    why,
                    "give the unedited log of one complete boot of this app (kubectl logs POD > boot.log)",
                    rule="calibration-log",
                )
                for number, why in reading.impossible[:10]
            ]
        )
    missing = reading.missing_lines() if log.engine == kind and not log.calibrated(kind) else None
    if missing is not None:
        cut = f" (only its first {MAX_LOG_BYTES // 2**20} MiB were read)" if log.truncated else ""
        raise _refuse(log.path, "", missing[0] + cut, missing[1])
    if not log.calibrated(kind):
        seen = (
            f"it looks like a {looks} log"
            if looks
            else f"it looks like neither {' nor '.join(f'a {name}' for name in titles())} log"
        )
        cut = f" (only its first {MAX_LOG_BYTES // 2**20} MiB were read)" if log.truncated else ""
        raise _refuse(
            log.path,
            "",
            f"no calibration line found{cut}: {title} prints {engine.engine.calibration_lines} while it boots; {seen}",
            "give the log of a complete boot, from its start (kubectl logs POD, not --tail)",
        )
    model = engine.model_repo()
    if reading.model is not None and reading.model != model:
        raise _refuse(
            log.path,
            "",
            f"is a boot of {reading.model}, but {file} serves {model}",
            "boot this spec's model on the box and take that log",
        )
    version = engine.version()
    if reading.version and version and not reading.version.startswith(version):
        raise _refuse(
            log.path,
            "",
            f"is a boot of {title} {reading.version}, but {file}'s image has {title} {version}",
            f"boot {spec.engine.image} on the box and take that log",
        )
    profile = profiles().get(spec.hardware)
    gpu = profile.title.split(",")[0].strip() if profile else None
    for message, fix in reading.device_problems(gpu, spec.hardware, file):
        raise _refuse(log.path, "", message, fix)
    unsaid = reading.unsaid()
    if unsaid:
        raise ProblemsError(
            [
                Problem(
                    log.path,
                    "",
                    f"does not say its {what.replace('_', ' ')} ({title} prints it in "
                    f"{reading.provenance[what]}): a calibration records what it was measured on, "
                    "from the log, never from the spec",
                    "give the log of a complete boot, from its start (kubectl logs POD, not --tail)",
                    rule="calibration-log",
                )
                for what in unsaid
            ]
        )


def _check_device_memory(file: str, spec: AppSpec, path: str, reading: EngineLog) -> None:
    """Buffers that add up to more than the card holds are no boot of it (an edited or forged log)."""
    found, profile = reading.gpu_mib(), profiles().get(spec.hardware)
    if found is None or profile is None or found[0] <= profile.gpu_memory_mib:
        return
    line = reading.lines.get(found[1])
    raise _refuse(
        path,
        f"line {line}" if line else "",
        f"the buffers on the GPU add up to {found[0]:.0f} MiB, more "
        f"than the {profile.gpu_memory_mib} MiB the {spec.hardware} of {file} has: no boot of that card "
        "printed this",
        "give the unedited log of one complete boot of this app on its box",
    )


def calibration_values(file: str, spec: AppSpec, log: BootLog) -> dict[str, Any]:
    """engine.calibration for this spec from its boot log, validated by the engine's calibration model."""
    _check_log(file, spec, log)
    engine = engine_for(spec.engine)
    model = engine.engine.calibration_model
    if model is None:
        raise _refuse(
            file,
            "engine.calibration",
            f"the {spec.engine.kind} engine takes no calibration yet",
            "fit uses its estimate for this engine",
        )
    measured: dict[str, Any] = {
        "model": engine.model_repo(),
        "image": spec.engine.image,
        "hardware": spec.hardware,
        **engine.calibration_values(log, spec.gpu_memory()),
    }
    values = {key: value for key, value in measured.items() if value not in (None, {})}
    try:
        model.model_validate(values)  # a log cannot smuggle a value the spec would refuse
    except ValidationError as exc:
        raise ProblemsError(
            [_refused_value(log, log.readings[engine.kind].lines, error) for error in exc.errors()[:10]]
        ) from None
    _check_device_memory(file, spec, log.path, log.readings[engine.kind])
    return values


def _number(value: Any) -> str:
    return f"{value:.12g}" if isinstance(value, int | float) and not isinstance(value, bool) else repr(value)


def _refused_value(log: BootLog, lines: dict[str, int], error: Any) -> Problem:
    """A measured value engine.calibration would refuse, at the log line it came from (`lines`: the engine's
    calibration field, and a buffer map's device, -> the line number)."""
    loc = [str(part) for part in error["loc"]]
    field = ".".join(part for part in loc if part != "[key]")
    line = lines.get(f"{loc[0]} {loc[1]}" if len(loc) > 1 else loc[0])
    bound = "; ".join(f"{_BOUNDS[k]} {_number(v)}" for k, v in (error.get("ctx") or {}).items() if k in _BOUNDS)
    if "[key]" in loc:
        what = (
            f"the device name {loc[1]!r} is not one engine.calibration takes (a letter or digit, then "
            "letters, digits, _ . -)"
        )
    else:
        what = f"{_number(error['input'])} is out of range (engine.calibration.{field} is {bound or 'bounded'})"
    if field == "available_kv_cache_gib" and not error["input"]:
        fix = (
            "that boot left no memory for the KV cache, so it could not serve: boot the app with a shorter "
            "max_model_len or a higher gpu_memory_utilization and calibrate from that log"
        )
    else:
        fix = "give the unedited log of one complete boot of this app (kubectl logs POD > boot.log)"
    return Problem(log.path, f"line {line}" if line else field, f"{field}: {what}", fix, rule="calibration-log")


@click.command()
@click.argument("spec_file", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--log",
    "log_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The engine's boot log, taken on the box (kubectl logs POD > boot.log).",
)
def calibrate(spec_file: str, log_file: str) -> None:
    """Write engine.calibration from a boot log taken on the box.

    The calibration records what it was measured on (the spec's model, image and hardware), so lint refuses
    it once any of them changes. Exits 1, writing nothing, when the log is not a boot of this spec's engine."""
    path = Path(spec_file)
    with editing(path):  # held from the read to the write: a concurrent edit of the spec is not lost
        _calibrate(path, spec_file, log_file)


def _calibrate(path: Path, spec_file: str, log_file: str) -> None:
    spec = load_spec(path)
    if engine_for(spec.engine).engine.calibration_model is None:
        raise _refuse(
            spec_file,
            "engine.calibration",
            f"the {spec.engine.kind} engine takes no calibration yet",
            "fit uses its estimate for this engine",
        )
    try:
        log = read_boot_log(Path(log_file))
    except ValueError as exc:
        raise _refuse(log_file, "", str(exc), "give a regular file holding the boot log") from None
    except OSError as exc:
        raise _refuse(log_file, "", f"cannot read: {exc.strerror}", "check the path and its permissions") from None
    values = calibration_values(spec_file, spec, log)
    new_text = edit_calibration(spec_file, read_spec_text(path), values)
    load_edited_spec(new_text, spec_file)  # the edited spec must still load before it replaces the old one
    status = write_spec_text(path, new_text)
    shown = ", ".join(f"{key} {value}" for key, value in values.items() if key not in ("model", "image", "hardware"))
    click.echo(
        f"ok {spec_file}: engine.calibration {status} ({shown}; measured on {values['model']}, "
        f"{values['image']}, {values['hardware']})"
    )
