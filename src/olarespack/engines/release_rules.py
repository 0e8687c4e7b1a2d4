"""The rendered engine container checked against its image's release: every option, every enumerated value
and every engine env var, from the release tables (releases.py), with the release that removed what the image
lacks and what replaces it.

An option the table lacks is an error only when the table is the image's own (or the nearest older one and the
next table lacks it too); past the newest table, or when a table between has it, it may be new: a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from olarespack.core.errors import Problem
from olarespack.engines.images import family_of
from olarespack.engines.releases import (
    Item,
    ReleaseFacts,
    ReleaseMatch,
    image_release,
    read_items,
    rules_of,
    tables,
)

if TYPE_CHECKING:
    from olarespack.engines.base import EngineSpec
    from olarespack.engines.protocol import Bound, Engine

_NOTE_LIMIT = 200


def _short(note: str) -> str:
    note = " ".join(note.split())
    return note if len(note) <= _NOTE_LIMIT else note[: _NOTE_LIMIT - 3] + "..."


def _neighbours(facts: ReleaseFacts) -> tuple[tuple[ReleaseFacts, ...], tuple[ReleaseFacts, ...]]:
    """The tables older than this one (newest first) and newer (oldest first)."""
    shipped = tables(facts.kind)
    at = next(i for i, table in enumerate(shipped) if table.release == facts.release)
    return tuple(reversed(shipped[:at])), shipped[at + 1 :]


def _gone_since(facts: ReleaseFacts, option: str) -> tuple[str | None, str]:
    """The table that first lacks an option an older table accepted, and that older table's note on it."""
    older, _ = _neighbours(facts)
    later = facts
    for table in older:
        found = table.option(option)
        if found is not None and not found.removed:
            return later.release, found.note
        later = table
    return None, ""


def _arrives_in(facts: ReleaseFacts, option: str) -> str | None:
    _, newer = _neighbours(facts)
    return next((table.release for table in newer if table.accepts(option)), None)


def _option_problem(file: str, item: Item, facts: ReleaseFacts, match: ReleaseMatch, title: str) -> Problem | None:
    option = item.option
    found = facts.option(option)
    if found is not None and not found.removed:
        return None
    gone, note = _gone_since(facts, option)
    stub = found.note if found is not None else ""
    arrives = _arrives_in(facts, option)
    where = f"{title} {facts.release}"
    if gone:
        message = f"{option} is not an option of {where}: it is gone since {gone}"
    elif found is not None:
        message = f"{option} was removed from {where}"
    elif arrives:
        message = f"{option} is not an option of {where} yet: it arrived in {arrives}"
    else:
        message = f"{option} is not an option of {where} (nor of any release the tables know)"
    replacement = _short(stub or note)
    fix = (
        f"the engine says: {replacement}"
        if replacement
        else (f"use an image of {arrives} or later" if arrives else "remove it or fix its spelling")
    )
    # past the newest table (or between two, where the next one has it) the option may have arrived since
    unsure = match.newer or (match.note is not None and arrives is not None and gone is None)
    why = "it may be newer than the table" if unsure else "the server refuses it"
    return Problem(
        file,
        item.path,
        f"{message}; {why} ({facts.source})",
        fix,
        rule="engine-release-option",
        severity="warning" if unsure else "error",
    )


def _value_problem(file: str, item: Item, facts: ReleaseFacts, match: ReleaseMatch, title: str) -> Problem | None:
    found = facts.option(item.option)
    if found is None or found.removed or found.values is None or item.value is None:
        return None
    value = item.value.upper() if found.fold_case else item.value
    if value in found.values:
        return None
    older, _ = _neighbours(facts)
    gone = next(
        (
            later.release
            for later, table in zip((facts, *older), older, strict=False)
            if (values := table.values(item.option)) is not None and value in values
        ),
        None,
    )
    history = f" (gone since {gone})" if gone else ""
    known = ", ".join(sorted(found.values)[:16]) + (", ..." if len(found.values) > 16 else "")
    if found.values_grow:
        why = "the platform may register it when vLLM starts, else the server refuses it"
    elif match.newer:
        why = "it may be newer than the table"
    else:
        why = "the server refuses it"
    return Problem(
        file,
        item.path,
        f"{item.option} {item.value} is not a value {title} {facts.release} knows{history}; {why} ({facts.source})",
        f"use one of {known}",
        rule="engine-release-value",
        severity="warning" if found.values_grow or match.newer else "error",
    )


def _deprecated_problem(file: str, item: Item, facts: ReleaseFacts, title: str) -> Problem | None:
    removal = facts.deprecated(item.option)
    if removal is None:
        return None
    found = facts.option(item.option)
    _, newer = _neighbours(facts)
    removal = next((table.release for table in newer if not table.accepts(item.option)), removal)
    when = f"{title} {removal} removes it" if removal else "a later release removes it"
    note = _short(found.note) if found else ""
    return Problem(
        file,
        item.path,
        f"{item.option} is deprecated in {title} {facts.release}: {when}",
        f"the engine says: {note}" if note else "drop it or use its replacement",
        rule="engine-release-deprecated",
        severity="warning",
    )


