"""The manifest's spec section as oac validates it: validateAppSpec, specResourceCrossFieldRules and the
resource modes of resources.go (ValidateResourceMode, checkLimitGERequired)."""

from __future__ import annotations

from typing import Any, Final

from olarespack.core import quantity
from olarespack.olares.findings import Findings, as_list, as_map, as_text
from olarespack.olares.versions import is_modern

# oac's validResourceModes, gpuMemoryModes and modeArchRequirement (framework/oac/internal/manifest/resources.go
# at beclab/Olares 3a10c81, after PR #3390 of 2026-06-16 "add and rename accelerator modes", which removed amd-apu,
# strix-halo and mthreads-m1000 and added intel, amd, intel-gpu and moore-soc). The older stored list (e0a30de:
# cpu, amd-apu, amd-gpu, apple-m, nvidia, nvidia-gb10, mthreads-m1000) is the one before it: it still validates
# spec.resources, where the newer validates spec.accelerator with ValidateResourceMode(r, templateOnly).
RESOURCE_MODES = frozenset(
    {"cpu", "nvidia", "nvidia-gb10", "apple-m", "intel", "amd", "intel-gpu", "amd-gpu", "moore-soc"}
)
GPU_MEMORY_MODES = frozenset({"nvidia", "amd-gpu", "intel-gpu"})  # discrete GPUs: a GPU memory pool of their own
MODE_ARCH = {
    "nvidia": "amd64",
    "nvidia-gb10": "arm64",
    "apple-m": "arm64",
    "intel": "amd64",
    "amd": "amd64",
    "intel-gpu": "amd64",
    "amd-gpu": "amd64",
    "moore-soc": "arm64",
}
AUTO: Final = "-1"  # AutoResourceValue: resolved from the rendered chart at install (template apps)
FLAT = (
    "requiredCpu",
    "limitedCpu",
    "requiredMemory",
    "limitedMemory",
    "requiredDisk",
    "limitedDisk",
    "requiredGpu",
    "limitedGpu",
)
LEGACY_ENVELOPE = ("requiredCpu", "limitedCpu", "requiredMemory", "limitedMemory", "requiredDisk")
MODE_FIELDS = ("requiredCpu", "limitedCpu", "requiredMemory", "limitedMemory", "requiredDisk", "limitedDisk")
GPU_FIELDS = ("requiredGPUMemory", "limitedGPUMemory")


def _quantity_ok(value: Any, allow_auto: bool, template_only: bool = False, field: str = "") -> bool:
    """oac's resourceQuantityValid: -1 (auto) where accelerator[] entries allow it, or on a template-only app's
    fields but its disk, which must stay explicit."""
    text = as_text(value)
    if text.strip() == AUTO:
        if template_only and field.endswith(("requiredDisk", "limitedDisk")):
            return False
        return allow_auto or template_only
    return bool(quantity.MANIFEST_QUANTITY.match(text))


def _quantity_problem(out: Findings, at: str, value: Any, allow_auto: bool, template_only: bool) -> None:
    """validateResourceQuantity's two messages."""
    if not as_text(value) or _quantity_ok(value, allow_auto, template_only, at):
        return
    if as_text(value).strip() == AUTO and template_only:
        out.add(
            at,
            f"cannot be {AUTO!r} for template-only apps; disk quantities must be explicit",
            "write a quantity like 50Gi",
            "olares-accelerator",
        )
    else:
        out.add(
            at,
            f"must be a valid Kubernetes quantity (got {value!r})",
            "write a quantity like 8Gi",
            "olares-accelerator",
        )


