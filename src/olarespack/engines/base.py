"""The pieces every engine package builds on: the fields every engine's spec has (EngineSpec), the
declarative flag table (which both renders the command line and tells the typed-flag rule which flags a
spec field owns), one command-line item (Arg), and the resources of a container the chart adds.

The values go straight into the container's args, not through a ConfigMap: a changed arg changes the pod
template, so `helm upgrade` restarts the engine with it (a ConfigMap edit would not), and a rendered diff
shows the change where it runs. The same list is what the descriptions cite, so text and args cannot drift.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Generic, Literal, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, Field, StringConstraints

from olarespack.core.types import ArgText, EnvName, Image, StrictModel

MODEL_DIR = "/models"
MAX_EXTRA = 64
RESERVED_DIRS = frozenset({"models", "proc", "sys", "dev", "etc", "usr", "bin", "sbin", "lib", "lib64", "var"})


def scratch_path(path: str) -> str:
    if path.split("/")[1] in RESERVED_DIRS:
        raise ValueError(f"{path} is over /models or a system folder the image needs; use e.g. /cache")
    return path


def mounted_file_path(path: str) -> str:
    """A file the chart mounts into the container: in the model folder or a folder of its own, never over a
    system folder the image needs."""
    if path.split("/")[1] in RESERVED_DIRS - {"models"} or path.count("/") < 2:
        raise ValueError(
            f"{path} is over a system folder the image needs or at the root; use e.g. /models/chat_template.jinja"
        )
    return path


# A scratch folder: absolute, plain, and not over the model folder or a system one the image needs.
ScratchPath = Annotated[
    str,
    StringConstraints(max_length=128, pattern=r"^/[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$"),
    AfterValidator(scratch_path),
]


class EngineSpec(StrictModel):
    """The fields every engine's spec model has; the rest is the engine's own."""

    kind: str
    image: Image = Field(description="Container image with a pinned tag (or digest).")
    extra_args: list[ArgText] = Field(
        default_factory=list, max_length=MAX_EXTRA, description="Further engine arguments, passed as given."
    )
    env: dict[EnvName, ArgText] = Field(
        default_factory=dict,
        max_length=MAX_EXTRA,
        description="Extra environment of the engine (values are literal: $(VAR) is not expanded).",
    )
    command: list[ArgText] | None = Field(
        None,
        min_length=1,
        max_length=8,
        description="The server executable (and the words before its flags) "
        "when the image names it otherwise than its family (engines/<kind>/images.yaml): a custom build.",
    )
    scratch: list[ScratchPath] = Field(
        default_factory=list,
        max_length=4,
        description="Folders the server writes and may lose at a restart "
        "(llama.cpp's --slot-save-path): each an empty folder of the pod (emptyDir), outside /models.",
    )
    port: int | None = Field(
        None,
        ge=1024,
        le=65_535,
        description="The port the server listens on; default "
        "the engine's (vLLM 8000, llama.cpp 8080). Keep what clients of an installed chart "
        "call.",
    )


@dataclass(frozen=True)
class Arg:
    """One command-line item: a flag, a value, or a flag and its value. A value with `env` travels in that
    environment variable of the container, and the args cite it as $(ENV)."""

    flag: str | None = None
    value: str | None = None
    env: str | None = None

    def container_items(self) -> list[str]:
        """As written in the Deployment, where Kubernetes would expand a literal $(NAME)."""
        value = (
            f"$({self.env})"
            if self.env and self.value is not None
            else (None if self.value is None else kubernetes_literal(self.value))
        )
        return [x for x in (self.flag, value) if x is not None]

    def effective_items(self) -> list[str]:
        """As the process receives them, after Kubernetes expanded $(KEY)."""
        return [x for x in (self.flag, self.value) if x is not None]


def kubernetes_literal(value: str) -> str:
    """Kubernetes expands $(NAME) in args and env values (from the container's other env vars, the HF token
    among them); a spec's text is literal, so every $( is written $$(."""
    return value.replace("$(", "$$(")


def compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


Style = Literal["value", "given", "switch", "positional"]
S = TypeVar("S", bound=EngineSpec)


