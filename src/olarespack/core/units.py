"""Units and search helpers the fit arithmetic shares (pure)."""

from __future__ import annotations

import math
from collections.abc import Callable

GiB = 1 << 30
MiB = 1 << 20


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pad(n: int, multiple: int) -> int:
    return cdiv(n, multiple) * multiple


def gib(n: float) -> float:
    return n / GiB


def largest_fitting(upper: int, fits: Callable[[int], bool]) -> int:
    """vLLM's binary search: the largest n in 1..upper with fits(n), or 0 when not even 1 fits."""
    if upper < 1 or not fits(1):
        return 0
    result, left, right = 1, 1, upper
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def share_needed(total: int, need: int) -> float | None:
    """The smallest hundredth u with ceil(total x u) >= need, None above 1."""
    u = max(math.ceil(need / total * 100), 1)
    while math.ceil(total * (u / 100)) < need:
        u += 1
    return u / 100 if u <= 100 else None
