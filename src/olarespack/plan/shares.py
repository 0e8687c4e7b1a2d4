"""How several apps share one GPU (pure): each app's share is what Olares books for it (HAMi gives the pod
exactly its requiredGPUMemory and the engine sees that as the device), so each app must hold its fit inside
its share, and the shares plus what the box keeps must not pass the memory HAMi registers for the card.

How shares are picked, and why:
- An app's share is the smallest whole MiB (HAMi books `nvidia.com/gpumem` in MiB) in which fit_report, run
  with that share as the app's GPU memory, says its context fits: the engine's own arithmetic (weights, KV at
  the context, non-KV memory, margins, a vLLM app's gpu_memory_utilization of its share), not a new one.
- What is left stays free instead of being split among the apps: a llama.cpp server allocates exactly what
  its context needs and would leave a larger share unused, a vLLM server would turn it into concurrency that
  nobody asked for, and Olares' install check (no margin) is easier to pass for the next app with memory
  left free. An app that wants more KV says so with its context.
- The box keeps, by default, what one app's default booking leaves of the card (registered memory minus the
  profile's booking): the room that covers cards whose driver reports a little less, which a single app on
  that box already leaves. A box file can state it.
- The apps are placed in the order given, which is their priority. Apps that fit take their share in that
  order, skipping any that do not. An app that does not fit books nothing: the plan names what was left for
  it at its turn, its shortfall (its need minus that) and the largest context that fits there, whether it
  fits the card alone, and the largest set of the apps that does fit together (most apps, then the earliest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from olarespack.core.hardware import HardwareProfile
from olarespack.core.units import MiB, gib
from olarespack.engines.fit import FitReport

MAX_SUBSETS_APPS = 12  # the sets that fit together are searched whole up to this many apps, greedily past it
SEARCH_LIMIT_MIB = 2**20  # 1 TiB: past any card, so a need is found even when the box cannot hold it

FitAt = Callable[[int], FitReport]  # the app's fit with that many MiB as its GPU memory


@dataclass(frozen=True)
class PlanApp:
    """One app to place: its name and file, the GPU memory its spec books, and its fit at a share."""

    name: str
    file: str
    spec_gpu_memory_bytes: int
    fit_at: FitAt


@dataclass(frozen=True)
class PlannedApp:
    """One app in the plan. Bytes unless named otherwise."""

    name: str
    file: str
    gpu_memory_bytes: int  # the share the plan books for it (0: it does not fit, and books nothing)
    need_bytes: int | None  # the smallest share that holds its context; None: not even SEARCH_LIMIT_MIB
    spec_gpu_memory_bytes: int  # what its spec books today
    report: FitReport  # its fit in its share, or in what was left for it when it does not fit
    left_bytes: int = 0  # what the apps before it left on the card at its turn
    fits_alone: bool = False  # its need fits the card with no other app

    @property
    def fits(self) -> bool:
        return self.need_bytes is not None and self.need_bytes <= self.gpu_memory_bytes

    @property
    def shortfall_bytes(self) -> int | None:
        if self.need_bytes is None:
            return None
        return max(self.need_bytes - max(self.gpu_memory_bytes, self.left_bytes), 0)

    @property
    def context(self) -> int:
        return self.report.max_model_len

    @property
    def context_fit(self) -> int:
        """The largest context that fits in its share (the asked one when it fits)."""
        return self.report.max_model_len_fit if max(self.gpu_memory_bytes, self.left_bytes) else 0

    def as_dict(self) -> dict[str, Any]:
        report = self.report
        return {
            "name": self.name,
            "file": self.file,
            "engine": report.engine,
            "model": report.model,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "need_bytes": self.need_bytes,
            "shortfall_bytes": self.shortfall_bytes,
            "spec_gpu_memory_bytes": self.spec_gpu_memory_bytes,
            "left_bytes": self.left_bytes,
            "fits_alone": self.fits_alone,
            "context": self.context,
            "context_fit": self.context_fit,
            "fits": self.fits,
            "gpu_memory_utilization": report.gpu_memory_utilization,
            "weights_bytes": report.weights_bytes + report.drafter_weights_bytes,
            "overhead_bytes": report.overhead_bytes,
            "overhead_source": report.overhead_source,
            "kv_cache_needed_bytes": report.kv_cache_needed_bytes,
            # in a share too small for the weights the engine would have none (never a negative amount)
            "kv_cache_available_bytes": max(report.kv_cache_available_bytes, 0),
            "settings": dict(report.settings),
        }


@dataclass(frozen=True)
class Plan:
    hardware: str
    gpu_memory_bytes: int  # what HAMi registers for the card
    kept_bytes: int  # what the box keeps for itself
    apps: tuple[PlannedApp, ...] = field(default_factory=tuple)
    together: tuple[str, ...] = ()  # the largest set of the apps that fits the card together, in their order

    @property
    def booked_bytes(self) -> int:
        return sum(app.gpu_memory_bytes for app in self.apps)

    @property
    def free_bytes(self) -> int:
        return self.gpu_memory_bytes - self.kept_bytes - self.booked_bytes

    @property
    def fits(self) -> bool:
        return all(app.fits for app in self.apps)

    def as_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "kept_bytes": self.kept_bytes,
            "booked_bytes": self.booked_bytes,
            "free_bytes": self.free_bytes,
            "fits": self.fits,
            "fit_together": list(self.together),
            "apps": [app.as_dict() for app in self.apps],
        }

    def table(self) -> list[str]:
        """The plan as lines of text, for a person."""
        header = ("app", "engine", "share", "needs", "spec books", "context", "fits in share", "")
        rows = [header]
        for app in self.apps:
            need = f"{gib(app.need_bytes):.2f} GiB" if app.need_bytes is not None else "> 1 TiB"
            rows.append(
                (
                    app.name,
                    app.report.engine_title,
                    f"{gib(app.gpu_memory_bytes):.2f} GiB",
                    need,
                    f"{gib(app.spec_gpu_memory_bytes):.2f} GiB",
                    str(app.context),
                    str(app.context_fit),
                    "ok" if app.fits else "DOES NOT FIT",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            f"{self.hardware}: {gib(self.gpu_memory_bytes):.2f} GiB registered, "
            f"{gib(self.kept_bytes):.2f} GiB kept by the box"
        ]
        lines += [
            "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        lines.append(f"  booked {gib(self.booked_bytes):.2f} GiB, free {gib(self.free_bytes):.2f} GiB")
        for app in self.apps:
            lines += [f"  {line}" for line in _app_lines(app)]
        if not self.fits:
            lines += self._advice()
        lines.append("fits" if self.fits else "DOES NOT FIT")
        return lines

    def _advice(self) -> list[str]:
        left_out = [app.name for app in self.apps if app.name not in self.together]
        if self.together:
            lines = [
                f"  these fit together: {', '.join(self.together)}; leave out {', '.join(left_out)} (or give "
                f"{'it' if len(left_out) == 1 else 'them'} another box)"
            ]
        else:
            lines = ["  no app fits this card, even alone"]
        alone = [app.name for app in self.apps if not app.fits and app.fits_alone]
        if alone:
            lines.append(
                f"  fits the card alone: {', '.join(alone)} (give it a box of its own, or shrink what "
                "comes before it: a smaller context books a smaller share)"
            )
        return lines


def _fitting_set(needs: Sequence[int | None], room: int) -> tuple[int, ...]:
    """The indexes of the largest set of apps whose needs fit `room` together: most apps, then the earliest
    ones (lexicographically smallest indexes). Every set is tried up to MAX_SUBSETS_APPS apps, since shares
    differ too much for a greedy choice to be right; past that, the greedy placement in order."""
    known = [(i, need) for i, need in enumerate(needs) if need is not None and need <= room]
    if len(known) > MAX_SUBSETS_APPS:
        chosen, left = [], room
        for i, need in known:
            if need <= left:
                chosen.append(i)
                left -= need
        return tuple(chosen)
    best: tuple[int, ...] = ()
    for mask in range(1, 1 << len(known)):
        picked = tuple(known[b][0] for b in range(len(known)) if mask >> b & 1)
        if sum(known[b][1] for b in range(len(known)) if mask >> b & 1) > room:
            continue
        if len(picked) > len(best) or (len(picked) == len(best) and picked < best):
            best = picked
    return best


def _app_lines(app: PlannedApp) -> list[str]:
    report = app.report
    # the engine's full settings are in the JSON; the table keeps the one that sizes the share
    settings = (
        ""
        if report.gpu_memory_utilization is None
        else f"{report.memory_fraction} {report.gpu_memory_utilization:g} of the share"
    )
    weights = gib(report.weights_bytes + report.drafter_weights_bytes)
    lines = [
        f"{app.name}: weights {weights:.2f} GiB, non-KV {gib(report.overhead_bytes):.2f} GiB "
        f"({report.overhead_source}), KV {gib(report.kv_cache_needed_bytes):.2f} GiB at {app.context} tokens"
        + (f"; {settings}" if settings else "")
    ]
    if app.fits:
        lines.append(f"  book {app.gpu_memory_bytes // MiB} MiB (resources.gpu_memory request = limit)")
    elif app.need_bytes is None:
        lines.append(f"  needs more than {SEARCH_LIMIT_MIB // 1024} GiB at {app.context} tokens")
    else:
        largest = f"the largest context that fits in it is {app.context_fit}" if app.context_fit else "no context fits"
        lines.append(
            f"  short of {gib(app.shortfall_bytes or 0):.2f} GiB: needs {app.need_bytes // MiB} MiB, "
            f"{app.left_bytes // MiB} MiB are left for it; {largest}; books nothing"
        )
    return lines


def kept_mib(profile: HardwareProfile) -> int:
    """What the box keeps unless told: what one app's default booking leaves of the card."""
    return profile.gpu_memory_mib - profile.booking_mib


