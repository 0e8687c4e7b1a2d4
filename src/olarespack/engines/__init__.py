"""The engines olarespack can render, keyed by the spec's `engine.kind`.

Adding an engine: one package here (a spec model deriving from EngineSpec and a class deriving from
Engine[ItsSpec], see protocol.py), its rule ids (catalog.py) and image families (images.yaml), its entry in
ENGINES, and `templates/engine/<kind>.yaml.j2`. Code outside
this package reaches an engine only through `engine_for(spec.engine)` (an engine bound to the spec) or, where
there is no spec yet (import, boot logs), through the functions here; never by its class or its kind's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from olarespack.core.errors import Problem
from olarespack.core.rule_catalog import register
from olarespack.engines import llamacpp, vllm
from olarespack.engines.base import EngineSpec, owner_problems
from olarespack.engines.bootlog import BootLog, read_log
from olarespack.engines.common import floating_images, typed_flags_in_extra_args
from olarespack.engines.images import engine_of_image
from olarespack.engines.pinned import word_problems
from olarespack.engines.protocol import Bound, EngineBase
from olarespack.engines.release_rules import release_problems

if TYPE_CHECKING:
    from olarespack.spec.models import AppSpec

ENGINES: dict[str, EngineBase] = {engine.kind: engine for engine in (vllm.ENGINE, llamacpp.ENGINE)}
for _engine in ENGINES.values():
    register(_engine.title, _engine.rule_catalog())  # its own rule ids: Problem() and `lint --rules` know them
    if _wrong := owner_problems(_engine.spec_model, getattr(_engine, "flags", ())):  # checked as the table is built
        raise TypeError(f"{_engine.title}'s flag table: {'; '.join(_wrong)}")

if TYPE_CHECKING:
    EngineModel = EngineSpec  # what code outside engines/ may rely on: the fields every engine has
else:
    EngineModel = Annotated[Union[tuple(e.spec_model for e in ENGINES.values())], Field(discriminator="kind")]  # noqa: UP007


def engine_for(spec_engine: EngineSpec) -> Bound[EngineSpec]:
    """The engine of a spec's `engine` section, bound to it."""
    bound = ENGINES[spec_engine.kind].bind(spec_engine)
    if bound is None:
        raise TypeError(f"engine.kind {spec_engine.kind} with a {type(spec_engine).__name__} section")
    return bound


def engine_problems(file: str, spec: AppSpec) -> list[Problem]:
    """What the image's engine would refuse at boot or run badly, found from the spec before a box does."""
    engine = engine_for(spec.engine)
    return [
        *floating_images(file, engine),
        *typed_flags_in_extra_args(file, engine),
        *engine.rules(file, spec.hardware),
        *release_problems(file, engine),
        *pinned_problems(file, spec),
    ]


def pinned_problems(file: str, spec: AppSpec) -> list[Problem]:
    """What a spec says that the pinned-model shape (olares.pinned_model) cannot carry, field by field."""
    if spec.olares.pinned_model is None:
        return []
    shape = engine_for(spec.engine).pinned_shape(spec.olares.pinned_model.tag)
    if shape is None:
        return [
            Problem(
                file,
                "olares.pinned_model",
                f"{spec.engine.kind} has no pinned-model shape",
                "drop olares.pinned_model",
                rule="pinned-model-shape",
            )
        ]
    return [
        *(Problem(file, p.field, p.message, p.fix, rule="pinned-model-shape") for p in shape.problems),
        *(Problem(file, p.field, p.message, p.fix, rule="pinned-model-args") for p in word_problems(shape)),
    ]


def engine_of_command(argv: list[str], image: str) -> EngineBase | None:
    """Which engine a command line runs: its executable, then a module it names, else the image's family."""
    found = next((e for e in ENGINES.values() if e.runs(argv)), None) or next(
        (e for e in ENGINES.values() if e.marked(argv)), None
    )
    if found is None and (family := engine_of_image(image)) is not None:
        found = ENGINES.get(family.engine)
    return found


def read_boot_log(path: Path) -> BootLog:
    """A boot log as every engine reads it (bounded: engines/bootlog.py). Raises OSError or ValueError."""
    return read_log(path, [engine.log_reader() for engine in ENGINES.values()])


def titles() -> list[str]:
    """Every engine's title, in the registry's order ("vLLM", "llama.cpp")."""
    return [engine.title for engine in ENGINES.values()]
