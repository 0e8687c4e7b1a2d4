"""Kubernetes resource quantities, parsed by the full grammar of apimachinery's ParseQuantity (the parser
Olares' app-service and the API server use) into exact fractions, then rounded up as Kubernetes does
(Value() and MilliValue() round toward +infinity), so they can be summed and compared exactly:

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>

A value Kubernetes could not hold in an int64 is refused.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(?:([eE])([+-]?\d{1,3})|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")
MAX_QUANTITY = 2**63 - 1  # Kubernetes holds quantities in an int64
# Olares' manifest checks its requirement fields with this pattern (oac internal/manifest resources.go), which
# is not ParseQuantity: it takes 1K and 1Pi but refuses .5, +1 and 1n.
MANIFEST_QUANTITY = re.compile(r"^(?:\d+(?:\.\d+)?(?:[eE][-+]?(\d+|i))?(?:[kKMGTP]?i?|[mMGTPE])?|[kKMGTP]i|[mMGTPE])$")


def parse_quantity(text: str) -> Fraction:
    """A quantity's exact value ('1.5Gi' -> 1610612736, '100m' -> 1/10); ValueError when it is not one."""
    match = _QUANTITY.match(text.strip()) if len(text) <= 64 else None
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (like 4, 0.5, 1500m, 512Mi, 24Gi or 1e9)")
    sign, number, exponent_mark, exponent, suffix = match.groups()
    value = Fraction(number if not number.endswith(".") else number[:-1] or "0")
    if exponent_mark:
        value *= Fraction(10) ** int(exponent)
    elif suffix in _BINARY:
        value *= _BINARY[suffix]
    else:
        value *= _DECIMAL[suffix or ""]
    value = -value if sign == "-" else value
    if abs(value) > MAX_QUANTITY:
        raise ValueError(f"{text!r} is larger than a Kubernetes quantity can be")
    return value


def _non_negative(text: str, what: str) -> Fraction:
    value = parse_quantity(text)
    if value < 0:
        raise ValueError(f"{text!r}: a {what} cannot be negative")
    return value


def parse_bytes(text: str) -> int:
    """'24Gi' -> 25769803776, '1.5Gi' -> 1610612736, '1e3' -> 1000: whole bytes, rounded up."""
    return math.ceil(_non_negative(text, "memory or disk amount"))


def parse_cpu(text: str) -> int:
    """CPU in millicores, rounded up like Kubernetes' MilliValue: '4' -> 4000, '1500m' -> 1500, '0.5' -> 500."""
    return math.ceil(_non_negative(text, "CPU amount") * 1000)


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
    """Whole MiB, rounded down: HAMi's nvidia.com/gpumem takes a bare MiB integer (Olares' GPU webhook floors
    requiredGPUMemory the same way)."""
    return amount // 2**20
