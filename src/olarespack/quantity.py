"""Kubernetes resource quantities: parsed to integers so they can be summed, printed back canonically."""

from __future__ import annotations

import re

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_BYTES_RE = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_CPU_RE = re.compile(r"^([0-9]+)(m)?$|^([0-9]+\.[0-9]{1,3})$")
MAX_QUANTITY = 2**63 - 1  # Kubernetes holds quantities in an int64


def _bounded(value: int, text: str) -> int:
    if value > MAX_QUANTITY:
        raise ValueError(f"{text!r} is larger than a Kubernetes quantity can be")
    return value


def parse_bytes(text: str) -> int:
    """'24Gi' -> 25769803776. Integer amounts only: fractions of a unit are a typo here."""
    match = _BYTES_RE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a memory quantity like 512Mi, 24Gi or 1073741824")
    number, unit = match.groups()
    return _bounded(int(number) * (_BINARY.get(unit or "") or _DECIMAL.get(unit or "") or 1), text)


def parse_cpu(text: str) -> int:
    """CPU in millicores: '4' -> 4000, '1500m' -> 1500, '0.5' -> 500."""
    match = _CPU_RE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a CPU quantity like 4, 0.5 or 1500m")
    whole, milli, decimal = match.groups()
    if decimal is not None:
        cores, frac = decimal.split(".")
        return _bounded(int(cores) * 1000 + int(frac.ljust(3, "0")), text)
    return _bounded(int(whole) if milli else int(whole) * 1000, text)


def format_cpu(millicores: int) -> str:
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def format_bytes(amount: int) -> str:
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if amount and amount % _BINARY[unit] == 0:
            return f"{amount // _BINARY[unit]}{unit}"
    return str(amount)


def pod_effective(app_containers: list[int], init_containers: list[int]) -> int:
    """Kubernetes' effective pod request or limit: init containers run one at a time before the app
    containers, so the pod needs the larger of the app containers' sum and the largest init container."""
    return max(sum(app_containers), max(init_containers, default=0))


def mib(amount: int) -> int:
    """Whole MiB, rounded down: HAMi's nvidia.com/gpumem takes a bare MiB integer."""
    return amount // 2**20