def spec_rules(out: Findings, manifest: dict[str, Any], api: str) -> None:
    """validateAppSpec and specResourceCrossFieldRules."""
    spec = as_map(manifest.get("spec"))
    modern = is_modern(manifest)
    arch = [as_text(a) for a in as_list(spec.get("supportArch"))]
    for i, value in enumerate(arch):
        if value not in ("amd64", "arm64"):
            out.add(
                f"spec.supportArch[{i}]",
                f'entries must be "amd64" or "arm64" (got {value!r})',
                "fix it",
                "olares-support-arch",
            )
        elif value in arch[:i]:
            out.add(f"spec.supportArch[{i}]", f"duplicate value {value!r}", "remove it", "olares-support-arch")
    accelerator = as_list(spec.get("accelerator"))
    template_only = as_map(manifest.get("options")).get("templateOnly") is True
    for name in ("requiredGpu", "limitedGpu"):
        _quantity_problem(out, f"spec.{name}", spec.get(name), False, template_only)
    if api == "v2" and accelerator:
        out.add(
            "spec.accelerator",
            "spec.resources is not supported for apiVersion=v2; use the flat "
            "requiredCpu/limitedCpu/requiredMemory/limitedMemory/requiredDisk fields",
            "use the flat fields",
            "olares-accelerator",
        )
    if modern and as_list(spec.get("supportedGpu")):
        out.add(
            "spec.supportedGpu",
            "must be empty for olaresManifest.version >= 0.12.0",
            "declare GPU memory in spec.accelerator[] with mode nvidia or amd-gpu",
            "olares-accelerator",
        )
    if accelerator:  # Rule 7, at every version
        for name in FLAT:
            if as_text(spec.get(name)):
                out.add(
                    f"spec.{name}",
                    "must be empty when spec.accelerator[] is set",
                    "keep one of the two",
                    "olares-accelerator",
                )
    if modern and api != "v2":
        for i, entry in enumerate(accelerator):
            _resource_mode(out, f"spec.accelerator[{i}]", as_map(entry), arch, template_only)
        if not accelerator:
            for name in MODE_FIELDS:
                _quantity_problem(out, f"spec.{name}", spec.get(name), False, template_only)
            if not any(as_text(spec.get(name)) for name in LEGACY_ENVELOPE):
                out.add(
                    "spec",
                    "either spec.accelerator[] or the flat requiredCpu/limitedCpu/requiredMemory/"
                    "limitedMemory/requiredDisk is required for olaresManifest.version >= 0.12.0",
                    "declare the resources",
                    "olares-accelerator",
                )
        return
    if not modern:  # at apiVersion v2 accelerator[] is already refused above
        _legacy_gpu_memory(out, manifest, accelerator)
    missing = [name for name in LEGACY_ENVELOPE if not as_text(spec.get(name))]
    if missing:
        out.add(
            "spec",
            f"{', '.join(missing)} required for olaresManifest.version < 0.12.0 (and apiVersion v2)",
            "populate the flat resource fields",
            "olares-accelerator",
        )
    for name in (*LEGACY_ENVELOPE, "limitedDisk"):
        _quantity_problem(out, f"spec.{name}", spec.get(name), False, template_only)
    _limits_over_requests(out, "spec", spec, ("Cpu", "Memory", "Disk", "Gpu"))


def _legacy_gpu_memory(out: Findings, manifest: dict[str, Any], accelerator: list[Any]) -> None:
    """Below olaresManifest.version 0.12.0 Olares sizes an app by the flat spec fields:
    oac does not read spec.accelerator[], and app-service books GPU memory from spec.requiredGpu (the legacy
    chart asks nvidia.com/gpu: "1" and sets CUDA_DEVICE_MEMORY_LIMIT_0 itself). GPU memory declared only in
    accelerator[] is then never booked."""
    version = as_text(manifest.get("olaresManifest.version"))
    for i, entry in enumerate(accelerator):
        for name in GPU_FIELDS:
            if as_text(as_map(entry).get(name)):
                out.add(
                    f"spec.accelerator[{i}].{name}",
                    f"olaresManifest.version {version or '(unset)'} reads GPU "
                    "memory from the flat spec.requiredGpu / spec.limitedGpu; spec.accelerator[] is read from "
                    "0.12.0 on, so Olares books none of this GPU memory",
                    "raise olaresManifest.version to 0.12.0, or drop spec.accelerator[] and set spec.requiredGpu "
                    "/ spec.limitedGpu",
                    "gpu-memory-generation",
                    "warning",
                )


def _resource_mode(out: Findings, at: str, entry: dict[str, Any], arch: list[str], template_only: bool) -> None:
    """ValidateResourceMode (resources.go) and the mode -> architecture requirement."""
    mode = as_text(entry.get("mode"))
    if not mode:
        out.add(f"{at}.mode", "mode is required", "set mode: nvidia (or cpu, amd-gpu, ...)", "olares-accelerator")
    elif mode not in RESOURCE_MODES:
        out.add(
            f"{at}.mode",
            f"{mode!r} is not a resource mode oac accepts",
            f"use one of {', '.join(sorted(RESOURCE_MODES))}",
            "olares-accelerator",
        )
    needs = MODE_ARCH.get(mode)
    if needs and needs not in arch:
        out.add(
            "spec.supportArch",
            f"mode={mode} requires spec.supportArch to contain {needs!r}",
            f"add {needs}",
            "olares-accelerator",
        )
    gpu = mode in GPU_MEMORY_MODES
    fields = MODE_FIELDS + (GPU_FIELDS if gpu else ())
    declared = any(as_text(entry.get(name)) for name in (*MODE_FIELDS, *GPU_FIELDS))
    if not declared:
        for name in fields:
            out.add(
                f"{at}.{name}",
                f"is required to declare a complete resource envelope (mode={mode})",
                f"add {name}",
                "olares-accelerator",
            )
    if mode not in RESOURCE_MODES:
        return  # oac's ValidateResourceMode stops at a refused mode: its quantities are not judged
    if declared:
        for name in fields:
            if not as_text(entry.get(name)):
                out.add(
                    f"{at}.{name}",
                    f"is required to declare a complete resource envelope (mode={mode})",
                    f"add {name}",
                    "olares-accelerator",
                )
    if not gpu:
        for name in GPU_FIELDS:
            if as_text(entry.get(name)):
                out.add(
                    f"{at}.{name}",
                    f"must be empty for mode={mode} (oac lets only "
                    f"{' / '.join(f'mode={m}' for m in sorted(GPU_MEMORY_MODES))} declare GPU memory)",
                    "remove it",
                    "olares-accelerator",
                )
    for name in (*MODE_FIELDS, *GPU_FIELDS):
        _quantity_problem(out, f"{at}.{name}", entry.get(name), True, template_only)
    _limits_over_requests(out, at, entry, ("Cpu", "Memory", "Disk", "GPUMemory"))
    if gpu:
        _gpu_limit_unused(out, at, entry)
        _memory_covers_gpu(out, at, entry)
    _multi_flags(out, at, entry)


