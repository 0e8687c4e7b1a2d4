"""A sweep of one speed setting (the DFlash seed post's num_speculative_tokens 6..20): for each value, the spec
with that value, its chart rendered and its server booted here from the chart's command line (smoke's boot:
the engine's local build, the user's own model files or tiny stand-ins), the bench run against it, the server
stopped; then the values compared by a stated criterion.

average  the highest average over the runs
steady   the highest average without the runs of a slow phase (speculative decoding that fell back for a while
         is the box's state, not the setting's)"""

from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from olarespack.bench.live import bench_live
from olarespack.bench.run import Progress, Result, Settings
from olarespack.core.errors import Problem, ProblemsError, UsageError
from olarespack.core.text import printable
from olarespack.core.yamledit import set_scalar
from olarespack.engines.client import BenchError, Limits, Server
from olarespack.engines.smoke import SmokeError

CRITERIA = ("average", "steady")
MAX_VALUES = 20
MAX_VALUE_CHARS = 200
_FIELD = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*){0,7}$")


@dataclass(frozen=True)
class Sweep:
    field: str  # dotted, e.g. engine.speculative.num_speculative_tokens
    values: tuple[Any, ...]

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.field.split("."))


def parse_sweep(given: str) -> Sweep:
    """`bench sweep` FIELD=V1,V2,...: each value read as one YAML scalar (6, 0.9, true, text), 2 to 20 of them."""
    field, sep, listed = given.partition("=")
    field = field.strip()
    if not sep or not _FIELD.match(field):
        raise UsageError(
            f"sweep {given[:80]!r}: give FIELD=V1,V2,... with FIELD a dotted spec path, e.g. "
            "engine.speculative.num_speculative_tokens=6,8,10"
        )
    texts = [text.strip() for text in listed.split(",")]
    if not 2 <= len(texts) <= MAX_VALUES or any(not text or len(text) > MAX_VALUE_CHARS for text in texts):
        raise UsageError(
            f"sweep {field}: give 2 to {MAX_VALUES} non-empty values of at most {MAX_VALUE_CHARS} "
            "characters, separated by commas"
        )
    values = []
    for text in texts:
        try:
            value = YAML(typ="safe", pure=True).load(text)
        except YAMLError:
            value = None
        if not isinstance(value, bool | int | float | str) or (isinstance(value, float) and not math.isfinite(value)):
            raise UsageError(f"sweep {field}: {text[:40]!r} is not one value (a finite number, true/false or a word)")
        values.append(value)
    same = {
        ("number", float(v)) if isinstance(v, int | float) and not isinstance(v, bool) else ("text", str(v))
        for v in values
    }
    if len(same) != len(values):
        raise UsageError(f"sweep {field}: a value is given twice (1 and 1.0 count as one)")
    return Sweep(field, tuple(values))


def variant_text(file: str, text: str, sweep: Sweep, value: Any) -> str:
    """The spec's text with the swept field set to `value`, loaded as a spec (what it refuses names the field)."""
    from olarespack.spec.load import load_edited_spec

    try:
        new_text = set_scalar(text, sweep.path, value)
    except ValueError as exc:
        raise ProblemsError(
            [
                Problem(
                    file,
                    sweep.field,
                    f"sweep: {exc}",
                    "sweep a field the spec writes as `key: value` (write it there first)",
                    rule="bump",
                )
            ]
        ) from None
    try:
        load_edited_spec(new_text, file)
    except ProblemsError as exc:
        raise ProblemsError(
            [replace(p, message=f"sweep {sweep.field}={value}: {p.message}") for p in exc.problems]
        ) from None
    return new_text


@dataclass
class Point:
    value: Any
    result: Result | None = None
    refused: str = ""
    boot_seconds: float = 0.0

    @property
    def average(self) -> float | None:
        return statistics.fmean(self.result.rates) if self.result else None

    @property
    def steady(self) -> float | None:
        """The average without the slow phase's runs (all runs where none was found)."""
        if self.result is None:
            return None
        slow = set(self.result.slow.runs) if self.result.slow else set()
        kept = [run.tps for run in self.result.runs if run.index not in slow]
        return statistics.fmean(kept) if kept else None

    def score(self, criterion: str) -> float | None:
        return self.average if criterion == "average" else self.steady


def best(points: list[Point], criterion: str) -> Point | None:
    """The point the criterion ranks first; ties go to the value given first."""
    scored = [(point.score(criterion), -index, point) for index, point in enumerate(points)]
    measured = [(score, order, point) for score, order, point in scored if score is not None]
    return max(measured, key=lambda item: (item[0], item[1]))[2] if measured else None


def table(sweep: Sweep, points: list[Point], criterion: str) -> list[str]:
    chosen = best(points, criterion)
    width = max(len(sweep.field.rsplit(".", 1)[-1]), *(len(str(p.value)) for p in points))
    lines = [
        f"sweep of {sweep.field}: {len(points)} values, best by {criterion}",
        f"{'value':>{width}} {'avg t/s':>9} {'steady':>9} {'min':>9} {'peak':>9} {'accept %':>8} {'boot s':>7}",
    ]
    for point in points:
        if point.result is None:
            lines.append(f"{point.value!s:>{width}} refused: {point.refused}")
            continue
        summary = point.result.summary()
        accept = f"{summary['acceptance']:.1f}" if summary["acceptance"] is not None else "-"
        slow = f"  slow runs {point.result.slow.first}-{point.result.slow.last}" if point.result.slow else ""
        mark = "  <- best" if point is chosen else ""
        lines.append(
            f"{point.value!s:>{width}} {summary['tps_avg']:>9.2f} {point.steady or 0:>9.2f} "
            f"{summary['tps_min']:>9.2f} {summary['tps_peak']:>9.2f} {accept:>8} "
            f"{point.boot_seconds:>7.0f}{slow}{mark}"
        )
    lines.append(f"best: {sweep.field} = {chosen.value}" if chosen else "best: none (no value was measured)")
    return lines


