"""vLLM's release tables (releases/vllm-<minor>.json, written by `olarespack releases refresh`, tables/surface.py) read
into ReleaseFacts, and the checks only vLLM needs: the speculative config's keys and method, and the
`--spec-*` shorthands that may not repeat a key of --speculative-config."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from olarespack.core.errors import Problem
from olarespack.engines.releases import Item, OptionFacts, RefreshRequest, ReleaseFacts, ReleaseRules
from olarespack.engines.vllm.spec import METHOD_SINCE

# flags whose value is a name from one of the table's registries
_ENUMERATED = {
    "--kv-cache-dtype": "kv_cache_dtypes",
    "--attention-backend": "attention_backends",
    "--tool-call-parser": "tool_parsers",
    "--reasoning-parser": "reasoning_parsers",
    "--spec-method": "speculative_methods",
}
# vLLM upper-cases an attention backend's name before looking it up (`triton_attn` is TRITON_ATTN)
_UPPER_CASED = frozenset({"--attention-backend"})
# registries that grow at run time, where a name the table lacks may still exist on the box (a warning, never an
# error): none now. --kv-cache-dtype's choices are config/cache.py's CacheDType literal, the same on every
# platform, and argparse refuses any other name (engine/arg_utils.py add_argument(**cache_kwargs["cache_dtype"]))
_RUN_TIME_REGISTRY: frozenset[str] = frozenset()
# the --spec-* shorthands and the --speculative-config key each one sets
SHORTHAND_KEYS = {"--spec-method": "method", "--spec-model": "model", "--spec-tokens": "num_speculative_tokens"}


def normalize(option: str) -> str:
    """vLLM's FlexibleArgumentParser reads `--foo_bar` as `--foo-bar` (the name only, not its value), a
    a config's key as `--config.key`, `-O.key` as --compilation-config's and `-O3` / `-O 3` as
    --optimization-level."""
    if option.startswith("--"):
        return "--" + option[2:].split(".", 1)[0].replace("_", "-")
    if option.startswith("-O"):
        return "--compilation-config" if option.startswith("-O.") else "--optimization-level"
    return option


def read_table(release: str, raw: dict[str, Any]) -> ReleaseFacts:
    artifact = raw.get("artifact", {})
    named: dict[str, frozenset[str]] = {
        "kv_cache_dtypes": frozenset(raw.get("kv_cache_dtypes", ())),
        "attention_backends": frozenset(name.upper() for name in raw.get("attention_backends", ())),
        "tool_parsers": frozenset(raw.get("tool_parsers", ())),
        "reasoning_parsers": frozenset(raw.get("reasoning_parsers", ())),
        "speculative_methods": frozenset(raw.get("speculative", {}).get("methods", ())),
        "speculative_keys": frozenset(raw.get("speculative", {}).get("keys", ())),
        # the MTP model types vLLM takes as a method only to rewrite them to mtp, warning that they are deprecated
        "mtp_aliases": frozenset(raw.get("speculative", {}).get("mtp_model_types", ())) - {"mtp"},
    }
    deprecated: dict[str, dict[str, str]] = raw.get("deprecated_flags", {})
    negatable = frozenset(raw.get("negatable_flags", ()))
    options: dict[str, OptionFacts] = {}
    for group in ("engine_args", "frontend_args", "engine_cli_only"):
        for names in raw.get(group, {}).values():
            if not names:
                continue
            long = next((n for n in names if n.startswith("--")), names[0])
            spellings = (*names, *(f"--no-{n[2:]}" for n in names if n in negatable and n.startswith("--")))
            gone = next((deprecated[n] for n in names if n in deprecated), None)
            registry = _ENUMERATED.get(long)
            option = OptionFacts(
                names=tuple(spellings),
                values=named[registry] if registry else None,
                deprecated=None if gone is None else str(gone.get("removed_in") or ""),
                note=str(gone.get("text") or "") if gone else "",
                fold_case=long in _UPPER_CASED,
                values_grow=long in _RUN_TIME_REGISTRY,
            )
            for spelling in spellings:
                options.setdefault(normalize(spelling), option)
    return ReleaseFacts(
        kind="vllm",
        release=release,
        source=f"{artifact.get('file', 'vllm ' + release)} (sha256 {str(artifact.get('sha256', '?'))[:12]})",
        options=options,
        env=frozenset(raw.get("env_vars", ())),
        env_prefixes=("VLLM_",),
        sets=named,
        normalize=normalize,
        version=str(artifact["version"]) if artifact.get("version") else None,  # the wheel the table was read from
    )


def speculative_json(value: str) -> dict[str, Any] | None:
    """--speculative-config's value as a mapping; None when it is not a JSON object (vLLM refuses it then,
    and the spec's own checks say so)."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def command_problems(file: str, items: list[Item], facts: ReleaseFacts) -> Iterator[Problem]:
    """The speculative config's keys and method, and the --spec-* shorthands beside it."""
    # every speculative config the command line gives, under either spelling (-sc is the short one)
    for config_item in items:
        if normalize(config_item.option) in ("--speculative-config", "-sc") and config_item.value is not None:
            config = speculative_json(config_item.value)
            if config is not None:
                yield from _config_problems(file, items, facts, config_item, config)


def _config_problems(
    file: str, items: list[Item], facts: ReleaseFacts, config_item: Item, config: dict[str, Any]
) -> Iterator[Problem]:
    keys = facts.sets.get("speculative_keys", frozenset())
    methods = facts.sets.get("speculative_methods", frozenset())
    where = f"vLLM {facts.release} ({facts.source})"
    for key in config:
        if keys and key not in keys:
            yield Problem(
                file,
                config_item.path,
                f"--speculative-config key {key!r} is not one {where} reads; it refuses the config",
                "remove it or use a key of that release",
                rule="engine-release-option",
            )
    method = config.get("method")
    typed = config_item.path == "engine.speculative"
    # the typed field's own rule (spec-method-version) names the first release of the methods it lists
    if isinstance(method, str) and methods and method not in methods and not (typed and method in METHOD_SINCE):
        path = f"{config_item.path}.method" if typed else config_item.path
        known = ", ".join(sorted(methods)[:16]) + (", ..." if len(methods) > 16 else "")
        yield Problem(
            file,
            path,
            f"speculative method {method!r} is not one {where} knows; it refuses the config",
            f"use one of {known}",
            rule="engine-release-value",
        )
    for item in items:
        same = SHORTHAND_KEYS.get(normalize(item.option))
        if same is not None and same in config:
            yield Problem(
                file,
                item.path,
                f"{item.option} and --speculative-config's {same!r} set the same "
                f"thing; {where} refuses the two together",
                f"give {same} in one place only",
                rule="engine-release-conflict",
            )


def _refresh_request(request: RefreshRequest, progress: Callable[[str], None]) -> tuple[list[Path], list[str]]:
    from olarespack.engines.vllm.tables.surface import refresh_request  # the wheel reader: only a refresh needs it

    return refresh_request(request, progress)


RULES = ReleaseRules(
    refresh="olarespack releases refresh --engine vllm {release}",
    read_table=read_table,
    refresh_request=_refresh_request,
    command_problems=command_problems,
)
