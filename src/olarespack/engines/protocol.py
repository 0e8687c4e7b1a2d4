"""What an engine is, in three layers of typing.

`EngineBase` is what can be asked of an engine without one spec in hand: its names, its flag table as
options, which command lines it runs, how it reads a server command line back into spec data (import), how
it reads a boot log. The registry holds engines as EngineBase.

`Engine[S]` is what an engine package derives from: generic over its spec model S, so every method that
reads a spec reads the engine's own model, with its own fields, and mypy checks them (no `Any`, no
isinstance asserts).

`Bound[S]` is an engine bound to one spec: what `engine_for(spec.engine)` returns, whose methods take no
spec argument. It is covariant in S, which is sound because it never takes an S from its callers; so
`Bound[VllmEngine]` is a `Bound[EngineSpec]`, and code outside engines/ holds one without casts. The
alternative, `engine_for(spec) -> Engine[S]`, would need a cast from the registry's engine to the spec's
type, and would let a caller hand one engine another engine's spec.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from olarespack.core.rule_catalog import Rule
from olarespack.engines.base import Arg, ContainerResources, EngineBench, EngineSpec, Flag, Option
from olarespack.engines.bootlog import BootLog, EngineLog
from olarespack.engines.calibration import MeasuredOn
from olarespack.engines.cuda import ImageCuda
from olarespack.engines.importing import EngineImport, ImportSource

if TYPE_CHECKING:
    from olarespack.core.errors import Problem
    from olarespack.engines.fit import FitReport, FitRequest
    from olarespack.engines.pinned import PinnedRead, PinnedShape
    from olarespack.engines.releases import ReleaseRules
    from olarespack.engines.smoke import EngineSmoke

S = TypeVar("S", bound=EngineSpec)
S_co = TypeVar("S_co", bound=EngineSpec, covariant=True)
ModelSource = Literal["config", "gguf"]  # how a model olarespack has no data for is described to fit


class EngineBase(ABC):
    """An inference engine, without a spec: what import, calibrate and the registry ask of it."""

    kind: ClassVar[str]
    title: ClassVar[str]  # as people write it: "vLLM", "llama.cpp"
    port: ClassVar[int]
    container_name: ClassVar[str]
    command: ClassVar[tuple[str, ...]]
    context_field: ClassVar[str]  # the spec field holding the context length, under engine.
    accepts_auto_context: ClassVar[bool] = False  # whether that field may say `auto` (the largest that fits)
    hf_env: ClassVar[bool]  # whether the server container itself gets HF_ENDPOINT / HF_TOKEN
    pinned_image: ClassVar[str]  # a pinned image, as the committed apps use: what a fix message shows
    memory_fraction: ClassVar[str | None] = None  # the spec field of the share of GPU memory it may use
    model_source: ClassVar[ModelSource]  # what fit takes for a model without data: config.json or GGUF files
    weights_format: ClassVar[str]  # what its weights are, as a message says: "safetensors", "GGUF files"
    executables: ClassVar[tuple[str, ...]]  # the file names of its server executables (import recognizes them)
    command_markers: ClassVar[tuple[str, ...]] = ()  # words in the first four that name it (a module run directly)
    calibration_model: ClassVar[type[MeasuredOn] | None] = None  # engine.calibration's model; None: none yet
    calibration_lines: ClassVar[str] = ""  # the boot log lines a calibration reads, as a message names them
    # a context past the model's positions: refused at start-up (vLLM), or booted with every slot capped at them
    # (llama.cpp b9101 and b11434: "the slot context exceeds the training context of the model - capping")
    caps_slot_context: ClassVar[bool] = False
    openai_api: ClassVar[bool] = True  # it serves the OpenAI API (/v1): the app joins Olares' LLM gateway by default

    @property
    def template(self) -> str:
        return f"engine/{self.kind}.yaml.j2"

    def release_key(self, release: str) -> tuple[int, ...] | None:
        """A release as a sortable key ("b11434" -> (11434,), "0.33.0" -> (0, 33, 0)); a table's key is a
        prefix of the keys of the releases it describes (the 0.33 table: every 0.33.x). None: not a release."""
        import re

        match = re.match(r"^[A-Za-z]*(\d+(?:\.\d+)*)", release)
        return tuple(int(part) for part in match.group(1).split(".")) if match else None

    @property
    @abstractmethod
    def spec_model(self) -> type[EngineSpec]: ...

    @abstractmethod
    def options(self) -> Sequence[Option]:
        """The flag table, as rows without their values."""

    def typed_flags(self) -> dict[str, str]:
        """Every spelling of a flag the table writes -> the spec field that owns it."""
        return {spelling: flag.owner for flag in self.options() for spelling in flag.spellings()}

    def listed_args(self, effective: list[str]) -> list[str]:
        """The args as the market description lists them (all of them unless the engine says otherwise)."""
        return effective

    def runs(self, argv: list[str]) -> bool:
        """Whether a command line runs this engine's server, by its executable's file name."""
        return bool(argv) and argv[0].rsplit("/", 1)[-1] in self.executables

    def marked(self, argv: list[str]) -> bool:
        """Whether a command line names this engine among its first words (a module run directly)."""
        return any(marker in argv[:4] for marker in self.command_markers)

    @abstractmethod
    def import_argv(self, argv: list[str], image: str, source: ImportSource) -> EngineImport:
        """A server command line read back into this engine's spec data (import)."""

    def env_notes(self, env: Mapping[str, str]) -> list[str]:
        """What an imported chart's engine env does that the spec's chart does differently on purpose."""
        return []

    def read_pinned(
        self, model_name: str, model_source: str, engine_args: str, command: list[str], image: str
    ) -> PinnedRead | None:
        """A pinned-model chart's server through the shape's interface (import); None: no such shape here."""
        return None

    def log_reader(self) -> EngineLog:
        """A fresh reader of this engine's boot log lines."""
        return EngineLog(self.kind)

    @abstractmethod
    def bind(self, spec: EngineSpec) -> Bound[EngineSpec] | None:
        """This engine bound to a spec of its model; None for another engine's spec."""

    def image_cuda(self, image: str) -> ImageCuda:
        """Which CUDA an image of this engine is built on (engines/cuda.py); not known unless the engine says."""
        return ImageCuda(image, None, note=f"no table says which CUDA {self.title} images are built on")

    def image_at(self, image: str, release: str) -> str | None:
        """The image of the same repository and flavour at another release (as its table names it: "b11434",
        "0.33"); None where the tag's form is not known to this engine."""
        return None

    # What an engine package declares beside its class, each in a module of its own (imported by the method, so
    # the registry stays light): abstract, so an engine that lacks one cannot be built and mypy says so.
    @abstractmethod
    def bench(self) -> EngineBench:
        """What bench reads of this engine (engines/base.py EngineBench): its package's bench.BENCH."""

    @abstractmethod
    def smoke(self) -> EngineSmoke[Any]:
        """How `olarespack smoke` boots this engine here (engines/smoke.py EngineSmoke): its package's smoke.SMOKE."""

    @abstractmethod
    def release_rules(self) -> ReleaseRules:
        """Its release tables' reader, refresh command and own checks (engines/releases.py ReleaseRules)."""

    @abstractmethod
    def rule_catalog(self) -> Mapping[str, Rule]:
        """The rule ids its own checks report, with what each protects against: its package's catalog.RULES
        (registered into core/rule_catalog.py by engines/__init__.py)."""


