"""load_spec(): a spec file to an AppSpec, or a SpecError listing every problem with its file, field path
and fix. The file is read bounded (core/yamlfile.py), every string guarded (spec/guard.py), then validated."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from olarespack.core.errors import Problem, ProblemsError, SpecError
from olarespack.core.yamlfile import load_spec_data
from olarespack.spec.guard import string_problems
from olarespack.spec.models import AppSpec
from olarespack.spec.rules import cross_field_problems
from olarespack.spec.translate import merge_union_problems, problem_of


class RefusedSpec(SpecError):
    """A spec whose models validate but whose own rules or text guards refuse it: the validated spec goes with
    the problems, so the layers after the spec's (engine flags, citations) still report theirs in the same run."""

    def __init__(self, problems: list[Problem], spec: AppSpec) -> None:
        super().__init__(problems)
        self.spec = spec


def load_spec(path: Path) -> AppSpec:
    """Read and validate one spec file; raises SpecError with every problem found."""
    shown = str(path)
    data = load_spec_data(path)
    if not isinstance(data, dict):
        raise SpecError([Problem(shown, "", "the spec must be a YAML mapping", "start from apps/*.yaml", rule="yaml")])
    guarded = [Problem(shown, where, message, fix, rule=rule) for where, message, fix, rule in string_problems(data)]
    try:
        spec = AppSpec.model_validate(data)
    except ValidationError as exc:
        found = merge_union_problems([problem_of(shown, err) for err in exc.errors()])
        raise SpecError(guarded + [p for p in found if p.path not in {g.path for g in guarded}]) from None
    problems = guarded + cross_field_problems(shown, spec)
    if problems:
        # one finding per field and rule: a token in an env value trips both the generic and the env check
        raise RefusedSpec(list({(p.path, p.rule): p for p in problems}.values()), spec)
    return spec


def load_edited_spec(text: str, file: str) -> AppSpec:
    """An edited spec's text, loaded as a spec before it replaces `file` (from a copy, so nothing is written
    where it lives until it loads); the problems name `file`."""
    with tempfile.TemporaryDirectory(prefix="olarespack-edit-") as tmp:
        candidate = Path(tmp) / Path(file).name
        candidate.write_text(text, encoding="utf-8")
        try:
            return load_spec(candidate)
        except ProblemsError as exc:
            raise ProblemsError([replace(p, file=file) for p in exc.problems]) from None
