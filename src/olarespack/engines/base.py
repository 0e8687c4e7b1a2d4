"""What every engine module provides, and the pieces they share.

An engine is one module under engines/ with one class deriving from Engine: its spec model, a declarative
flag table (which both renders the command line and tells the typed-flag rule which flags a spec field
owns), its port, container name and command, its init containers, its rules and its fit function, plus
one template `templates/engine/<kind>.yaml.j2`. Nothing outside engines/ looks at an engine's class.

The values go straight into the container's args, not through a ConfigMap: a changed arg changes the pod
template, so `helm upgrade` restarts the engine with it (a ConfigMap edit would not), and a rendered diff
shows the change where it runs. The same list is what the descriptions cite, so text and args cannot drift.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, StringConstraints

from olarespack.core.types import ArgText, EnvName, Image, StrictModel

if TYPE_CHECKING:
    from olarespack.core.errors import Problem
    from olarespack.fit.report import FitReport, FitRequest
    from olarespack.spec.models import AppSpec

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
        raise ValueError(f"{path} is over a system folder the image needs or at the root; use e.g. "
                         "/models/chat_template.jinja")
    return path


# A scratch folder: absolute, plain, and not over the model folder or a system one the image needs.
ScratchPath = Annotated[str, StringConstraints(
    max_length=128, pattern=r"^/[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$"),
    AfterValidator(scratch_path)]


class EngineSpec(StrictModel):
    """The fields every engine's spec model has; the rest is the engine's own."""

    kind: str
    image: Image = Field(description="Container image with a pinned tag (or digest).")
    extra_args: list[ArgText] = Field(default_factory=list, max_length=MAX_EXTRA,
                                      description="Further engine arguments, passed as given.")
    env: dict[EnvName, ArgText] = Field(default_factory=dict, max_length=MAX_EXTRA,
                                        description="Extra environment of the engine (values are literal: $(VAR) "
                                        "is not expanded).")
    command: list[ArgText] | None = Field(
        None, min_length=1, max_length=8, description="The server executable (and the words before its flags) "
        "when the image names it otherwise than its family (data/engine-images.yaml): a custom build.")
    scratch: list[ScratchPath] = Field(
        default_factory=list, max_length=4, description="Folders the server writes and may lose at a restart "
        "(llama.cpp's --slot-save-path): each an empty folder of the pod (emptyDir), outside /models.")
    port: int | None = Field(None, ge=1024, le=65_535, description="The port the server listens on; default "
                             "the engine's (vLLM 8000, llama.cpp 8080). Keep what clients of an installed chart "
                             "call.")


@dataclass(frozen=True)
class Arg:
    """One command-line item: a flag, a value, or a flag and its value. A value with `env` travels in that
    environment variable of the container, and the args cite it as $(ENV)."""

    flag: str | None = None
    value: str | None = None
    env: str | None = None

    def container_items(self) -> list[str]:
        """As written in the Deployment, where Kubernetes would expand a literal $(NAME)."""
        value = f"$({self.env})" if self.env and self.value is not None else (
            None if self.value is None else kubernetes_literal(self.value))
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


@dataclass(frozen=True)
class Flag:
    """One row of an engine's flag table: the spec field it comes from and how it is written.

    value       `--flag VALUE` whenever the value is set
    given       `--flag VALUE` for a value, `--flag` alone for true, nothing for None, false or ""
    switch      `--flag` for true, `--no-flag` for false, nothing for None (left to the engine)
    positional  `VALUE` alone
    """

    flag: str
    owner: str  # the spec field that sets it ("engine.max_model_len"), or "chart" for what the chart fixes
    value: Callable[[Any], object]
    style: Style = "value"
    aliases: tuple[str, ...] = ()  # other spellings of the same setting the engine accepts
    env: str | None = None  # carry the value in this env var of the container (the args cite $(ENV))

    def args(self, engine: Any) -> list[Arg]:
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


class Engine(ABC):
    """An inference engine olarespack can render: everything that differs between engines."""

    kind: ClassVar[str]
    title: ClassVar[str]  # as people write it: "vLLM", "llama.cpp"
    model: ClassVar[type[EngineSpec]]
    port: ClassVar[int]
    container_name: ClassVar[str]
    command: ClassVar[tuple[str, ...]]
    flags: ClassVar[tuple[Flag, ...]]
    context_field: ClassVar[str]  # the spec field holding the context length, under engine.
    accepts_auto_context: ClassVar[bool] = False  # whether that field may say `auto` (the largest that fits)
    hf_env: ClassVar[bool]  # whether the server container itself gets HF_ENDPOINT / HF_TOKEN

    @property
    def template(self) -> str:
        return f"engine/{self.kind}.yaml.j2"

    def args(self, engine: Any) -> list[Arg]:
        """The command line: the flag table, then the spec's extra args as given."""
        table = [arg for flag in self.flags for arg in flag.args(engine)]
        return table + [Arg(value=extra) for extra in engine.extra_args]

    def server_port(self, engine: Any) -> int:
        return int(engine.port or self.port)

    def server_command(self, engine: Any) -> list[str]:
        """The executable the container runs: the spec's, else its image family's, else the engine's."""
        from olarespack.engines.images import family_of

        if engine.command:
            return list(engine.command)
        family = family_of(self.kind, engine.image)
        return list(family.command) if family else list(self.command)

    def typed_flags(self) -> dict[str, str]:
        """Every spelling of a flag the table writes -> the spec field that owns it."""
        return {spelling: flag.owner for flag in self.flags for spelling in flag.spellings()}

    def listed_args(self, effective: list[str]) -> list[str]:
        """The args as the market description lists them (all of them unless the engine says otherwise)."""
        return effective

    def container_env(self, engine: Any) -> list[tuple[str, str]]:
        """Env the engine's container needs before the spec's own: where model files live, then the values
        the flag table carries in env vars (literal: Kubernetes expands nothing in them)."""
        return [(arg.env, kubernetes_literal(arg.value)) for arg in self.args(engine)
                if arg.env and arg.value is not None]

    def init_containers(self, engine: Any) -> list[ContainerResources]:
        return []

    def template_values(self, engine: Any) -> dict[str, Any]:
        """Engine-specific values its template prints (folders, downloads)."""
        return {}

    def images(self, engine: Any) -> list[tuple[str, str]]:
        """(field path, image) of every image the engine's pods run."""
        return [("engine.image", engine.image)]

    def calibration(self, engine: Any) -> dict[str, Any]:
        """fit arguments from a boot measurement the spec carries (none: {})."""
        return {}

    def auto_context(self, engine: Any) -> bool:
        """Whether the spec leaves the context to the build (the largest that fits)."""
        return False

    def with_context(self, engine: Any, tokens: int) -> Any:
        return engine.model_copy(update={self.context_field: tokens})

    @abstractmethod
    def context_length(self, engine: Any) -> int: ...

    @abstractmethod
    def model_repo(self, engine: Any) -> str:
        """The Hugging Face repository of the served model (the key of its model facts)."""

    @abstractmethod
    def version(self, engine: Any) -> str | None:
        """The engine release inside the image, when the spec or the tag says it."""

    @abstractmethod
    def preset_lines(self, engine: Any) -> list[str]:
        """Lines of the description's preset section that name the model and its served name."""

    @abstractmethod
    def rules(self, file: str, spec: AppSpec) -> Iterator[Problem]:
        """What this engine would refuse at boot or run badly, found from the spec."""

    @abstractmethod
    def fit(self, spec: AppSpec, request: FitRequest) -> FitReport:
        """Where the GPU memory goes and whether the context fits (see fit/)."""
