"""Two server command lines compared as the server reads them: the same executable, and the same options
with the same values, each spelling of a flag taken as its engine's canonical one (-ngl is --n-gpu-layers).
Order is not compared: llama-server and vLLM read their options by name."""

from __future__ import annotations

import json
import re
from collections import Counter

from olarespack.engines import ENGINES
from olarespack.engines.importing import flag_spellings, parse_options

MAX_JSON = 4096  # a speculative or modality config is a few hundred characters; a longer value compares as text


def canonical(argv: list[str], kind: str) -> tuple[tuple[str, ...], Counter[tuple[str, str | None]]]:
    """(the executable and its leading words, the options as (canonical flag, value) counts)."""
    engine = ENGINES[kind]
    # the engine's own command (`vllm serve`) is its executable and leading words; any other, its first word
    lead = len(engine.command) if argv[: len(engine.command)] == list(engine.command) else 1
    flags = flag_spellings(engine.options())
    options: Counter[tuple[str, str | None]] = Counter()
    last: dict[str, tuple[str, str | None]] = {}  # a setting of the engine's table: the last one given wins
    for spelling, raw, flag in parse_options(argv[lead:], flags, engine.spec_model):
        value = _number(raw)
        name = (
            flag.flag
            if flag is not None and spelling in flag.spellings() and not spelling.startswith("--no-")
            else spelling
        )
        if flag is not None and flag.style == "positional":
            name = ""  # `vllm serve MODEL` and `--model MODEL` name the same setting
        if flag is not None:
            last[flag.flag or ""] = (name, value)
        else:
            options[(name, value)] += 1  # a flag the table does not know may repeat (--lora-modules a b)
    options.update(last.values())
    return tuple(argv[:lead]), options


def _number(value: str | None) -> str | None:
    """A number as the server reads it (0.90 is 0.9), a JSON object as the server parses it (its keys in any
    order); any other value as written."""
    if value is not None and value.startswith("{") and len(value) <= MAX_JSON:
        try:
            return json.dumps(json.loads(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (ValueError, RecursionError):
            return value
    if value is None or not re.fullmatch(r"-?\d+(\.\d*)?", value):
        return value
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def argv_differences(chart: list[str], spec: list[str], kind: str) -> list[str]:
    """What the spec's server would run differently from the chart's, one line each (none: the same)."""
    chart_lead, chart_options = canonical(chart, kind)
    spec_lead, spec_options = canonical(spec, kind)
    found = []
    if chart_lead != spec_lead:
        found.append(f"server executable: the chart runs {' '.join(chart_lead)}, the spec {' '.join(spec_lead)}")
    for options, other, where in (
        (chart_options, spec_options, "in the chart's command line, not in the spec's"),
        (spec_options, chart_options, "added by the spec's chart"),
    ):
        for (flag, value), count in sorted((options - other).items(), key=str):
            shown = f"{flag or '(positional)'} {value if value is not None else ''}".rstrip()
            found.append(f"server argument {shown}: {where}" + (f" ({count} times)" if count > 1 else ""))
    return found