def _env_problems(
    file: str, spec_engine: EngineSpec, facts: ReleaseFacts, match: ReleaseMatch, title: str
) -> Iterator[Problem]:
    older, _ = _neighbours(facts)
    for name in spec_engine.env:
        if not facts.env_checked(name) or facts.env_known(name):
            continue
        gone = next(
            (later.release for later, table in zip((facts, *older), older, strict=False) if table.env_known(name)), None
        )
        if gone and not match.newer:
            yield Problem(
                file,
                f"engine.env.{name}",
                f"{name} is not read by {title} {facts.release}: it is gone "
                f"since {gone}, so the setting does nothing ({facts.source})",
                "remove it or use what replaced it in that release",
                rule="engine-release-env",
            )
        else:
            yield Problem(
                file,
                f"engine.env.{name}",
                f"{name} is not an env var {title} {facts.release} reads "
                f"(a misspelling, or newer than the table); the server ignores it",
                "check its spelling against the release",
                rule="engine-release-env",
                severity="warning",
            )


def release_problems(file: str, engine: Bound[EngineSpec]) -> Iterator[Problem]:
    """What the image's release refuses (or will remove) in the container the chart renders."""
    spec_engine = engine.spec
    family = family_of(engine.kind, spec_engine.image)
    if family is None:  # a custom build: its flags are its own
        return
    match = image_release(spec_engine)
    facts = match.facts
    if facts is None:
        if match.asked is not None:
            yield Problem(
                file,
                "engine.image",
                f"{engine.title} {match.asked}: {match.note}",
                "use a release the tables know",
                rule="engine-release-table",
                severity="warning",
            )
        return
    if match.note:
        yield Problem(
            file,
            "engine.image",
            f"{engine.title} {match.note}" if match.newer else match.note,
            "fine when the flags below check out"
            if not match.newer
            else "add the release's table (docs/maintainers.md, Engine releases) to check its flags exactly",
            rule="engine-release-table",
            severity="warning",
        )
    if engine.auto_context():  # the build picks the number later; the options are the same with any
        from olarespack.engines import engine_for

        engine = engine_for(engine.with_context(1))
    rules = rules_of(engine.kind)
    facts = rules.widen(facts, family)
    items = read_items(engine.rendered_items(), facts)
    checked_elsewhere = rules.typed_values_checked
    for item in items:
        problem = _option_problem(file, item, facts, match, engine.title) or _deprecated_problem(
            file, item, facts, engine.title
        )
        if problem is None and not (
            facts.normalize(item.option) in checked_elsewhere and not item.path.startswith("engine.extra_args")
        ):
            problem = _value_problem(file, item, facts, match, engine.title)
        if problem is not None:
            yield problem
    yield from rules.command_problems(file, items, facts)
    yield from _env_problems(file, spec_engine, facts, match, engine.title)


def command_line_problems(file: str, path: str, kind: str, image: str, tokens: list[str]) -> list[Problem]:
    """What an image's release refuses in a command line that is not a spec's: the ENGINE_ARGS an Olares
    engine-base app is cloned with (`market clone --env ENGINE_ARGS=...`), whose wrapper appends them to the
    server's own. Each problem names `path`; an image of no known family or release says so once."""
    from types import SimpleNamespace
    from typing import cast

    from olarespack.engines import ENGINES
    from olarespack.engines.releases import match_release

    engine = ENGINES[kind]
    family = family_of(kind, image)
    if family is None:
        return [
            Problem(
                file,
                path,
                f"{image}: not an image of a {engine.title} family olarespack knows, so its options are not checked",
                "use an official image",
                rule="engine-release-table",
                severity="warning",
            )
        ]
    # an Engine reads its release from the spec's image (and version, unset here)
    typed = cast("Engine[EngineSpec]", engine)
    asked = family.based_on or typed.version(cast("EngineSpec", SimpleNamespace(image=image, version=None)))
    match = match_release(engine, asked)
    facts = match.facts
    if facts is None:
        return [
            Problem(
                file,
                path,
                f"{engine.title} {match.asked or image}: {match.note}",
                "use a release the tables know",
                rule="engine-release-table",
                severity="warning",
            )
        ]
    rules = rules_of(kind)
    facts = rules.widen(facts, family)
    items = read_items([(path, token) for token in tokens], facts)
    problems = [
        problem
        for item in items
        if (
            problem := _option_problem(file, item, facts, match, engine.title)
            or _deprecated_problem(file, item, facts, engine.title)
            or _value_problem(file, item, facts, match, engine.title)
        )
    ]
    return problems + list(rules.command_problems(file, items, facts))
