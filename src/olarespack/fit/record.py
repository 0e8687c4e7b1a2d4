"""A bench record as data the rest of olarespack reads: the newest one the changelog holds (what descriptions
cite as [[ bench.tps_avg ]]), the hash of the settings that change speed, and whether the spec still has the
settings the record was measured with. Pure: the spec in, values out.

A figure goes stale by data, not by matching text: the record keeps the hash of the settings it was measured
with, and a spec whose hash differs prints every cited figure with STALE_MARK after it and gets a lint warning,
whatever the description's words around it."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from olarespack.engines import engine_for
from olarespack.spec.models import AppSpec, BenchRecord

CITED_AS = "bench"  # the name descriptions cite the record by
# the measured values of a record, which a stale mark follows (not its version, date or method)
FIGURES = ("tps_avg", "tps_peak", "tps_min", "tps_sigma", "series", "ttft_ms", "acceptance", "drafted", "accepted")
STALE_MARK = " (measured on {version}, settings changed since)"
STALE_PATTERN = re.compile(r" \(measured on ([0-9A-Za-z.+-]{1,128}), settings changed since\)")
TIME_SLICED_MARK = " (measured under GPU time slicing)"
HASH_LENGTH = 16


def speed_settings(spec: AppSpec) -> dict[str, Any]:
    """What the settings hash covers: the engine's fields that change speed (its EngineBench), the context the
    server runs with, and the hardware."""
    engine = engine_for(spec.engine)
    return {
        "engine": spec.engine.kind,
        "settings": engine.speed_settings(),
        "context": engine.context_length(),
        "hardware": spec.hardware,
    }


def settings_hash(spec: AppSpec) -> str:
    """A short hash of speed_settings (canonical JSON), what a record keeps to be compared with later. ValueError
    for a spec whose context the build has not resolved yet (max_model_len: auto)."""
    text = json.dumps(speed_settings(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]


@dataclass(frozen=True)
class Recorded:
    """The newest bench record and where it is."""

    index: int  # in spec.changelog
    version: str
    record: BenchRecord
    stale: bool  # the spec's settings hash is not the record's

    @property
    def path(self) -> str:
        return f"changelog[{self.index}].bench"

    def marks(self) -> dict[str, str]:
        """The mark each cited figure carries, by its field path: stale settings, and GPU time slicing (a figure
        that says little about the app alone); none while the record is current and measured alone."""
        mark = STALE_MARK.format(version=self.version) if self.stale else ""
        if self.record.gpu_mode == "time-slicing":
            mark += TIME_SLICED_MARK
        return {f"{CITED_AS}.{name}": mark for name in FIGURES} if mark else {}

    def cited(self) -> dict[str, Any]:
        """What [[ bench.* ]] reads: the record's fields, the version it was measured on, and whether it is stale."""
        return {**self.record.model_dump(mode="json"), "version": self.version, "stale": self.stale}


def newest_record(spec: AppSpec) -> Recorded | None:
    """The record of the newest changelog entry that has one (entries are newest first); None when none has."""
    for index, entry in enumerate(spec.changelog):
        if entry.bench is not None:
            try:
                stale = settings_hash(spec) != entry.bench.settings_hash
            except ValueError:
                stale = False  # an unresolved context: the build resolves it before anything cites the record
            return Recorded(index, entry.version, entry.bench, stale)
    return None


@dataclass(frozen=True)
class StaleBench:
    """A record measured with other settings than the spec's: what lint and build warn about."""

    path: str
    message: str
    fix: str


def stale_bench(spec: AppSpec) -> StaleBench | None:
    """The newest record, when the settings that change speed are no longer those it was measured with."""
    found = newest_record(spec)
    if found is None or not found.stale:
        return None
    fields = ", ".join(engine_for(spec.engine).engine.bench().speed_fields)
    return StaleBench(
        found.path,
        f"the bench figures of {found.version} ({found.record.tps_avg:g} t/s average, "
        f"{found.record.date}) were measured with other settings that change speed (engine {fields}, the context "
        "or the hardware): descriptions print them marked as measured on "
        f"{found.version} with settings changed since",
        "re-measure with `olarespack bench run SPEC --url URL --record` on the box",
    )


