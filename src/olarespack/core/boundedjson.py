"""JSON from strangers (a server's answers, a log of them) parsed with bounded work and a bounded result: a
nesting limit (3,000 levels exhaust the decoder's stack: the C decoder stops at the interpreter's recursion
limit, which is caught here, and what it accepts is checked against MAX_DEPTH without recursing), and a limit
on the characters of one number (Python refuses to convert an integer of 4,300+ digits, and a long one costs
quadratic time). What is refused says why, as a ValueError, never a RecursionError."""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # an OpenAI answer nests 5 deep, a streamed event 4
MAX_DIGITS = 40  # 2**128 has 39 digits: every count and rate a server sends is far shorter


class JsonLimitError(ValueError):
    """JSON past one of the limits: too deep, or a number too long."""


def _number(kind: type[int] | type[float], limit: int) -> Any:
    def parse(text: str) -> int | float:
        if len(text) > limit:
            raise JsonLimitError(f"a JSON number of {len(text)} characters (at most {limit})")
        return kind(text)

    return parse


def _depth_within(value: Any, limit: int) -> None:
    """Iteratively (the value may nest as deep as the recursion limit)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            raise JsonLimitError(f"JSON nested deeper than {limit} levels")
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def loads(data: bytes | bytearray | str, max_depth: int = MAX_DEPTH, max_digits: int = MAX_DIGITS) -> Any:
    """The JSON value of `data` (UTF-8 when bytes). ValueError: not JSON, not UTF-8, nested deeper than
    max_depth, or a number longer than max_digits characters."""
    text = bytes(data).decode("utf-8") if isinstance(data, bytes | bytearray) else data
    try:
        value = json.loads(text, parse_int=_number(int, max_digits), parse_float=_number(float, max_digits))
    except RecursionError:
        raise JsonLimitError(f"JSON nested deeper than {max_depth} levels") from None
    _depth_within(value, max_depth)
    return value
