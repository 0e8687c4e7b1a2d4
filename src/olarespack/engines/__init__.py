"""The engines olarespack can render, keyed by the spec's `engine.kind`.

Adding an engine: one module here (a spec model deriving from EngineSpec and a class deriving from Engine),
its entry in ENGINES, and `templates/engine/<kind>.yaml.j2`. Code outside this package reaches an engine only
through `engine_for(spec.engine)`, never by its class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from olarespack.core.errors import Problem
from olarespack.engines import llamacpp, vllm
from olarespack.engines.base import Engine, EngineSpec
from olarespack.engines.common import floating_images, typed_flags_in_extra_args

if TYPE_CHECKING:
    from olarespack.spec.models import AppSpec

ENGINES: dict[str, Engine] = {engine.kind: engine for engine in (vllm.ENGINE, llamacpp.ENGINE)}

if TYPE_CHECKING:
    EngineModel = EngineSpec  # what code outside engines/ may rely on: the fields every engine has
else:
    EngineModel = Annotated[Union[tuple(e.model for e in ENGINES.values())], Field(discriminator="kind")]  # noqa: UP007


def engine_for(spec_engine: Any) -> Engine:
    """The engine of a spec's `engine` section."""
    return ENGINES[spec_engine.kind]


def engine_problems(file: str, spec: AppSpec) -> list[Problem]:
    """What the image's engine would refuse at boot or run badly, found from the spec before a box does."""
    engine = engine_for(spec.engine)
    return [*floating_images(file, spec, engine), *typed_flags_in_extra_args(file, spec, engine),
            *engine.rules(file, spec)]