def impossible_bench(spec: AppSpec) -> StaleBench | None:
    """The newest record, when its figures cannot be: faster than its hardware decodes the spec's model
    (bound.py; checked while the record is current, so the model is the one it measured), or drafting counters
    past what its runs could draft."""
    from olarespack.core.hardware import profiles
    from olarespack.engines.base import DraftCounts
    from olarespack.fit.bound import DecodeBound, counter_contradiction, decode_bound, over_bound

    found = newest_record(spec)
    if found is None:
        return None
    record, bench = found.record, engine_for(spec.engine).engine.bench()
    fix = (
        "re-measure with `olarespack bench run SPEC --url URL --hardware NAME --record` on the box, or remove the "
        "record"
    )
    if record.drafted is not None and record.accepted is not None:
        most = bench.draft_tokens(spec.engine) or bench.max_draft_tokens
        # completion tokens may reach twice max_tokens (bench's own bound on usage) in every run
        said = counter_contradiction(
            DraftCounts(record.drafted, record.accepted), 2 * record.tokens * record.runs, record.runs, max(most, 1)
        )
        if said:
            return StaleBench(found.path, f"the recorded drafting counters cannot be: {said}", fix)
    if found.stale or record.hardware not in profiles():
        return None
    bound = decode_bound(spec, record.hardware, bench.draft_tokens(spec.engine))
    said = over_bound([record.tps_peak], bound) if isinstance(bound, DecodeBound) else None
    return StaleBench(found.path, f"the recorded peak {said}", fix) if said else None


def _method(record: BenchRecord) -> dict[str, Any]:
    """How a record was measured: two records compare only where all of it is the same."""
    return {
        "prompt": record.prompt,
        "max_tokens": record.tokens,
        "temperature": record.temperature,
        "top_p": record.top_p,
        "rate taken by": record.tps_source,
        "hardware": record.hardware,
        "GPU mode": record.gpu_mode or "not recorded",
    }


def compared(new_version: str, new: BenchRecord, old_version: str, old: BenchRecord) -> str:
    """One sentence on how the figures moved from an older version's record ("250.5 t/s, +85% against 1.0.4's
    135 t/s, ..."), or why they cannot be compared (measured another way: prompt, tokens, sampling, how the rate
    was taken, hardware or GPU mode differ, or a mode was not recorded)."""
    before, now = _method(old), _method(new)
    differ = [f"{key} {before[key]} against {now[key]}" for key in now if now[key] != before[key]]
    if new.gpu_mode is None or old.gpu_mode is None:
        differ += [] if any(d.startswith("GPU mode") for d in differ) else ["the GPU mode was not recorded"]
    if differ:
        return (
            f"{new.tps_avg:g} t/s; not compared with {old_version}'s {old.tps_avg:g} t/s: measured another way "
            f"({'; '.join(differ)})"
        )
    change = 100 * (new.tps_avg - old.tps_avg) / old.tps_avg
    release = (
        f"engine {old.engine_release} -> {new.engine_release}"
        if old.engine_release != new.engine_release
        else f"same engine release {new.engine_release}"
        if new.engine_release
        else "engine release unknown"
    )
    settings = "same settings" if new.settings_hash == old.settings_hash else "settings changed"
    return (
        f"{new.tps_avg:g} t/s, {change:+.0f}% against {old_version}'s {old.tps_avg:g} t/s ({release}, {settings}, "
        f"same prompt {new.prompt}, {new.hardware}, GPU {new.gpu_mode})"
    )


def comparisons(spec: AppSpec) -> dict[str, str]:
    """version -> how its record compares with the next older record in the changelog (entries with a record
    that have an older one)."""
    recorded = [(entry.version, entry.bench) for entry in spec.changelog if entry.bench is not None]
    return {
        str(version): compared(str(version), record, str(older), older_record)
        for (version, record), (older, older_record) in itertools.pairwise(recorded)
    }