class Engine(EngineBase, Generic[S]):
    """An engine package's class: everything that differs between engines, typed by its spec model S."""

    model: type[S]
    flags: tuple[Flag[S], ...]

    @property
    def spec_model(self) -> type[EngineSpec]:
        return self.model

    def options(self) -> Sequence[Option]:
        return self.flags

    def bind(self, spec: EngineSpec) -> Bound[EngineSpec] | None:
        if not isinstance(spec, self.model):
            return None
        bound: Bound[S] = Bound(self, spec)
        return bound

    def args(self, spec: S) -> list[Arg]:
        """The command line: the flag table, then the spec's extra args as given."""
        table = [arg for flag in self.flags for arg in flag.args(spec)]
        return table + [Arg(value=extra) for extra in spec.extra_args]

    def rendered_items(self, spec: S) -> list[tuple[str, str]]:
        """The server's command line as the process receives it ($(ENV) values expanded), each item with the
        spec field it comes from: what the release checks read, and where their messages point."""
        args = self.args(spec)
        extra = len(spec.extra_args)
        owners = self.typed_flags()
        found: list[tuple[str, str]] = []
        for arg in args[: len(args) - extra] if extra else args:
            owner = owners.get(arg.flag or "", "engine")
            found += [("engine" if owner == "chart" else owner, item) for item in arg.effective_items()]
        return found + [(f"engine.extra_args[{i}]", item) for i, item in enumerate(spec.extra_args)]

    def server_port(self, spec: S) -> int:
        return spec.port or self.port

    def server_command(self, spec: S) -> list[str]:
        """The executable the container runs: the spec's, else its image family's, else the engine's."""
        from olarespack.engines.images import family_of

        if spec.command:
            return list(spec.command)
        family = family_of(self.kind, spec.image)
        return list(family.command) if family else list(self.command)

    def container_env(self, spec: S) -> list[tuple[str, str]]:
        """Env the engine's container needs before the spec's own: where model files live, then the values
        the flag table carries in env vars (literal: Kubernetes expands nothing in them)."""
        from olarespack.engines.base import kubernetes_literal

        return [
            (arg.env, kubernetes_literal(arg.value)) for arg in self.args(spec) if arg.env and arg.value is not None
        ]

    def init_containers(self, spec: S) -> list[ContainerResources]:
        return []

    def template_values(self, spec: S) -> dict[str, Any]:
        """Engine-specific values its template prints (folders, downloads): data for Jinja, of any shape."""
        return {}

    def images(self, spec: S) -> list[tuple[str, str]]:
        """(field path, image) of every image the engine's pods run."""
        return [("engine.image", spec.image)]

    def calibration(self, spec: S) -> dict[str, Any]:
        """fit arguments from a boot measurement the spec carries (none: {})."""
        return {}

    def calibration_values(self, spec: S, log: BootLog, gpu_memory: int) -> dict[str, Any]:
        """engine.calibration's engine-specific values from a boot log (before the engine's model checks them)."""
        return {}

    def auto_context(self, spec: S) -> bool:
        """Whether the spec leaves the context to the build (the largest that fits)."""
        return False

    def with_context(self, spec: S, tokens: int) -> S:
        return spec.model_copy(update={self.context_field: tokens})

    def pinned_shape(self, spec: S, tag: str | None = None) -> PinnedShape | None:
        """The spec in Olares' pinned-model shape (engines/pinned.py), `tag` the model's quantization tag where the
        engine addresses a file by one; None: this engine has no such shape."""
        return None

    def model_files(self, spec: S) -> list[str] | None:
        """The model files the spec names, for the command that records them (None: a repository's config)."""
        return None

    def move_notes(self, old: S, new: S) -> list[str]:
        """What a move from `old`'s release to `new`'s changes on the box that no setting shows, in the words of
        the people who install the app (vLLM 0.34's KV cache sizing); none by default."""
        return []

    @abstractmethod
    def context_length(self, spec: S) -> int: ...

    @abstractmethod
    def model_repo(self, spec: S) -> str:
        """The Hugging Face repository of the served model (the key of its model facts)."""

    @abstractmethod
    def version(self, spec: S) -> str | None:
        """The engine release inside the image, when the spec or the tag says it."""

    @abstractmethod
    def preset_lines(self, spec: S) -> list[str]:
        """Lines of the description's preset section that name the model and its served name."""

    @abstractmethod
    def rules(self, file: str, spec: S, hardware: str) -> Iterator[Problem]:
        """What this engine would refuse at boot or run badly, found from the spec."""

    @abstractmethod
    def fit(self, spec: S, request: FitRequest) -> FitReport:
        """Where the GPU memory goes and whether the context fits."""


