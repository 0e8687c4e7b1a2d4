"""What each shipped engine release accepts, from facts generated out of the engines' own artifacts.

Each engine package carries its tables in `engines/<kind>/releases/<kind>-<release>.json` (written by
`olarespack releases refresh`, never by hand) and its ReleaseRules (the engine class's `release_rules()`):
`read_table(release, raw)` turns one table into ReleaseFacts, and its own checks ride beside it. This module
finds the table an image's release uses: the exact one, else the nearest older one (and says so), never a
silent pass for a release newer than every table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from olarespack.core.errors import Problem
    from olarespack.engines.base import EngineSpec
    from olarespack.engines.images import ImageFamily
    from olarespack.engines.protocol import EngineBase


@dataclass(frozen=True)
class OptionFacts:
    """One command-line option of a release, under every spelling it has."""

    names: tuple[str, ...]  # its spellings, the long one first where the engine lists one
    takes_value: bool | None = None  # None: the table does not say (vLLM's argparse decides)
    values: frozenset[str] | None = None  # the enumerated values it takes; None: any value
    deprecated: str | None = None  # the release that removes it ("" unknown); None: not deprecated
    note: str = ""  # the engine's own text about it (deprecation or removal, which names the replacement)
    removed: bool = False  # a stub the engine keeps only to refuse it with `note`
    fold_case: bool = False  # the engine upper-cases the value before looking it up; `values` are upper case
    values_grow: bool = False  # the engine's platforms add values at run time: an unknown one may still exist
    value_hint: str = ""  # what the engine's help calls its value (llama.cpp: FNAME, PATH, URL, N); "" not said
    env: str = ""  # the env var the engine reads it from too (llama.cpp's LLAMA_ARG_*); "" none

    @property
    def name(self) -> str:
        return next((n for n in self.names if n.startswith("--")), self.names[0])


@dataclass(frozen=True, eq=False)
class ReleaseFacts:
    kind: str  # the engine's registry key
    release: str  # as its table names it: "0.33" (vLLM minor), "b11434" (llama.cpp build)
    source: str  # the artifact and its sha256, for messages
    options: Mapping[str, OptionFacts] = field(default_factory=dict, repr=False)  # normalized spelling -> option
    env: frozenset[str] = field(default=frozenset(), repr=False)  # env vars the release reads
    env_prefixes: tuple[str, ...] = ()  # prefixes of env names only this engine reads (checked against `env`)
    sets: Mapping[str, frozenset[str]] = field(default_factory=dict, repr=False)  # further facts (speculative keys)
    numbers: Mapping[str, int] = field(default_factory=dict, repr=False)  # further facts (log verbosity levels)
    normalize: Callable[[str], str] = field(default=lambda option: option, repr=False)  # how it reads a spelling
    version: str | None = None  # the engine's own version at this release where it has one besides the release
    # (llama.cpp's CMakeLists.txt semver, "0.6.0", that its build prints as 0.6.0-dev)

    def option(self, option: str) -> OptionFacts | None:
        """The option any spelling names (`--flag=value` included), removed stubs too."""
        return self.options.get(self.normalize(option.split("=", 1)[0]))

    def accepts(self, option: str) -> bool:
        found = self.option(option)
        return found is not None and not found.removed

    def values(self, option: str) -> frozenset[str] | None:
        found = self.option(option)
        return found.values if found else None

    def deprecated(self, option: str) -> str | None:
        found = self.option(option)
        return found.deprecated if found and not found.removed else None

    def env_known(self, name: str) -> bool:
        return name in self.env

    def env_checked(self, name: str) -> bool:
        """Whether an env name is the engine's own, so an unknown one is a finding (HF_TOKEN is not)."""
        return name.startswith(self.env_prefixes)


@dataclass(frozen=True)
class ReleaseMatch:
    asked: str | None  # the release the image says ("b10870", "0.33.0"); None when nothing says one
    facts: ReleaseFacts | None  # the table used: exact, else the nearest older one; None when none applies
    note: str | None  # why not exact, as a message says it
    newer: bool = False  # the release is newer than every table: what the table lacks may be new, not wrong


def _same(facts: ReleaseFacts, family: ImageFamily) -> ReleaseFacts:
    return facts


def _none(file: str, items: list[Item], facts: ReleaseFacts) -> Iterator[Problem]:
    return iter(())


@dataclass(frozen=True)
class ReleaseRules:
    """What an engine package says about its releases, declared on its engine class (`release_rules()`), so a
    new engine that lacks one cannot be built and mypy checks each part's signature."""

    refresh: str  # the command that writes a release's table: `{release}` and `{number}` filled in
    read_table: Callable[[str, dict[str, Any]], ReleaseFacts]  # one table (its JSON) -> ReleaseFacts
    # writes the tables a refresh asks for (the engine's surface reader; the network is reached there only)
    refresh_request: Callable[[RefreshRequest, Callable[[str], None]], tuple[list[Path], list[str]]]
    widen: Callable[[ReleaseFacts, ImageFamily], ReleaseFacts] = _same  # a fork family's additions
    command_problems: Callable[[str, list[Item], ReleaseFacts], Iterator[Problem]] = _none  # its own checks
    typed_values_checked: frozenset[str] = frozenset()  # options whose value another rule checks


