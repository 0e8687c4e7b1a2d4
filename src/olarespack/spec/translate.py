"""pydantic's validation errors as Problems a person can act on: the field path as the spec writes it
(without pydantic's union branches), a rule id, and a fix ("did you mean ...?")."""

from __future__ import annotations

import difflib
from typing import Any, get_args

from pydantic import BaseModel

from olarespack.core.errors import Problem
from olarespack.engines import ENGINES
from olarespack.spec.models import AppSpec

KINDS = " or ".join(ENGINES)


_UNION_MEMBER_TAGS = ("function-", "constrained-", "literal[", "lax-", "json-or-python")


def _loc_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        if loc[:i] == ("engine",) and item in ENGINES:
            continue  # the discriminator tag pydantic adds for the union branch
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item.startswith(_UNION_MEMBER_TAGS) or item in ("str", "int", "float", "bool"):
            continue  # which member of a union pydantic tried: not a field the user wrote
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts)


_FIXES = {
    "missing": "add the field",
    "int_type": "write a whole number without quotes",
    "int_from_float": "write a whole number",
    "float_type": "write a number without quotes",
    "bool_type": "write true or false",
    "string_type": "write text (quote it if YAML reads it as a number, date or boolean)",
    "dict_type": "write a mapping (key: value lines)",
    "list_type": "write a list (- item lines)",
    "literal_error": "use one of the values listed",
    "union_tag_invalid": f"set engine.kind to {KINDS}",
    "union_tag_not_found": f"add engine.kind: {KINDS}",
    "semver": "write MAJOR.MINOR.PATCH, e.g. 1.0.5",
    "reserved-name": "choose another name",
    "hardware-profile": "use one of the known profiles",
    "quantity": "write a Kubernetes quantity",
}


def merge_union_problems(problems: list[Problem]) -> list[Problem]:
    """A value that matches no member of a union (a number or auto) is one problem, not one per member."""
    by_path: dict[str, list[Problem]] = {}
    for problem in problems:
        by_path.setdefault(problem.path, []).append(problem)
    merged = []
    for group in by_path.values():
        first = group[0]
        if len(group) > 1:
            messages = " or ".join(dict.fromkeys(p.message.removeprefix("Input should be ") for p in group))
            first = Problem(first.file, first.path, f"Input should be {messages}", first.fix, rule=first.rule)
        merged.append(first)
    return merged


def _rule_for(kind: str) -> str:
    """Rule id of a schema error: the model's own checks name themselves, pydantic's are grouped."""
    if kind in ("semver", "reserved-name", "hardware-profile", "quantity"):
        return kind
    if kind == "extra_forbidden":
        return "spec-unknown-key"
    if kind == "missing":
        return "spec-missing"
    if kind.startswith(("greater_than", "less_than")):
        return "spec-range"
    if kind.startswith("string_") or kind in ("too_short", "too_long"):
        return "spec-format"
    if kind.startswith(("literal", "union_tag")):
        return "spec-choice"
    return "spec-type"


def problem_of(file: str, err: Any) -> Problem:
    loc = tuple(err["loc"])
    path = _loc_path(loc)
    kind = err["type"]
    message = str(err["msg"]).removeprefix("Value error, ")
    fix = _FIXES.get(kind, "see schemas/app-spec.schema.json")
    if kind == "missing":
        fix = f"add `{path.rsplit('.', 1)[-1]}`"
    elif kind == "extra_forbidden":
        message = "unknown key"
        fix = _unknown_key_fix(loc)
    elif kind.startswith(("greater_than", "less_than")):
        fix = "use a value in the allowed range"
    elif kind.startswith("string_"):
        fix = "change the value to match the rule above"
    return Problem(file, path, message, fix, rule=_rule_for(kind))


def _unknown_key_fix(loc: tuple[int | str, ...]) -> str:
    allowed = _fields_at(AppSpec, [p for p in loc[:-1] if p not in ENGINES], loc)
    key = str(loc[-1])
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"did you mean `{close[0]}`?"
    return f"remove it; allowed keys: {', '.join(sorted(allowed))}" if allowed else "remove it"


def _fields_at(model: type[BaseModel], parts: list[int | str], loc: tuple[int | str, ...]) -> list[str]:
    """Names a mapping accepts at a location, for 'did you mean' hints."""
    current: Any = model
    for part in parts:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            current = _inner_model(current)
            if isinstance(part, int):
                continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return []
        annotation = current.model_fields[part].annotation
        if part == "engine" and current is AppSpec:
            kind = next((str(p) for p in loc if p in ENGINES), None)
            current = ENGINES[kind].spec_model if kind else None
        else:
            current = _inner_model(annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None
