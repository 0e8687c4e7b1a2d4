"""Spec rules that involve more than one field (or the hardware profile); each names the field to change."""

from __future__ import annotations

import re

import semver

from olarespack.core import quantity
from olarespack.core.boot_env import code_env
from olarespack.core.errors import Problem
from olarespack.core.hardware import profiles
from olarespack.spec.models import AppSpec

# Names the rendered chart sets itself; a spec that set them too would silently lose or win.
CHART_OWNED_ENV = frozenset({"HF_HOME", "HF_ENDPOINT", "HF_TOKEN", "CUDA_DEVICE_MEMORY_LIMIT_0"})


def cross_field_problems(file: str, spec: AppSpec) -> list[Problem]:
    """Rules that involve more than one field; each names the field to change."""
    problems: list[Problem] = []
    problems += _changelog_problems(file, spec)
    problems += _resource_problems(file, spec)
    problems += _env_problems(file, spec)
    if spec.entrance.title is None and not re.fullmatch(r"[a-zA-Z0-9 -]+", spec.metadata.title):
        problems.append(
            Problem(
                file,
                "metadata.title",
                "is also the entrance title, where Olares before 1.12.6 refuses anything but "
                "letters, digits, spaces and dashes",
                "set entrance.title, or drop the dots and brackets",
                rule="entrance-title",
            )
        )
    if spec.olares.llm_gateway and spec.olares.pinned_model is None:
        # Router (Olares 1.12.7) lists apps with options.LLMGatewaySupported and calls them through their shared
        # entrance (DOMAIN.md 6b); without one the app is listed and every call fails
        problems.append(
            Problem(
                file,
                "olares.llm_gateway",
                "lists the app in Router, Olares' LLM gateway, which calls an app through "
                "a shared entrance: this chart has none, so Router would list it and fail every call",
                "remove olares.llm_gateway (clients reach the app at its own entrance), or render the pinned-model "
                "shape (olares.pinned_model), whose Model Console answers at a shared entrance",
                rule="llm-gateway-route",
            )
        )
    if spec.olares.pinned_model is not None and spec.olares.generation != "current":
        # options.shared and sharedEntrances are apiVersion v3 (Olares 1.12.6 and later)
        problems.append(
            Problem(
                file,
                "olares.pinned_model",
                "is a shared app (options.shared), which only apiVersion v3 manifests "
                "have: the legacy generation cannot carry it",
                "remove olares.pinned_model or olares.generation: legacy",
                rule="pinned-model-shape",
            )
        )
    if spec.metadata.default_locale in spec.metadata.locales:
        problems.append(
            Problem(
                file,
                f"metadata.locales.{spec.metadata.default_locale}",
                "duplicates the default-locale texts",
                "remove it or change metadata.default_locale",
                rule="locale-duplicate",
            )
        )
    return problems


def _changelog_problems(file: str, spec: AppSpec) -> list[Problem]:
    problems: list[Problem] = []
    versions = [semver.Version.parse(e.version) for e in spec.changelog]
    if spec.changelog[0].version != spec.version:
        problems.append(
            Problem(
                file,
                "changelog[0].version",
                f"the newest changelog entry is {spec.changelog[0].version} but version is {spec.version}",
                f"add a changelog entry for {spec.version} at the top (or run olarespack bump)",
                rule="changelog-version",
            )
        )
    for i in range(1, len(versions)):
        if versions[i] >= versions[i - 1]:
            problems.append(
                Problem(
                    file,
                    f"changelog[{i}].version",
                    f"{versions[i]} is not older than the entry above it ({versions[i - 1]})",
                    "list entries newest first, one per version",
                    rule="changelog-order",
                )
            )
    return problems


def _resource_problems(file: str, spec: AppSpec) -> list[Problem]:
    problems: list[Problem] = []
    res = spec.resources
    pairs: list[tuple[str, int, int]] = [
        ("cpu", quantity.parse_cpu(res.cpu.request), quantity.parse_cpu(res.cpu.limit)),
        ("memory", quantity.parse_bytes(res.memory.request), quantity.parse_bytes(res.memory.limit)),
        ("disk", quantity.parse_bytes(res.disk.request), quantity.parse_bytes(res.disk.limit)),
    ]
    if res.gpu_memory is not None:
        gpu_request = spec.gpu_memory()
        pairs.append(("gpu_memory", gpu_request, quantity.parse_bytes(res.gpu_memory.limit)))
        device_mib = profiles()[spec.hardware].gpu_memory_mib
        if gpu_request > device_mib * 2**20:
            problems.append(
                Problem(
                    file,
                    "resources.gpu_memory.request",
                    f"exceeds the {device_mib}Mi the {spec.hardware} registers: Olares refuses the install",
                    f"use at most {device_mib}Mi (official apps for this card book "
                    f"{profiles()[spec.hardware].booking_mib}Mi) or pick another hardware profile",
                    rule="gpu-memory-device",
                )
            )
    if (
        res.gpu_memory is not None
        and res.gpu_memory.request != res.gpu_memory.limit
        and quantity.parse_bytes(res.gpu_memory.request) != quantity.parse_bytes(res.gpu_memory.limit)
    ):
        problems.append(
            Problem(
                file,
                "resources.gpu_memory.limit",
                "differs from the request: Olares gives the pod exactly the requested GPU memory (its webhook "
                "sets the limit to requiredGPUMemory), so a higher limit is never used and a request above it is "
                "refused",
                f"set the limit to {res.gpu_memory.request}",
                rule="gpu-memory-booking",
            )
        )
    for name, request, limit in pairs:
        if limit < request:
            problems.append(
                Problem(
                    file,
                    f"resources.{name}.limit",
                    "is below the request",
                    "raise it to at least the request",
                    rule="resource-limit",
                )
            )
    return problems


def _env_problems(file: str, spec: AppSpec) -> list[Problem]:
    problems: list[Problem] = []
    for key in spec.engine.env:
        path = f"engine.env.{key}"
        if re.search(r"TOKEN|SECRET|PASSWORD|API_KEY", key) or spec.engine.env[key].startswith("hf_"):
            problems.append(
                Problem(
                    file,
                    path,
                    "a credential typed in clear ends up in the chart and the market",
                    "remove it: the chart passes Olares' Hugging Face token through a Secret",
                    rule="secret-in-clear",
                )
            )
        elif key in CHART_OWNED_ENV:
            problems.append(Problem(file, path, "is set by the chart itself", "remove it", rule="chart-owned-env"))
    for i, arg in enumerate(spec.engine.extra_args):
        if arg.startswith(("--hf-token", "--api-key", "hf_")):
            problems.append(
                Problem(
                    file,
                    f"engine.extra_args[{i}]",
                    "a credential typed in clear ends up in the chart",
                    "remove it: the chart passes Olares' Hugging Face token through a Secret",
                    rule="secret-in-clear",
                )
            )
    return problems


def env_warnings(file: str, spec: AppSpec) -> list[Problem]:
    """Env that loads code or changes the interpreter or the loader: a box may want it (an LD_PRELOAD of
    jemalloc), so a warning; smoke and the sweep never pass it (engines/confine.py)."""
    return [
        Problem(
            file,
            f"engine.env.{key}",
            f"makes the engine's process load code or changes its interpreter or loader: {rule.why} ({rule.source})",
            "remove it unless the image needs it; `olarespack smoke` and the sweep never pass it",
            rule="env-loads-code",
            severity="warning",
        )
        for key in spec.engine.env
        if (rule := code_env(key)) is not None
    ]
