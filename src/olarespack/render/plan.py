"""The plan of a chart: everything the templates print, computed once from the spec, so a number typed
once reaches the args, the manifest, the descriptions and the resource sums alike."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from olarespack.core import quantity
from olarespack.core.hardware import HardwareProfile, profiles
from olarespack.core.types import SHARED_MODEL_DIR
from olarespack.engines import engine_for
from olarespack.engines.base import ContainerResources, kubernetes_literal
from olarespack.engines.pinned import PinnedShape
from olarespack.olares.generations import GENERATIONS, Generation, GenerationName
from olarespack.render.pinned import PinnedPlan, pinned_plan
from olarespack.render.texts import Texts, citation_context, market_texts, preset_section
from olarespack.spec.models import AppSpec

STARTUP_PERIOD_SECONDS = 15


@dataclass(frozen=True)
class Plan:
    """Everything the templates print, computed once from the spec."""

    spec: AppSpec
    generation: Generation
    hardware: HardwareProfile
    engine_template: str
    engine_version: str | None
    container_name: str
    command: list[str]
    args: list[str]  # as the Deployment writes them ($( escaped)
    effective_args: list[str]  # as the process receives them
    port: int
    containers: list[ContainerResources]
    init_containers: list[ContainerResources]
    gpu_memory: int  # booked: requests = limits = the manifest's requirement
    startup_failure_threshold: int
    startup_period_seconds: int
    hf_env: bool  # the server container gets HF_ENDPOINT / HF_TOKEN
    container_env: list[tuple[str, str]]  # the engine's own env, before HF_*
    engine_env: list[tuple[str, str]]  # after HF_*: the legacy HAMi limit, then the spec's env, sorted
    texts: dict[str, Texts]  # locale -> title, description, full_description, upgrade_description
    locales: list[str]
    llm_gateway: bool = False  # options.LLMGatewaySupported: only the current generation's manifest has it
    pinned: PinnedPlan | None = None  # the pinned-model shape's Model Console and envs (olares.pinned_model)
    shared_models: bool = False  # the pod mounts the box's shared model folder (a model path under /shared-models)
    extra: dict[str, Any] = field(default_factory=dict)  # the engine's own template values

    @property
    def server_argv(self) -> list[str]:
        """What the server process runs: the command and args, or the pinned-model wrapper's exec line."""
        return self.pinned.shape.command_line() if self.pinned else [*self.command, *self.effective_args]

    @property
    def sums(self) -> dict[str, int]:
        """What the pod needs as Kubernetes counts it; the manifest declares exactly this."""
        pods = [(self.containers, self.init_containers)]
        if self.pinned is not None:
            pods.append((self.pinned.containers, self.pinned.init_containers))
        return {
            key: sum(
                quantity.pod_effective([getattr(c, key) for c in containers], [getattr(c, key) for c in init])
                for containers, init in pods
            )
            for key in ("cpu_request", "cpu_limit", "memory_request", "memory_limit")
        }


def plan_chart(spec: AppSpec, file: str, generation: GenerationName | None = None) -> Plan:
    gen = GENERATIONS[generation or spec.olares.generation]
    hardware = profiles()[spec.hardware]
    engine = engine_for(spec.engine)
    args = engine.args()
    effective = [item for arg in args for item in arg.effective_items()]
    version = engine.version()
    res = spec.resources
    server = ContainerResources(
        engine.engine.container_name,
        quantity.parse_cpu(res.cpu.request),
        quantity.parse_cpu(res.cpu.limit),
        quantity.parse_bytes(res.memory.request),
        quantity.parse_bytes(res.memory.limit),
    )
    gpu_memory = spec.gpu_memory()
    shape = engine.pinned_shape(spec.olares.pinned_model.tag) if spec.olares.pinned_model is not None else None
    pinned = pinned_plan(spec.olares.pinned_model, shape) if spec.olares.pinned_model and shape else None
    context = citation_context(spec, engine, hardware, effective, version)
    preset = preset_section(spec, engine, engine.listed_args(effective), hardware, gpu_memory)
    engine_env = sorted((name, kubernetes_literal(value)) for name, value in spec.engine.env.items())
    if gen.name == "legacy":
        # HAMi-core reads Olares' default CUDA_DEVICE_MEMORY_LIMIT_0=0m as zero bytes.
        engine_env.insert(0, ("CUDA_DEVICE_MEMORY_LIMIT_0", f"{quantity.mib(gpu_memory)}m"))
    return Plan(
        spec=spec,
        generation=gen,
        hardware=hardware,
        engine_template=engine.engine.template,
        engine_version=version,
        container_name=engine.engine.container_name,
        command=engine.server_command(),
        args=[item for arg in args for item in arg.container_items()],
        effective_args=effective,
        port=shape.port if shape else engine.server_port(),
        containers=[server],
        init_containers=[] if pinned else engine.init_containers(),
        gpu_memory=gpu_memory,
        startup_failure_threshold=math.ceil(spec.startup_timeout_minutes * 60 / STARTUP_PERIOD_SECONDS),
        startup_period_seconds=STARTUP_PERIOD_SECONDS,
        hf_env=engine.engine.hf_env,
        container_env=_pinned_env(engine.container_env(), shape) if shape else engine.container_env(),
        engine_env=engine_env,
        texts=market_texts(spec, file, context, preset),
        locales=[spec.metadata.default_locale, *sorted(spec.metadata.locales)],
        llm_gateway=gen.name == "current" and spec.olares.gateway(),
        pinned=pinned,
        shared_models=not pinned
        and any(item == SHARED_MODEL_DIR or item.startswith(f"{SHARED_MODEL_DIR}/") for item in effective),
        extra=engine.template_values(),
    )


def _pinned_env(env: list[tuple[str, str]], shape: PinnedShape) -> list[tuple[str, str]]:
    """The engine's env in the pinned-model shape: only what ENGINE_ARGS cites (SPEC_CONFIG); the model files'
    folder is the shared cache's."""
    cited = {arg.env for _, arg in shape.engine_args if arg.env}
    return [(name, value) for name, value in env if name in cited]