# ResourceMode's flags (beclab/api manifest/types.go): `supportMultiCards` and `supportMultiNodes`, plural, bool
MULTI_FLAGS = ("supportMultiCards", "supportMultiNodes")


def _multi_flags(out: Findings, at: str, entry: dict[str, Any]) -> None:
    """A flag that is not a bool fails Olares' manifest decoding; the singular spellings some examples write
    (`supportMultiCard`) are not fields Olares reads, so what they say is silently ignored."""
    for name in MULTI_FLAGS:
        if name in entry and not isinstance(entry[name], bool):
            out.add(
                f"{at}.{name}",
                f"must be true or false (got {entry[name]!r}): Olares' manifest type reads a bool there",
                f"write {name}: true or {name}: false",
                "olares-accelerator",
            )
        singular = name[:-1]
        if singular in entry:
            out.add(
                f"{at}.{singular}",
                f"Olares reads {name} (beclab/api manifest ResourceMode), not {singular}: this key is ignored",
                f"rename it {name}",
                "olares-accelerator",
                "warning",
            )


def _below(low: str, high: str) -> bool:
    """Both quantities parse and the first is the smaller; False for unset, -1 (auto) or unparseable (judged
    above)."""
    if "-1" in (low, high):
        return False
    try:
        return quantity.parse_quantity(low) < quantity.parse_quantity(high)
    except ValueError:
        return False


def _gpu_limit_unused(out: Findings, at: str, entry: dict[str, Any]) -> None:
    """olarespack's advice: app-service books requiredGPUMemory and its GPU webhook (addGpuResourceLimits) sets
    the container's limit to it, so a higher limitedGPUMemory is never given. oac accepts it (checkLimitGERequired
    only wants limited >= required) and official charts merged with it (embeddinggemmav3: 2048Mi / 4096Mi): a
    warning here; olarespack's own specs, which it renders, refuse it (gpu-memory-booking)."""
    required, limited = as_text(entry.get("requiredGPUMemory")), as_text(entry.get("limitedGPUMemory"))
    if _below(required, limited):
        out.add(
            f"{at}.limitedGPUMemory",
            f"{limited} is above requiredGPUMemory ({required}): Olares books and "
            f"limits the pod to {required}, so the difference is never given",
            f"set limitedGPUMemory: {required}, or raise requiredGPUMemory to what the app needs",
            "olares-gpu-limit",
            "warning",
        )


def _memory_covers_gpu(out: Findings, at: str, entry: dict[str, Any]) -> None:
    """beclab/Olares #3996 (app-service, merged 2026-08-21): a time-sliced GPU is charged against the node's memory
    with the declared requiredMemory alone, which Olares expects to include the GPU memory (a unified-memory card
    keeps it in host memory); the PR says oac lint keeps requiredMemory inclusive of it, but no stored oac source
    has that check (resources.go compares each pair with itself only): a warning, not an error."""
    memory, gpu = as_text(entry.get("requiredMemory")), as_text(entry.get("requiredGPUMemory"))
    if _below(memory, gpu):
        out.add(
            f"{at}.requiredMemory",
            f"{memory} is below requiredGPUMemory ({gpu}): on a time-sliced GPU Olares "
            "charges the node's memory with requiredMemory alone and expects it to include the GPU memory "
            "(beclab/Olares #3996, which says oac lint will refuse it; the oac sources olarespack follows do "
            "not yet)",
            f"raise requiredMemory (and limitedMemory) to at least {gpu}",
            "olares-memory-covers-gpu",
            "warning",
        )


def _limits_over_requests(out: Findings, at: str, fields: dict[str, Any], kinds: tuple[str, ...]) -> None:
    """checkLimitGERequired: limited* >= required*, compared as quantities; skipped for empty, -1 or unparseable."""
    for kind in kinds:
        required, limited = as_text(fields.get(f"required{kind}")), as_text(fields.get(f"limited{kind}"))
        if not required or not limited or "-1" in (required, limited):
            continue
        try:
            if quantity.parse_quantity(limited) < quantity.parse_quantity(required):
                out.add(
                    f"{at}.limited{kind}",
                    f"limited{kind} ({limited}) must be >= required{kind} ({required})",
                    "raise the limit",
                    "olares-accelerator",
                )
        except ValueError:
            continue
