"""A pinned-model chart (Olares' official LLM apps: the engine beside the Model Console, beclab/llm-init) read
by the shape's interface: the engine's MODEL_NAME and ENGINE_ARGS, the Console's MODEL_SOURCE, MODEL_MODE and
the manifest's MODEL_SUPPORTS. Its wrapper script decides at boot (a tune script, the Console's hand-off file),
so what it runs is read as the official wrapper runs those values, and the import says so."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from olarespack.engines.pinned import quant_tag
from olarespack.importer.argv import ContainerEnv, mappings

CONSOLE_IMAGE = re.compile(r"(?:^|/)llm-init(?:[:@]|$)")
SUPPORTS = ("vision", "tools", "thinking")
# What the shape's pods mount (the shared Hugging Face cache, the Console's state) and set for the wrapper
SHAPE_MOUNTS = frozenset({"/cache/hf/hub", "/run/llm-init"})
SHAPE_ENV = frozenset(
    {
        "ENGINE_KIND",
        "MODEL_NAME",
        "MODEL_SOURCE",
        "MODEL_MODE",
        "MODEL_SUPPORTS",
        "ENGINE_ARGS",
        "HF_HUB_CACHE",
        "WAIT_TIMEOUT",
        "LLAMACPP_PORT",
        "VLLM_PORT",
    }
)


class Workload(Protocol):
    workload: str
    spec: Mapping[str, Any]
    env: ContainerEnv


@dataclass(frozen=True)
class PinnedChart:
    workload: str  # the Console's
    console_image: str
    model_name: str
    model_source: str
    engine_args: str
    mode: str | None
    supports: list[str]


def pinned_chart(containers: Sequence[Workload], engine: Workload, manifest: Mapping[str, Any]) -> PinnedChart | None:
    """The chart's pinned-model interface; None when it is not that shape (no Console beside the engine, or an
    engine without MODEL_NAME and ENGINE_ARGS)."""
    console = next(
        (
            c
            for c in containers
            if c.workload != engine.workload and CONSOLE_IMAGE.search(str(c.spec.get("image") or ""))
        ),
        None,
    )
    values = engine.env.values
    if console is None or "MODEL_NAME" not in values or "ENGINE_ARGS" not in values:
        return None
    envs = {str(e.get("envName")): e for e in mappings(manifest.get("envs"))}

    def declared(name: str) -> str:
        return str(console.env.values.get(name) or values.get(name) or (envs.get(name) or {}).get("default") or "")

    supports_text = str((envs.get("MODEL_SUPPORTS") or {}).get("default") or "")
    supports = [s for s in SUPPORTS if s in {part.strip() for part in supports_text.split(",")}]
    mode = declared("MODEL_MODE")
    return PinnedChart(
        console.workload,
        str(console.spec.get("image") or ""),
        values["MODEL_NAME"],
        declared("MODEL_SOURCE"),
        values["ENGINE_ARGS"],
        mode or None,
        supports,
    )


def shape_mount(mount: Mapping[str, Any], volume: Mapping[str, Any], command: Sequence[str]) -> bool:
    """A mount the shape gives every pinned-model pod: the cache, the Console's state, the wrapper's ConfigMap."""
    path = str(mount.get("mountPath"))
    if path in SHAPE_MOUNTS:
        return True
    return "configMap" in volume and any(str(item).startswith(path.rstrip("/") + "/") for item in command)


def spec_section(chart: PinnedChart, model_file: str | None) -> dict[str, Any]:
    """olares.pinned_model as the spec writes it; the tag only where the file's name does not give it."""
    section: dict[str, Any] = {"console_image": chart.console_image}
    tag = chart.model_name.split(":", 1)[1] if ":" in chart.model_name else None
    if tag and model_file and tag != quant_tag(model_file):
        section["tag"] = tag
    if chart.mode:
        section["mode"] = chart.mode
    if chart.supports:
        section["supports"] = chart.supports
    return section