def as_dict(sweep: Sweep, points: list[Point], criterion: str) -> dict[str, Any]:
    chosen = best(points, criterion)
    return {
        "field": sweep.field,
        "criterion": criterion,
        "best": chosen.value if chosen else None,
        "points": [
            {
                "value": p.value,
                "refused": p.refused or None,
                "boot_seconds": round(p.boot_seconds, 1),
                "average": p.average,
                "steady": p.steady,
                "result": p.result.as_dict() if p.result else None,
            }
            for p in points
        ],
    }


def recorded_reason(refused: str) -> str:
    """A refusal as the spec keeps it: printable, without the temporary log's path, and without the template
    markers a spec's text may not hold (the reason is engine log text)."""
    text = re.sub(r"\s*\(log: [^)]*\)", "", printable(refused)).replace("{{", "{ {").replace("[[", "[ [")
    return text.replace("{%", "{ %")[:200] or "refused"


def record(
    sweep: Sweep, points: list[Point], criterion: str, settings: Settings, where: str, today: dt.date
) -> dict[str, Any]:
    """The sweep as the changelog entry keeps it (SweepRecord), rounded for reading."""
    from olarespack.spec.models import SweepRecord

    chosen = best(points, criterion)
    if chosen is None:
        raise BenchError(f"sweep of {sweep.field}: no value was measured, nothing to write")

    def rate(value: float | None) -> float | None:
        return max(round(value, 2), 0.01) if value is not None else None

    rows = []
    for point in points:
        row: dict[str, Any] = {"value": point.value}
        if point.result is None:
            row["refused"] = recorded_reason(point.refused)
        else:
            summary = point.result.summary()
            row.update(
                tps_avg=rate(summary["tps_avg"]),
                tps_min=rate(summary["tps_min"]),
                tps_peak=rate(summary["tps_peak"]),
                steady_avg=rate(point.steady),
                acceptance=round(summary["acceptance"], 1) if summary["acceptance"] is not None else None,
                slow_runs=point.result.slow.runs if point.result.slow else None,
            )
        rows.append({key: value for key, value in row.items() if value is not None})
    values = {
        "field": sweep.field,
        "criterion": criterion,
        "chosen": chosen.value,
        "points": rows,
        "runs": settings.runs,
        "tokens": settings.max_tokens,
        "prompt": settings.prompt_name,
        "where": where[:200],
        "gpu_mode": settings.gpu_mode,
        "date": today,
    }
    values = {key: value for key, value in values.items() if value is not None}
    try:
        SweepRecord.model_validate(values)
    except ValidationError as exc:  # the values are bounded before; this guards what the spec would refuse
        said = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise BenchError(
            f"sweep of {sweep.field}: the figures do not make a record the spec accepts ({said})"
        ) from None
    return values


def spec_copy(spec_file: Path, text: str, folder: Path) -> Path:
    """A value's spec text written to folder/apps/, beside a link to the project's models/ (<spec's folder>/../models,
    which `olarespack model add` fills), so its model facts are the spec's own."""
    (folder / "apps").mkdir(parents=True, exist_ok=True)
    project_models = spec_file.absolute().parent.parent / "models"
    if project_models.is_dir():
        (folder / "models").symlink_to(project_models, target_is_directory=True)
    copy = folder / "apps" / spec_file.name
    copy.write_text(text, encoding="utf-8")
    return copy


def run_sweep(
    spec_file: Path,
    sweep: Sweep,
    settings: Settings,
    limits: Limits,
    work: Path,
    *,
    models: Path | None,
    engine_path: Path | None,
    cache: Path,
    say: Callable[[str], None],
    boot_timeout: float,
    progress: Progress | None = None,
) -> tuple[list[Point], str]:
    """Each value booted and benched in turn, one server at a time; the points and the engine build's label.
    A value the engine refuses at boot is a point with its reason (the sweep goes on)."""
    from olarespack.smoke.run import booted
    from olarespack.spec.inplace import editing, read_spec_text

    with editing(spec_file):  # a read as the edits read it; the sweep itself holds no lock
        text = read_spec_text(spec_file)
    variants = [variant_text(str(spec_file), text, sweep, value) for value in sweep.values]  # all refused first
    points: list[Point] = []
    where = ""
    for index, (value, variant) in enumerate(zip(sweep.values, variants, strict=True), start=1):
        folder = work / f"value-{index}"
        copy = spec_copy(spec_file, variant, folder)  # the boot works in run/
        folder = folder / "run"
        folder.mkdir()
        say(f"sweep {index}/{len(sweep.values)}: {sweep.field} = {value}")
        point = Point(value)
        try:
            with booted(
                copy, folder, models=models, engine_path=engine_path, cache=cache, say=say, boot_timeout=boot_timeout
            ) as serving:
                where = serving.report.runtime.label
                point.boot_seconds = serving.report.boot_seconds
                if serving.report.refused:
                    point.refused = serving.report.refused
                else:
                    with Server(serving.url, None, limits) as server:
                        try:
                            point.result = bench_live(
                                server, serving.bench, replace(settings, model=serving.served), progress
                            )
                        except BenchError as exc:
                            point.refused = f"bench: {exc}"
        except SmokeError as exc:  # this value cannot start here; the others may
            point.refused = f"not started: {exc}"
        say(
            f"sweep {index}/{len(sweep.values)}: "
            + (f"refused: {point.refused}" if point.result is None else f"{point.average:.2f} t/s on average")
        )
        points.append(point)
    return points, where
