"""vLLM's command line read back into its engine block (import): the flag table's fields, the speculative
and multimodal JSON objects, every other flag in extra_args."""

from __future__ import annotations

import json
from typing import Any

from olarespack.engines.base import Flag
from olarespack.engines.images import family_of
from olarespack.engines.importing import (
    EngineImport,
    chart_option,
    extra_items,
    flag_spellings,
    parse_options,
    set_field,
    switch_value,
    unset_defaults,
)
from olarespack.engines.vllm.spec import PORT, VllmEngine

SPECULATIVE_KEYS = ("method", "model", "num_speculative_tokens")


def import_vllm(argv: list[str], image: str, flags_table: tuple[Flag[VllmEngine], ...]) -> EngineImport:
    """`vllm serve` (or the API server module run directly) read back into a vLLM engine block."""
    result = EngineImport("vllm", {"kind": "vllm", "image": image})
    data = result.data
    family = family_of("vllm", image)
    own = list(family.command) if family else ["vllm", "serve"]
    if argv[:2] == ["vllm", "serve"]:
        rest = argv[2:]
    elif own != ["vllm", "serve"] and argv[: len(own)] == own:
        rest = argv[len(own) :]  # the image family's own server command (a patched image's entrypoint script)
    elif "vllm.entrypoints.openai.api_server" in argv[:3]:
        data["command"] = argv[: argv.index("vllm.entrypoints.openai.api_server") + 1]
        rest = argv[len(data["command"]) :]
    else:
        data["command"] = argv[:1]
        rest = argv[1:]
    flags = flag_spellings(flags_table)
    flags[""] = next(f for f in flags_table if f.style == "positional")
    extra: list[str] = []
    auto_tool_choice = False
    options = parse_options(rest, flags, VllmEngine)
    unset_defaults(result, options, flags_table, VllmEngine)
    for spelling, value, flag in options:
        if flag is None:
            extra += extra_items(spelling, value)
            continue
        if flag.owner == "chart":
            chart_option(result, spelling, value, PORT)
            continue
        if spelling == "--enable-auto-tool-choice":
            auto_tool_choice = True
            continue
        if flag.owner == "engine.speculative":
            data["speculative"] = json_object(result, spelling, value, SPECULATIVE_KEYS)
            continue
        if flag.owner == "engine.limit_mm_per_prompt":
            data["limit_mm_per_prompt"] = json_object(result, spelling, value, None)
            continue
        set_field(data, flag.owner, switch_value(spelling, flag, value))
    if auto_tool_choice and "tool_call_parser" not in data:
        extra.append("--enable-auto-tool-choice")
    if not auto_tool_choice and "tool_call_parser" in data:
        result.unexpressed.append("--tool-call-parser without --enable-auto-tool-choice: the spec turns both on")
    if extra:
        data["extra_args"] = extra
    return result


def json_object(result: EngineImport, spelling: str, value: str | None, keys: tuple[str, ...] | None) -> dict[str, Any]:
    try:
        parsed = json.loads(value or "")
    except json.JSONDecodeError:
        result.unexpressed.append(f"{spelling} {value!r}: not JSON")
        return {}
    if not isinstance(parsed, dict):
        result.unexpressed.append(f"{spelling} {value!r}: not a JSON object")
        return {}
    if keys is not None:
        for key in sorted(set(parsed) - set(keys)):
            result.unexpressed.append(f"{spelling}: key {key!r} (the spec's speculative block has {', '.join(keys)})")
        return {k: parsed[k] for k in keys if k in parsed}
    return parsed
