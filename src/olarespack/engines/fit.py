"""What a fit is asked and what it answers: where an app's GPU memory goes and whether its context fits
(pure). Each engine computes it (its package's fit.py); fit/budget.py asks and checks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from olarespack.core.units import gib
from olarespack.models.arch import ModelInfo

Source = Literal["estimate", "calibrated", "given"]


@dataclass(frozen=True)
class FitRequest:
    """What one fit is asked, checked by fit_report before an engine sees it: the GPU memory the engine sees
    (`total`), overrides of the spec's context and utilization, a KV budget to take as given, or one boot's
    measurement (the `Available KV cache memory` at a utilization, on a GPU of `calibrated_total_bytes`), and
    model data replacing the shipped one (keyed by repository); the app's name and hardware profile."""

    total: int
    app: str = ""
    hardware: str = ""
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_available_bytes: int | None = None
    calibrated_kv_available_bytes: int | None = None
    calibrated_at_utilization: float | None = None
    calibrated_total_bytes: int | None = None
    registry: dict[str, ModelInfo] | None = None


@dataclass(frozen=True)
class FitReport:
    """Where the GPU memory of one app goes, and whether its context fits. Bytes unless named otherwise."""

    app: str
    engine: str  # the engine's kind
    engine_title: str  # as people write it
    model: str
    drafter: str | None
    total_bytes: int  # device memory the engine sees (the app's GPU memory limit)
    gpu_memory_utilization: float | None  # vLLM only
    budget_bytes: int  # ceil(total x utilization) for vLLM, the whole limit for llama.cpp
    weights_bytes: int  # on the GPU
    drafter_weights_bytes: int
    overhead_bytes: int  # activations / compute buffers, CUDA graphs and runtime
    overhead_source: Source
    kv_cache_needed_bytes: int  # at max_model_len, drafter KV included
    drafter_kv_bytes: int
    kv_cache_available_bytes: int
    headroom_bytes: int  # available - needed
    max_model_len: int  # asked (vLLM max_model_len, llama.cpp ctx_size)
    max_model_len_fit: int  # asked when it fits, else the largest that does (vLLM's estimate); 0 if none
    max_model_len_limit: int  # the largest that fits up to the model's native maximum (or the asked length)
    concurrency: float  # requests of max_model_len_fit tokens the cache holds at once
    fits: bool
    utilization_needed: float | None  # vLLM: gpu_memory_utilization for the asked context; llama.cpp: share
    kv_cache_dtype: str
    weights_exact: bool
    settings: dict[str, int | bool | str] = field(default_factory=dict)  # engine values the arithmetic used
    notes: tuple[str, ...] = ()
    memory_fraction: str | None = None  # the engine's spec field for gpu_memory_utilization, where it has one
    # host memory the engine's process holds beyond its code (llama.cpp: the input embeddings it maps and its
    # pinned compute buffer), where the engine's arithmetic knows it; the container's memory must hold it
    host_memory_bytes: int | None = None
    # when the asked context does not fit: (why, the spec change that keeps it) from the engine's own settings
    context_fixes: tuple[tuple[str, str], ...] = ()
    # a KV cache of fixed size (vLLM's kv_cache_memory_bytes) with the rest of the engine's memory, beyond the
    # memory it sees (0: within it): the engine would run out of memory at start-up, whatever the context
    over_total_bytes: int = 0

    @property
    def total_needed_bytes(self) -> int:
        return self.weights_bytes + self.drafter_weights_bytes + self.overhead_bytes + self.kv_cache_needed_bytes

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["engine_title"], data["memory_fraction"], data["context_fixes"]
        data["notes"] = list(self.notes)
        data["total_needed_bytes"] = self.total_needed_bytes
        return data

    def table(self) -> list[str]:
        """The budget as lines of text (GiB), for a person."""
        drafter = f" + drafter {self.drafter}" if self.drafter else ""
        title = f"{self.app}: {self.engine_title}, {self.model}{drafter}"
        rows: list[tuple[str, int, str]] = [("GPU memory limit", self.total_bytes, "")]
        if self.gpu_memory_utilization is not None:
            rows.append((f"x {self.memory_fraction} {self.gpu_memory_utilization:g}", self.budget_bytes, ""))
        rows.append(("- weights", self.weights_bytes, "file sizes" if self.weights_exact else "estimate"))
        if self.drafter:
            rows.append(("- drafter weights", self.drafter_weights_bytes, "estimate"))
        rows += [
            ("- activations, CUDA graphs, runtime", self.overhead_bytes, self.overhead_source),
            ("= KV cache available", self.kv_cache_available_bytes, ""),
            (
                f"KV cache needed at {self.max_model_len} tokens",
                self.kv_cache_needed_bytes,
                f"drafter {gib(self.drafter_kv_bytes):.2f} GiB" if self.drafter_kv_bytes else "",
            ),
            ("headroom", self.headroom_bytes, ""),
            ("total needed", self.total_needed_bytes, ""),
        ]
        width = max(len(label) for label, _, _ in rows)
        lines = [title]
        for label, value, note in rows:
            lines.append(f"  {label:<{width}}  {gib(value):8.2f} GiB" + (f"  ({note})" if note else ""))
        verdict = "fits" if self.fits else "DOES NOT FIT"
        lines.append(
            f"  {verdict}: largest context {self.max_model_len_fit} of {self.max_model_len} asked, "
            f"{self.max_model_len_limit} up to the model's limit; "
            f"{self.concurrency:.2f} requests at once of {self.max_model_len_fit} tokens"
        )
        if self.utilization_needed is not None:
            what = self.memory_fraction if self.gpu_memory_utilization is not None else "share of the GPU limit"
            lines.append(f"  needs {what} >= {self.utilization_needed:.2f}")
        if self.host_memory_bytes is not None:
            lines.append(
                f"  host memory: {gib(self.host_memory_bytes):.2f} GiB held by the engine "
                "(resources.memory must hold it)"
            )
        lines += [f"  note: {note}" for note in self.notes]
        return lines
