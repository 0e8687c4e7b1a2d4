"""How a vLLM release sizes its KV cache on an Olares box. From 0.34 the cache is extensible by default on CUDA:
its address range reserved with CUDA virtual memory (cuMemCreate, cuMemMap) and its pages committed after warm-up
from the memory then free, unless kv_cache_memory_bytes fixes its size (vllm/config/cache.py, 0.34.0). Under
HAMi, Olares' GPU sharing, those calls crash: HAMi-core's cuMemCreate hook reads an uninitialised device id and
writes out of bounds (Project-HAMi/HAMi-core #187, open; its fix #188 closed), seen on an Olares One. So a chart on
0.34 or later fixes the size, which turns the extensible cache off."""

from __future__ import annotations

from collections.abc import Iterator

from olarespack.core.errors import Problem
from olarespack.engines.vllm.spec import VllmEngine

EXTENSIBLE_SINCE = (0, 34, 0)
EXTENSIBLE_FLAG = "--enable-extensible-kv-cache"


def extensible_cache_problems(file: str, engine: VllmEngine, release: tuple[int, int, int] | None) -> Iterator[Problem]:
    if release is None or release < EXTENSIBLE_SINCE:
        return
    shown = ".".join(map(str, release))
    for i, item in enumerate(engine.extra_args):
        if item == EXTENSIBLE_FLAG or item.startswith(f"{EXTENSIBLE_FLAG}="):
            yield Problem(
                file,
                f"engine.extra_args[{i}]",
                f"{EXTENSIBLE_FLAG} asks vLLM {shown} for the extensible KV cache, whose CUDA virtual memory calls "
                "HAMi (Olares' GPU sharing) crashes on (Project-HAMi/HAMi-core #187): the server cannot start",
                "remove it and set engine.kv_cache_memory_bytes",
                rule="vllm-extensible-kv-cache",
            )
    if engine.kv_cache_memory_bytes is None:
        yield Problem(
            file,
            "engine.kv_cache_memory_bytes",
            f"is not set: vLLM {shown} then sizes the KV cache as an extensible cache (CUDA virtual memory, on by "
            "default on CUDA), whose calls HAMi, Olares' GPU sharing, crashes on (Project-HAMi/HAMi-core #187): "
            "the server cannot start on an Olares box",
            "set engine.kv_cache_memory_bytes to what the booking leaves the KV cache (`olarespack fit SPEC` says "
            "it, as available KV cache), which turns the extensible cache off; or stay on 0.33",
            rule="vllm-extensible-kv-cache",
        )


def move_notes(old: tuple[int, int, int] | None, new: tuple[int, int, int] | None, engine: VllmEngine) -> list[str]:
    """A move across 0.34 changes how the box's KV cache is sized, whatever the settings say (sentences without
    the final period)."""
    if old is None or new is None or not old < EXTENSIBLE_SINCE <= new:
        return []
    fixed = f" at {engine.kv_cache_memory_bytes}" if engine.kv_cache_memory_bytes else ""
    return [
        f"From 0.34 on, vLLM sizes the KV cache from the memory free after start-up unless its size is fixed: this "
        f"app fixes it{fixed} (kv_cache_memory_bytes), which keeps 0.34's extensible cache off (its CUDA virtual "
        "memory crashes under Olares' GPU sharing, HAMi), and gpu_memory_utilization no longer sizes it"
    ]
