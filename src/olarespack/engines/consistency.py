"""Rules that hold a spec's models together: a drafter made for its target, parsers that suit the model's family.

Pure functions over repository names and the model facts (`arch.models_for(spec_file)`), shared by the engines:

- `drafter_problems(file, path, target, drafter, registry)`: the drafter must be made for the target. In order of
  evidence: the drafter's facts list the targets it was made for (`drafter_for`; a quantized copy of a listed
  target counts, by `base_name`); else both sides' facts agree on hidden size and vocabulary (a DFlash or EAGLE
  drafter is often another architecture, so its facts' family is not compared when the sizes are known; the
  hidden size only where the method reads the target's hidden states, at the drafter's `target_hidden_size`
  when it has one); else the families (facts, else the repository name) agree. Nothing known on one side:
  nothing is said.
- `parser_problems(file, model, registry, ...)`: a tool or reasoning parser made for another family is an
  error; a name vLLM does not register is a warning; a model whose family cannot be told gets no judgement.

The family table, the parser names and the copy suffixes are data: `data/families.yaml`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from olarespack.core.errors import Problem
from olarespack.models.arch import ModelInfo

Registry = Mapping[str, ModelInfo]


@dataclass(frozen=True)
class Family:
    name: str
    names: tuple[str, ...]
    model_types: tuple[str, ...]
    tool_parsers: tuple[str, ...]
    reasoning_parsers: tuple[str, ...]


@dataclass(frozen=True)
class FamilyTable:
    families: tuple[Family, ...]
    generic_tool_parsers: frozenset[str]
    generic_reasoning_parsers: frozenset[str]
    vllm_tool_parsers: frozenset[str]
    vllm_reasoning_parsers: frozenset[str]
    copy_suffixes: frozenset[str]


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise ValueError(f"data/families.yaml: {where} must be a list of strings")
    return tuple(raw)


@cache
def family_table() -> FamilyTable:
    """The shipped family table (data/families.yaml)."""
    text = resources.files("olarespack").joinpath("data/families.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    families = tuple(
        Family(
            name,
            _strings(entry.get("names"), f"{name}.names"),
            _strings(entry.get("model_types", []), f"{name}.model_types"),
            _strings(entry.get("tool_parsers", []), f"{name}.tool_parsers"),
            _strings(entry.get("reasoning_parsers", []), f"{name}.reasoning_parsers"),
        )
        for name, entry in raw["families"].items()
    )
    return FamilyTable(
        families,
        frozenset(_strings(raw["generic_tool_parsers"], "generic_tool_parsers")),
        frozenset(_strings(raw["generic_reasoning_parsers"], "generic_reasoning_parsers")),
        frozenset(_strings(raw["vllm_tool_parsers"], "vllm_tool_parsers")),
        frozenset(_strings(raw["vllm_reasoning_parsers"], "vllm_reasoning_parsers")),
        frozenset(_strings(raw["copy_suffixes"], "copy_suffixes")),
    )


def _short(repo: str) -> str:
    return repo.rsplit("/", 1)[-1].lower()


def base_name(repo: str) -> str:
    """The repository's name without owner and without trailing quantization pieces (data/families.yaml
    copy_suffixes): `cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit` -> `gemma-4-26b-a4b-it`."""
    pieces = _short(repo).split("-")
    suffixes = family_table().copy_suffixes
    while len(pieces) > 1 and pieces[-1] in suffixes:
        pieces.pop()
    return "-".join(pieces)


def family_from_name(repo: str) -> str | None:
    """The one family whose name pieces the repository's name contains; None when none or several do."""
    short = _short(repo)
    found = {family.name for family in family_table().families if any(piece in short for piece in family.names)}
    return found.pop() if len(found) == 1 else None


def _family_of_type(model_type: str) -> str | None:
    for family in family_table().families:
        if model_type in family.model_types or model_type == family.name:
            return family.name
    return None


def family_from_facts(repo: str, registry: Registry) -> str | None:
    info = registry.get(repo)
    return _family_of_type(info.family) if info is not None and info.family else None


def family_of(repo: str, registry: Registry) -> str | None:
    """The model's family: its facts' family when the table knows it, else the one its name tells, else None."""
    return family_from_facts(repo, registry) or family_from_name(repo)


def _family(name: str) -> Family:
    return next(family for family in family_table().families if family.name == name)


# ----------------------------------------------------------------------------------------------- drafters


def _listed_target(target: str, made_for: tuple[str, ...]) -> bool:
    return target in made_for or base_name(target) in {base_name(repo) for repo in made_for}