def need_mib(fit_at: FitAt, limit: int = SEARCH_LIMIT_MIB) -> int | None:
    """The smallest share in MiB in which the app's context fits; None when not even `limit` holds it. A larger
    share never holds less (more device memory only adds KV room), so a bisection finds it."""
    if not fit_at(limit).fits:
        return None
    low, high = 0, limit  # low never fits (an empty share), high always does
    while high - low > 1:
        middle = (low + high) // 2
        if fit_at(middle).fits:
            high = middle
        else:
            low = middle
    return high


def plan(profile: HardwareProfile, apps: Sequence[PlanApp], keep_mib: int | None = None) -> Plan:
    """Place the apps on the card in their order (see the module's docstring for how shares are picked)."""
    kept = kept_mib(profile) if keep_mib is None else keep_mib
    left = max(profile.gpu_memory_mib - kept, 0)
    needs = [need_mib(app.fit_at) for app in apps]
    room = left
    placed = []
    for app, need in zip(apps, needs, strict=True):
        fits = need is not None and need <= left
        share, at_turn = (need or 0, left) if fits else (0, left)
        if fits:
            left -= share
        # an app that does not fit is shown as it would run in what is left for it (its largest context there)
        report = app.fit_at(share if fits else max(at_turn, 1))
        placed.append(
            PlannedApp(
                app.name,
                app.file,
                share * MiB,
                None if need is None else need * MiB,
                app.spec_gpu_memory_bytes,
                report,
                left_bytes=at_turn * MiB,
                fits_alone=need is not None and need <= room,
            )
        )
    together = tuple(apps[i].name for i in _fitting_set(needs, room))
    return Plan(profile.name, profile.gpu_memory_mib * MiB, kept * MiB, tuple(placed), together)