def rules_of(kind: str) -> ReleaseRules:
    """An engine's release rules, as its engine class declares them."""
    from olarespack.engines import ENGINES

    return ENGINES[kind].release_rules()


@cache
def tables(kind: str) -> tuple[ReleaseFacts, ...]:
    """Every shipped table of an engine, oldest first (each file read once per process)."""
    from olarespack.engines import ENGINES

    engine = ENGINES[kind]
    reader = rules_of(kind).read_table
    folder = resources.files("olarespack").joinpath(f"engines/{kind}/releases")
    found: list[tuple[tuple[int, ...], ReleaseFacts]] = []
    for entry in folder.iterdir():
        name = entry.name
        if not (name.startswith(f"{kind}-") and name.endswith(".json")):
            continue
        release = name[len(kind) + 1 : -len(".json")]
        key = engine.release_key(release)
        if key is not None:
            found.append((key, reader(release, json.loads(entry.read_text(encoding="utf-8")))))
    return tuple(facts for _, facts in sorted(found, key=lambda row: row[0]))


def refresh_command(kind: str, release: str) -> str:
    """The command that writes the table of a release (docs/maintainers.md, Engine releases)."""
    template = rules_of(kind).refresh
    return template.format(release=release, number=release.lstrip("bv"))


@dataclass(frozen=True)
class RefreshRequest:
    """What `olarespack releases refresh` asks an engine's reader (engines/<kind>/tables/surface.py) to write."""

    releases: tuple[str, ...]  # as the engine names them; none: the reader's default set
    out: Path | None = None  # None: beside the reader, where lint reads the tables
    cache: Path | None = None  # None: release_files.cache_dir()
    index: str | None = None  # PyPI's JSON API root (a mirror); None: pypi.org
    boundaries: tuple[int, int] | None = None  # llama.cpp: bisect the builds between these two
    wheels: tuple[Path, ...] = ()  # vLLM: read these wheel files instead of downloading


def refresh(kind: str, request: RefreshRequest, progress: Callable[[str], None]) -> tuple[list[Path], list[str]]:
    """Write the release tables asked, from the engine's artifacts (the network is reached here only): the
    files written and one line per failure."""
    return rules_of(kind).refresh_request(request, progress)


def match_release(engine: EngineBase, asked: str | None) -> ReleaseMatch:
    """The table a release uses: exact (a vLLM patch uses its minor's table), else the nearest older one."""
    if asked is None:
        return ReleaseMatch(None, None, "the image's tag names no release")
    key = engine.release_key(asked)
    shipped = tables(engine.kind)
    if key is None or not shipped:
        return ReleaseMatch(asked, None, f"no {engine.title} release table reads {asked!r}")
    keyed = [(engine.release_key(facts.release) or (), facts) for facts in shipped]
    older = [(k, facts) for k, facts in keyed if k <= key[: len(k)]]
    if not older:
        return ReleaseMatch(
            asked,
            None,
            f"{asked} is older than every {engine.title} release table "
            f"(oldest {shipped[0].release}): its options are not checked",
        )
    used_key, used = older[-1]
    if key[: len(used_key)] == used_key:
        return ReleaseMatch(asked, used, None)
    later = [facts for k, facts in keyed if k > used_key]
    if later:
        return ReleaseMatch(
            asked, used, f"{asked} is between {used.release} and {later[0].release}: the {used.release} table is used"
        )
    return ReleaseMatch(
        asked,
        used,
        f"{asked} is newer than every {engine.title} release table (newest "
        f"{used.release}): its {used.release} table is used; refresh with "
        f"`{refresh_command(engine.kind, asked)}`",
        newer=True,
    )


def image_release(spec_engine: EngineSpec) -> ReleaseMatch:
    """The release table of a spec's image: its family's base release for a fork, else the release the tag
    (or engine.version) says."""
    from olarespack.engines import engine_for
    from olarespack.engines.images import family_of

    bound = engine_for(spec_engine)
    family = family_of(bound.kind, spec_engine.image)
    asked = family.based_on if family and family.based_on else bound.version()
    return match_release(bound.engine, asked)


@dataclass(frozen=True)
class Item:
    """One option of a command line, its value (None: none follows), and the spec field it comes from."""

    path: str
    option: str  # as written, without `=value`
    value: str | None


_NUMBER = re.compile(r"^-\.?\d")  # a negative number (-1, -.5) is a value, not an option


def is_option(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not _NUMBER.match(text)


def read_items(rendered: list[tuple[str, str]], facts: ReleaseFacts) -> list[Item]:
    """The options of a command line (spec field, item), each with the value that follows it when the release
    says it takes one (or does not say: vLLM's tables leave that to argparse); positionals are left out."""
    items: list[Item] = []
    at = 0
    while at < len(rendered):
        path, text = rendered[at]
        at += 1
        if not is_option(text):
            continue
        name, equals, value = text.partition("=")
        found = facts.option(name)
        takes = found.takes_value if found is not None else None
        given: str | None = value if equals else None
        if not equals and takes is not False and at < len(rendered) and not is_option(rendered[at][1]):
            given = rendered[at][1]
            at += 1
        items.append(Item(path, name, given))
    return items