class Bound(Generic[S_co]):
    """An engine bound to one spec of its model; every method reads that spec."""

    __slots__ = ("_engine", "spec")

    def __init__(self, engine: Engine[S_co], spec: S_co) -> None:
        self._engine, self.spec = engine, spec

    @property
    def engine(self) -> EngineBase:
        """The engine itself, for what needs no spec (its title, its flag table as options)."""
        return self._engine

    @property
    def kind(self) -> str:
        return self._engine.kind

    @property
    def title(self) -> str:
        return self._engine.title

    @property
    def context_field(self) -> str:
        return self._engine.context_field

    def args(self) -> list[Arg]:
        return self._engine.args(self.spec)

    def listed_args(self, effective: list[str]) -> list[str]:
        return self._engine.listed_args(effective)

    def rendered_items(self) -> list[tuple[str, str]]:
        return self._engine.rendered_items(self.spec)

    def server_port(self) -> int:
        return self._engine.server_port(self.spec)

    def server_command(self) -> list[str]:
        return self._engine.server_command(self.spec)

    def container_env(self) -> list[tuple[str, str]]:
        return self._engine.container_env(self.spec)

    def init_containers(self) -> list[ContainerResources]:
        return self._engine.init_containers(self.spec)

    def template_values(self) -> dict[str, Any]:
        return self._engine.template_values(self.spec)

    def images(self) -> list[tuple[str, str]]:
        return self._engine.images(self.spec)

    def typed_flags(self) -> dict[str, str]:
        return self._engine.typed_flags()

    def calibration(self) -> dict[str, Any]:
        return self._engine.calibration(self.spec)

    def calibration_values(self, log: BootLog, gpu_memory: int) -> dict[str, Any]:
        return self._engine.calibration_values(self.spec, log, gpu_memory)

    def auto_context(self) -> bool:
        return self._engine.auto_context(self.spec)

    def with_context(self, tokens: int) -> S_co:
        return self._engine.with_context(self.spec, tokens)

    def model_files(self) -> list[str] | None:
        return self._engine.model_files(self.spec)

    def move_notes(self, to: Bound[Any]) -> list[str]:
        return self._engine.move_notes(self.spec, to.spec)

    def pinned_shape(self, tag: str | None = None) -> PinnedShape | None:
        return self._engine.pinned_shape(self.spec, tag)

    def context_length(self) -> int:
        return self._engine.context_length(self.spec)

    def model_repo(self) -> str:
        return self._engine.model_repo(self.spec)

    def version(self) -> str | None:
        return self._engine.version(self.spec)

    def preset_lines(self) -> list[str]:
        return self._engine.preset_lines(self.spec)

    def rules(self, file: str, hardware: str) -> Iterator[Problem]:
        return self._engine.rules(file, self.spec, hardware)

    def fit(self, request: FitRequest) -> FitReport:
        return self._engine.fit(self.spec, request)

    def speed_settings(self) -> dict[str, object]:
        """The spec's settings that change the engine's speed (engine fields only), as JSON data."""
        return self._engine.bench().speed_settings(self.spec)