def drafter_problems(
    file: str,
    path: str,
    target: str,
    drafter: str,
    registry: Registry,
    *,
    hidden_states: bool = True,
    vocab: bool = True,
) -> Iterator[Problem]:
    """The drafter `drafter` must be made for the model `target` (see the module docstring for the evidence
    used). `path` is the spec field the problem names (e.g. engine.speculative). `hidden_states`: the method feeds
    the target's hidden states to the drafter (MTP, EAGLE, DFlash), so the widths must agree; a separate draft
    model (vLLM draft_model, llama.cpp's draft) has a width of its own. `vocab`: compare the vocabularies here
    (an engine that judges them by its own rule, llama.cpp's per build, passes False)."""
    fix = "use a drafter made for this model (its model card names the target), or drop the speculative decoding"
    info, target_info = registry.get(drafter), registry.get(target)
    if info is not None and info.drafter_for:
        if not _listed_target(target, info.drafter_for):
            yield Problem(
                file,
                path,
                f"the drafter {drafter} is made for {', '.join(info.drafter_for)}, not for "
                f"{target} (its drafts would be rejected, or vLLM refuses the pair)",
                fix,
                rule="drafter-target",
            )
        return
    if info and info.arch and target_info and target_info.arch:
        ours, theirs = info.arch, target_info.arch
        width = ours.target_hidden_size or ours.hidden_size  # the width it reads the target's states at
        if not hidden_states and ours.vocab_size and theirs.vocab_size:
            if vocab and ours.vocab_size != theirs.vocab_size:
                yield Problem(
                    file,
                    path,
                    f"the draft model {drafter} has a vocabulary of {ours.vocab_size} tokens, "
                    f"the target {target} {theirs.vocab_size}: its drafts are other tokens",
                    fix,
                    rule="drafter-target",
                )
            return
        if hidden_states and width and theirs.hidden_size:
            if width != theirs.hidden_size:
                named = "reads hidden states" if ours.target_hidden_size else "has hidden size"
                yield Problem(
                    file,
                    path,
                    f"the drafter {drafter} {named} {width} wide, the target "
                    f"{target} {theirs.hidden_size}: it was made for another model",
                    fix,
                    rule="drafter-target",
                )
            elif vocab and ours.vocab_size and theirs.vocab_size and ours.vocab_size != theirs.vocab_size:
                yield Problem(
                    file,
                    path,
                    f"the drafter {drafter} has a vocabulary of {ours.vocab_size} tokens, the "
                    f"target {target} {theirs.vocab_size}: it was made for another model",
                    fix,
                    rule="drafter-target",
                )
            return
    # a drafter's name names the model it drafts for (z-lab/gemma-4-26B-A4B-it-DFlash): its name goes first
    drafter_family = family_from_name(drafter) or family_from_facts(drafter, registry)
    target_family = family_of(target, registry)
    if drafter_family and target_family and drafter_family != target_family:
        yield Problem(
            file,
            path,
            f"the drafter {drafter} is a {drafter_family} model and the target {target} a "
            f"{target_family} model: a drafter only works for the model it was made for",
            fix,
            rule="drafter-target",
        )


# ----------------------------------------------------------------------------------------------- parsers


def _parser_problem(
    file: str,
    path: str,
    kind: str,
    parser: str,
    model: str,
    family: str | None,
    generic: frozenset[str],
    known: frozenset[str],
    owners: dict[str, list[str]],
    suited: tuple[str, ...],
) -> Iterator[Problem]:
    flag = f"--{kind}-parser" if kind == "reasoning" else "--tool-call-parser"
    if parser not in known:
        hint = f" ({' or '.join(suited)} suit{'s' if len(suited) == 1 else ''} this model)" if suited else ""
        yield Problem(
            file,
            path,
            f"{parser!r} is not a {flag} name vLLM registers (misspelt, or a plugin's)",
            f"check the name against vLLM's list{hint}",
            rule="parser-unknown",
            severity="warning",
        )
        return
    if family is None or parser in generic or parser in suited or parser not in owners:
        return
    fix = f"use {' or '.join(suited)}" if suited else f"remove it: vLLM has no {kind} parser for {family} models"
    yield Problem(
        file,
        path,
        f"the {parser} {kind} parser is made for {', '.join(owners[parser])} models; {model} is a {family} model",
        fix,
        rule="parser-family",
    )


def parser_problems(
    file: str,
    model: str,
    registry: Registry,
    *,
    tool_parser: str | None = None,
    reasoning_parser: str | None = None,
    tool_path: str = "engine.tool_call_parser",
    reasoning_path: str = "engine.reasoning_parser",
) -> Iterator[Problem]:
    """vLLM parsers must suit the model's family (data/families.yaml)."""
    table = family_table()
    family = family_of(model, registry)
    tools: dict[str, list[str]] = {}
    reasons: dict[str, list[str]] = {}
    for entry in table.families:
        for name in entry.tool_parsers:
            tools.setdefault(name, []).append(entry.name)
        for name in entry.reasoning_parsers:
            reasons.setdefault(name, []).append(entry.name)
    mine = _family(family) if family else None
    if tool_parser:
        yield from _parser_problem(
            file,
            tool_path,
            "tool-call",
            tool_parser,
            model,
            family,
            table.generic_tool_parsers,
            table.vllm_tool_parsers,
            tools,
            mine.tool_parsers if mine else (),
        )
    if reasoning_parser:
        yield from _parser_problem(
            file,
            reasoning_path,
            "reasoning",
            reasoning_parser,
            model,
            family,
            table.generic_reasoning_parsers,
            table.vllm_reasoning_parsers,
            reasons,
            mine.reasoning_parsers if mine else (),
        )
