"""Slow phases of a bench: a run of consecutive measured runs far below the median ("runs 6-9 at 27% of the
median"), and, where each run's drafting is known (llama.cpp's timings, vLLM's counters read between runs),
whether speculative decoding fell back during it (its acceptance far below the other runs'). The seed author's
10-run bench ("5 fast, 1 transition, 3 slow at ~60 t/s, recovered") is this pattern; on Olares, HAMi's time
slicing is a known cause (beclab/Olares #3213), which is why the GPU mode is recorded beside the figure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SLOW = 0.6  # a run below this share of the median is slow
FELL_BACK = 0.5  # a slow phase whose acceptance is below this share of the other runs' lost its drafting
GPU_MODES = ("exclusive", "memory-slicing", "time-slicing")  # HAMi's modes as Olares' GPU settings name them


@dataclass(frozen=True)
class SlowPhase:
    first: int  # 1-based run index
    last: int
    share: float  # the phase's median rate over the bench's median
    acceptance: float | None  # percent, during the phase
    others: float | None  # percent, over the other runs

    @property
    def fell_back(self) -> bool:
        return self.acceptance is not None and bool(self.others) and self.acceptance < FELL_BACK * (self.others or 0)

    @property
    def runs(self) -> list[int]:
        return list(range(self.first, self.last + 1))

    def describe(self) -> str:
        which = f"run {self.first}" if self.first == self.last else f"runs {self.first}-{self.last}"
        said = f"{which} at {self.share:.0%} of the median"
        if self.acceptance is not None and self.others is not None:
            said += f", acceptance {self.acceptance:.0f}% against {self.others:.0f}%"
        if self.fell_back:
            return f"{said}: speculative decoding fell back"
        return f"{said}: a slow phase (another app on the GPU, time slicing, a lower clock)"

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "share_of_median": round(self.share, 3),
            "acceptance": self.acceptance,
            "acceptance_others": self.others,
            "fell_back": self.fell_back,
            "said": self.describe(),
        }


def _percent(drafted: int, accepted: int) -> float | None:
    return 100 * accepted / drafted if drafted else None


def slow_phase(rates: Sequence[float], drafts: Sequence[tuple[int, int] | None]) -> SlowPhase | None:
    """The longest stretch of consecutive slow runs (the earliest of equal ones), or None. `drafts`: each
    run's (drafted, accepted), None where not known."""
    if len(rates) < 3:
        return None
    median = statistics.median(rates)
    best: tuple[int, int] | None = None
    start = None
    for index, rate in enumerate([*rates, median]):  # the median closes a stretch that runs to the end
        if rate < SLOW * median:
            start = index if start is None else start
        elif start is not None:
            if best is None or index - start > best[1] - best[0] + 1:
                best = (start, index - 1)
            start = None
    if best is None:
        return None
    first, last = best
    inside = [d for d in drafts[first : last + 1] if d is not None]
    outside = [d for i, d in enumerate(drafts) if d is not None and not first <= i <= last]
    acceptance = others = None
    if inside and outside and len(inside) == last - first + 1:
        acceptance = _percent(sum(d[0] for d in inside), sum(d[1] for d in inside))
        others = _percent(sum(d[0] for d in outside), sum(d[1] for d in outside))
    share = statistics.median(rates[first : last + 1]) / median
    return SlowPhase(first + 1, last + 1, share, acceptance, others)
