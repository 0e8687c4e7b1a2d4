"""The pinned-model part of a chart's plan (olares.pinned_model): the Model Console's pod, the envs the manifest
declares and both containers read, from the engine's pinned shape (engines/pinned.py)."""

from __future__ import annotations

from dataclasses import dataclass

from olarespack.engines.base import ContainerResources
from olarespack.engines.pinned import CONSOLE_PORT, HF_HUB_CACHE, PinnedShape
from olarespack.spec.models import PinnedModel

# The official apps' figures: the Console downloads with the huggingface_hub CLI, which wants its 2Gi limit on
# large sharded models; the chown init container only walks the cache folders
CONSOLE = ContainerResources("llm-init", 200, 1000, 256 * 2**20, 2 * 2**30)
CHOWN = ContainerResources("init-chown", 10, 100, 16 * 2**20, 64 * 2**20)
CHOWN_IMAGE = "docker.io/beclab/aboveos-busybox:1.37.0"
CONSOLE_WORKLOAD = "llminit"
CONSOLE_ENTRANCE = "console"
SHARED_SERVICE = "sharedentrances-api"  # the shared entrance's host, as the official apps and Router name it
DOWNLOAD_SERVICE = "download-svc"
# MODEL_SUPPORTS' groups as the Console validates them (the official charts' expansion)
SUPPORT_KEYS = {
    "vision": ("supports_vision",),
    "tools": ("supports_function_calling", "supports_parallel_function_calling", "supports_tool_choice"),
    "thinking": ("supports_reasoning", "supports_reasoning_effort"),
}


@dataclass(frozen=True)
class PinnedPlan:
    shape: PinnedShape
    console_image: str
    mode: str
    supports: str  # MODEL_SUPPORTS as the manifest declares it ("none" for no capability)
    supports_keys: str  # as the Console reads it
    gpu_memory_env: str  # <PREFIX>_REQUIRED_GPU_MEMORY
    containers: list[ContainerResources]
    init_containers: list[ContainerResources]
    console_port: int = CONSOLE_PORT
    hf_hub_cache: str = HF_HUB_CACHE
    chown_image: str = CHOWN_IMAGE
    workload: str = CONSOLE_WORKLOAD
    entrance: str = CONSOLE_ENTRANCE
    shared_service: str = SHARED_SERVICE
    download_service: str = DOWNLOAD_SERVICE


def pinned_plan(pinned: PinnedModel, shape: PinnedShape) -> PinnedPlan:
    supports = [name for name in ("vision", "tools", "thinking") if name in pinned.supports]
    return PinnedPlan(
        shape=shape,
        console_image=pinned.console_image,
        mode=pinned.mode,
        supports=",".join(supports) or "none",
        supports_keys=",".join(key for name in supports for key in SUPPORT_KEYS[name]),
        gpu_memory_env=f"{shape.env_prefix}_REQUIRED_GPU_MEMORY",
        containers=[CONSOLE],
        init_containers=[CHOWN],
    )
