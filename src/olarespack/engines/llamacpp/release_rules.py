"""llama.cpp's release tables (releases/llamacpp-b<build>.json, written by `olarespack releases refresh` from
each build's common/arg.cpp, tables/surface.py) read into ReleaseFacts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from olarespack.engines.images import ImageFamily
from olarespack.engines.releases import OptionFacts, RefreshRequest, ReleaseFacts, ReleaseRules

REFRESH = "olarespack releases refresh --engine llama.cpp {number}"
SPEC_TYPE = "--spec-type"


def read_table(release: str, raw: dict[str, Any]) -> ReleaseFacts:
    artifact = raw.get("artifact", {})
    spec_types = frozenset(raw.get("spec_type_table", ()))
    options: dict[str, OptionFacts] = {}
    env: set[str] = set()
    for row in raw.get("server_options", ()):
        names = tuple(row.get("names", ()))
        if not names:
            continue
        spellings = (*names, *row.get("negative", ()))
        choices = row.get("choices")
        values = frozenset(choices) if choices else None
        if SPEC_TYPE in names and values is None:
            # b9101's --spec-type is an if-chain over the names its hint lists, for speculation without a draft
            # model (a real b9101 refuses "draft", which its type table lists: the draft model selects that type)
            values = frozenset(re.findall(r"[a-z0-9-]+", str(row.get("value_hint", "")))) or spec_types
        removed = bool(row.get("removed"))
        option = OptionFacts(
            names=spellings,
            takes_value=bool(row.get("takes_value")),
            values=values,
            deprecated="" if row.get("deprecated") else None,
            note=str(row.get("removed") or row.get("deprecated") or ""),
            removed=removed,
            value_hint=str(row.get("value_hint") or ""),
            env=str(row.get("env") or ""),
        )
        for spelling in spellings:
            options.setdefault(spelling, option)
        if row.get("env") and not removed:
            env.add(str(row["env"]))
    return ReleaseFacts(
        kind="llamacpp",
        release=release,
        source=f"{artifact.get('file', 'llama.cpp ' + release)} (sha256 {str(artifact.get('sha256', '?'))[:12]})",
        options=options,
        env=frozenset(env),
        env_prefixes=("LLAMA_ARG_",),
        sets={"spec_types": spec_types},
        numbers={key: int(value) for key, value in raw.get("log", {}).items()},
        version=str(raw["llama_version"]) if raw.get("llama_version") else None,
    )


# the typed speculative type has its own rule (llamacpp-spec-type), which knows the family's first build for it
TYPED_VALUES_CHECKED = frozenset({SPEC_TYPE})
_CACHE_TYPE_FLAGS = ("-ctk", "--cache-type-k", "-ctv", "--cache-type-v")


def widen(facts: ReleaseFacts, family: ImageFamily) -> ReleaseFacts:
    """A fork's facts: its base release's, plus the speculative types, KV cache types and drafter flags its
    family adds (engines/llamacpp/images.yaml)."""
    if not family.based_on:
        return facts
    options = dict(facts.options)
    for flag in {t.drafter_flag for t in family.spec_types.values() if t.drafter_flag} | set(family.flags):
        options.setdefault(flag, OptionFacts(names=(flag,), takes_value=True))
    for flags, added in ((_CACHE_TYPE_FLAGS, family.cache_types), ((SPEC_TYPE,), family.spec_types)):
        for flag in flags:
            if (found := options.get(flag)) is not None and found.values is not None and added:
                options[flag] = replace(found, values=found.values | frozenset(added))
    return replace(facts, options=options, release=facts.release, source=f"{family.name} on {facts.source}")


def _refresh_request(request: RefreshRequest, progress: Callable[[str], None]) -> tuple[list[Path], list[str]]:
    from olarespack.engines.llamacpp.tables.surface import refresh_request  # the sdist reader: only a refresh needs it

    return refresh_request(request, progress)


RULES = ReleaseRules(
    refresh=REFRESH,
    read_table=read_table,
    refresh_request=_refresh_request,
    widen=widen,
    typed_values_checked=TYPED_VALUES_CHECKED,
)
