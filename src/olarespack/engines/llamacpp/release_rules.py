"""llama.cpp's release tables (releases/llamacpp-b<build>.json, written by
tools/engine_releases/llamacpp_surface.py from each build's common/arg.cpp) read into ReleaseFacts."""

from __future__ import annotations

from typing import Any

from olarespack.engines.releases import OptionFacts, ReleaseFacts

REFRESH = "python tools/engine_releases/llamacpp_surface.py {number}"
SPEC_TYPE = "--spec-type"





def read_table(release: str, raw: dict[str, Any]) -> ReleaseFacts:
    artifact = raw.get("artifact", {})
    # --spec-type's help lists only some names in older builds; the server reads the speculative type table
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
        if names and SPEC_TYPE in names:
            values = (values or frozenset()) | spec_types
        removed = bool(row.get("removed"))
        option = OptionFacts(
            names=spellings, takes_value=bool(row.get("takes_value")), values=values,
            deprecated="" if row.get("deprecated") else None,
            note=str(row.get("removed") or row.get("deprecated") or ""), removed=removed)
        for spelling in spellings:
            options.setdefault(spelling, option)
        if row.get("env") and not removed:
            env.add(str(row["env"]))
    return ReleaseFacts(
        kind="llamacpp", release=release,
        source=f"{artifact.get('file', 'llama.cpp ' + release)} (sha256 {str(artifact.get('sha256', '?'))[:12]})",
        options=options, env=frozenset(env), env_prefixes=("LLAMA_ARG_",), sets={"spec_types": spec_types})