class Option(Protocol):
    """A flag table row as code that never holds the engine's spec reads it (import, compare)."""

    @property
    def flag(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def style(self) -> Style: ...
    def spellings(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Flag(Generic[S]):
    """One row of an engine's flag table: the spec field it comes from and how it is written.

    value       `--flag VALUE` whenever the value is set
    given       `--flag VALUE` for a value, `--flag` alone for true, nothing for None, false or ""
    switch      `--flag` for true, `--no-flag` for false, nothing for None (left to the engine)
    positional  `VALUE` alone
    """

    flag: str
    owner: str  # the spec field that sets it ("engine.max_model_len"), or "chart" for what the chart fixes
    value: Callable[[S], object]
    style: Style = "value"
    aliases: tuple[str, ...] = ()  # other spellings of the same setting the engine accepts
    env: str | None = None  # carry the value in this env var of the container (the args cite $(ENV))

    def args(self, engine: S) -> list[Arg]:
        value = self.value(engine)
        if self.style == "positional":
            return [Arg(value=str(value))]
        if self.style == "switch":
            if value is None:
                return []
            return [Arg(self.flag if value else self.flag.replace("--", "--no-", 1))]
        if value is None or (self.style == "given" and (value is False or value == "")):
            return []
        if value is True and self.style == "given":
            return [Arg(self.flag)]
        return [Arg(self.flag, str(value), self.env)]

    def spellings(self) -> tuple[str, ...]:
        if self.style == "positional":
            return self.aliases
        negated = (self.flag.replace("--", "--no-", 1),) if self.style == "switch" else ()
        return (self.flag, *negated, *self.aliases)


def shell_join(items: list[str]) -> str:
    """A command line a person can paste: JSON-ish values single-quoted, as in the seed posts."""
    return " ".join(f"'{i}'" if re.search(r"[^A-Za-z0-9_./:=,@+-]", i) else i for i in items)


@dataclass(frozen=True)
class ContainerResources:
    name: str
    cpu_request: int  # millicores
    cpu_limit: int
    memory_request: int  # bytes
    memory_limit: int


# --------------------------------------------------------------------------------------- bench


@dataclass(frozen=True)
class ServerTimings:
    """One completion's decode as the server itself timed it (llama.cpp's `timings`): what bench reports as the
    run's tokens per second when the server gives it, rather than a client-side clock."""

    tokens: int  # tokens decoded
    ms: float  # decode time
    per_second: float  # the server's own rate
    drafted: int | None = None  # speculative tokens drafted and accepted in this completion, when it drafted
    accepted: int | None = None


@dataclass(frozen=True)
class DraftCounts:
    """A server's speculative-decoding counters: tokens drafted and accepted since it started."""

    drafted: int
    accepted: int

    def since(self, before: DraftCounts) -> DraftCounts:
        return DraftCounts(self.drafted - before.drafted, self.accepted - before.accepted)


class TruncatedMetrics(ValueError):
    """Counters longer than what is read of them: those past the cut would be missing from the sums."""


class EngineBench:
    """What `olarespack bench` asks of an engine: which spec fields change its speed (so a recorded figure goes
    stale when one of them does), where its server reports its own timings and its drafting counters. Each engine
    package has one, in its bench module; this base reads nothing."""

    speed_fields: tuple[str, ...] = ()  # fields of the engine section; the context and hardware are added by bench
    served_name_field: str = ""  # the engine field holding the model name clients send
    metrics_path: str | None = None  # the server's Prometheus counters, when drafting is counted there
    counter_source: str = ""  # how a report names where the drafting counts came from
    max_draft_tokens: int = 0  # the most tokens one step may draft on this engine, whatever a spec says

    def draft_tokens(self, engine: EngineSpec) -> int | None:
        """The most tokens one decode step drafts with these settings (0: no drafting), so a step yields at
        most this + 1 tokens; None when the spec does not say (drafting set in extra_args or a command)."""
        return 0

    def speed_settings(self, engine: EngineSpec) -> dict[str, object]:
        """The values of the fields that change speed, as JSON data; unset (None) values are left out at every
        depth, so a field olarespack adds later, unset in old specs, leaves their hash as it was."""
        dumped = engine.model_dump(mode="json", exclude_none=True)
        return {name: dumped.get(name) for name in self.speed_fields}

    def served_name(self, engine: EngineSpec) -> str | None:
        """The model name clients send in their requests."""
        value = getattr(engine, self.served_name_field, None) if self.served_name_field else None
        return value if isinstance(value, str) else None

    def timings(self, body: dict[str, object]) -> ServerTimings | None:
        """The server's own timing of a completion (the final response, or a stream's last event); None when it
        gives none. ValueError: timings that cannot be (a negative count, no time)."""
        return None

    def draft_counts(self, metrics: str) -> DraftCounts | None:
        """The drafting counters in the text of metrics_path; None when it has none (no speculative decoding).
        ValueError for counters that cannot be; TruncatedMetrics for a text too long to read whole."""
        return None


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (`X`, `X | None`), else None."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def owner_problems(model: type[BaseModel], flags: tuple[Flag[S], ...]) -> list[str]:
    """Each flag row whose owner names no field of the engine's spec model (`engine.<field>[.<field>...]`), or
    "chart": a typo there rendered, built and linted without a word."""
    found = []
    for row in flags:
        if row.owner == "chart":
            continue
        current: type[BaseModel] | None = model
        parts = row.owner.split(".")
        ok = parts[0] == "engine" and len(parts) > 1
        for part in parts[1:] if ok else ():
            fields = current.model_fields if current is not None else {}
            if part not in fields:
                ok = False
                break
            current = _model_in(fields[part].annotation)
        if not ok:
            found.append(f"{row.flag}: owner {row.owner!r} is no field of {model.__name__}")
    return found
