"""The app spec: what one Olares app runs, on which GPU, how it is presented and its release history
(the only thing people edit). Each engine's own model lives with the engine (engines/)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from olarespack.core import quantity
from olarespack.core.hardware import profiles
from olarespack.core.types import (
    ByteQuantity,
    CpuQuantity,
    Description,
    EntranceTitle,
    GithubUser,
    HardwareName,
    Image,
    LocaleName,
    LongText,
    Note,
    SemVer,
    StrictModel,
    Text,
    Title,
    Url,
)
from olarespack.engines import EngineModel
from olarespack.olares.generations import GENERATION_NAMES, RESERVED_APP_NAMES, GenerationName


def _app_name(text: str) -> str:
    if text in RESERVED_APP_NAMES:
        raise PydanticCustomError("reserved-name", "{text!r} is reserved by Olares", {"text": text})
    return text


AppName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]{1,30}$"), AfterValidator(_app_name)]


class License(StrictModel):
    text: Text = Field(description="License name as shown in the market, e.g. 'Apache 2.0'.")
    url: Url = Field(description="Link to the license text.")


class LocaleText(StrictModel):
    """Translated texts for one locale; anything left out falls back to the default-locale text."""

    title: Title | None = Field(None, description="Translated market title (1-30 characters).")
    description: Description | None = Field(None, description="Translated one-line description.")
    full_description: LongText | None = Field(
        None, description="Translated long description; may cite spec values as [[ engine.max_model_len ]]."
    )


class Metadata(StrictModel):
    title: Title = Field(description="Market title, 1-30 characters.")
    description: Description = Field(description="One-line description; may cite spec values as [[ ... ]].")
    full_description: LongText = Field(
        description="Long description (Markdown). May cite spec values as [[ engine.max_model_len ]] so "
        "the text cannot drift from the configuration; a preset-configuration section is appended."
    )
    icon: Url = Field(description="http(s) URL of the app icon.")
    categories: list[Text] = Field(
        default_factory=lambda: ["AI"], min_length=1, max_length=10, description="Market categories."
    )
    developer: Text = Field(description="Who made the model or the software.")
    submitter: Text = Field(description="Who publishes this app.")
    website: Url | None = Field(None, description="Project or model homepage.")
    source_code: Url | None = Field(None, description="Where the chart's source lives.")
    license: list[License] = Field(min_length=1, max_length=10, description="Licenses of what the app runs.")
    owners: list[GithubUser] = Field(
        min_length=1, max_length=20, description="GitHub users written to the chart's owners file."
    )
    default_locale: LocaleName = Field("en-US", description="Locale of the texts above.")
    locales: dict[LocaleName, LocaleText] = Field(
        default_factory=dict, max_length=32, description="Translations, keyed by locale (e.g. fr-FR)."
    )


class Entrance(StrictModel):
    title: EntranceTitle | None = Field(
        None, description="Entrance title (letters, digits, spaces, dashes); defaults to metadata.title."
    )
    auth_level: Literal["public", "private", "internal"] = Field("internal", description="Olares authLevel.")
    open_method: Literal["default", "iframe", "window"] = Field("window", description="Olares openMethod.")


class PinnedModel(StrictModel):
    """The shape of Olares' official LLM apps: the engine beside the Model Console (beclab/llm-init), which
    downloads the model into the shared Hugging Face cache, shows its progress and serves the OpenAI API at
    the app's shared entrance, where Olares' LLM gateway (Router) calls it."""

    console_image: Image = Field(
        "docker.io/beclab/llm-init:v1.3.1", description="The Model Console's image, pinned by tag or digest."
    )
    mode: Literal["chat", "embedding"] = Field("chat", description="MODEL_MODE: what the model serves.")
    supports: list[Literal["vision", "tools", "thinking"]] = Field(
        default_factory=list,
        max_length=3,
        description="MODEL_SUPPORTS: the capabilities Router lists for the model (none: an empty list).",
    )
    tag: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,31}$")] | None = Field(
        None,
        description="llama.cpp: the quantization tag of MODEL_NAME (<repo>:<tag>), which llama-server finds "
        "the model file by; default the last dash-separated part of engine.model.file (Q4_K_M).",
    )


class Olares(StrictModel):
    generation: Literal["current", "legacy"] = Field(
        "current",
        description="Manifest generation: current = 0.12.0 / apiVersion v3 for Olares >= 1.12.6; "
        "legacy = 0.10.0 / v2 for Olares 1.12.3-1.12.5.",
    )
    pinned_model: PinnedModel | None = Field(
        None,
        description="Render the official pinned-model shape (a shared app: the engine, the Model Console, "
        "a shared entrance Router calls, the MODEL_* and ENGINE_ARGS envs); current generation only. Without it "
        "the chart is the seed's single Deployment.",
    )
    llm_gateway: bool | None = Field(
        None,
        description="Whether the Market lists the app among the models of Olares' LLM gateway, Router "
        "(options.LLMGatewaySupported, in the current generation's manifest; the legacy one has no such field). "
        "Router calls an app through a shared entrance, which only the pinned-model shape has: on by default "
        "there, refused elsewhere (Router would list the app and fail every call).",
    )

    def gateway(self) -> bool:
        """Whether the manifest lists the app in Router."""
        return self.pinned_model is not None if self.llm_gateway is None else self.llm_gateway


class CpuRange(StrictModel):
    request: CpuQuantity = Field(description="CPU request of the engine container, e.g. 4 or 1500m.")
    limit: CpuQuantity = Field(description="CPU limit of the engine container.")


class ByteRange(StrictModel):
    request: ByteQuantity = Field(description="Requested amount, e.g. 24Gi.")
    limit: ByteQuantity = Field(description="Limit, e.g. 40Gi.")


class Resources(StrictModel):
    cpu: CpuRange
    memory: ByteRange = Field(description="Host memory of the engine container.")
    disk: ByteRange = Field(description="Disk the app needs (model files included).")
    gpu_memory: ByteRange | None = Field(
        None,
        description="GPU memory the app books (request = limit); defaults to the hardware profile's "
        "booking (23Gi on the RTX 5090 Laptop).",
    )


Rate = Annotated[float, Field(gt=0, le=1_000_000)]  # tokens per second


class BenchRecord(StrictModel):
    """One measurement of the app's speed, written by `olarespack bench run --record` into the changelog entry of
    the version it measured; descriptions cite it as [[ bench.tps_avg ]]. What it was measured on is kept with
    it, down to a hash of the settings that change speed, so a later change of one marks the figures stale."""

    tps_avg: Rate = Field(description="Average tokens per second over the measured runs.")
    tps_peak: Rate = Field(description="The fastest run's tokens per second.")
    tps_min: Rate = Field(description="The slowest run's tokens per second.")
    tps_sigma: float = Field(ge=0, le=1_000_000, description="Sample standard deviation of the runs' rates.")
    tps_source: Literal["server", "stream", "request"] = Field(
        description="How a run's rate was taken: server = the server's own decode timing (llama.cpp's "
        "timings.predicted_per_second); stream = (completion tokens - 1) / first to last streamed token (vLLM "
        "bench's 1/TPOT); request = completion tokens / the whole request."
    )
    series: list[Rate] = Field(min_length=1, max_length=1_000, description="Each measured run's rate, in order.")
    runs: int = Field(ge=1, le=1_000, description="Measured runs (after the warm-ups).")
    warmups: int = Field(ge=0, le=100, description="Warm-up requests sent first and not counted.")
    tokens: int = Field(gt=0, le=1_000_000, description="max_tokens of every request.")
    prompt: Text = Field(description="The prompt's name (space-invaders: the one shipped with olarespack).")
    temperature: float = Field(ge=0, le=2, description="Sampling temperature of the requests.")
    top_p: float = Field(gt=0, le=1, description="top_p of the requests.")
    ttft_ms: float | None = Field(
        None, ge=0, le=3_600_000, description="Average time to the first generated token, when streamed."
    )
    acceptance: float | None = Field(
        None, ge=0, le=100, description="Percent of the drafted tokens the target accepted."
    )
    drafted: int | None = Field(None, ge=0, le=2**53, description="Draft tokens over the measured runs.")
    accepted: int | None = Field(None, ge=0, le=2**53, description="Accepted draft tokens over the measured runs.")
    engine_release: Text | None = Field(None, description="The engine release inside the image (e.g. 0.21.0, b9101).")
    hardware: HardwareName = Field(description="The hardware profile it ran on.")
    context: int = Field(gt=0, le=2**24, description="The context length the server ran with.")
    settings_hash: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")] = Field(
        description="Hash of the settings that change speed (engine image and release, model files, drafting, "
        "context, batching, cache and attention types, hardware); another value now marks the figures stale."
    )
    date: dt.date = Field(description="The day it was measured.")
    uneven: bool | None = Field(
        None,
        description="True when the slowest run was below half the median: the runs "
        "did not measure one steady state, and the average mixes two.",
    )
    gpu_mode: Literal["exclusive", "memory-slicing", "time-slicing"] | None = Field(
        None, description="The GPU mode the app ran in (Olares' GPU settings); a time-sliced figure is marked so."
    )
    slow_runs: list[Annotated[int, Field(ge=1, le=1_000)]] | None = Field(
        None, max_length=1_000, description="The runs of a slow phase (consecutive runs far below the median)."
    )
    slow_phase: Text | None = Field(
        None,
        description='What the slow phase was, as bench said it ("runs 6-9 at 27% '
        'of the median, acceptance 4% against 86%: speculative decoding fell back").',
    )

    @model_validator(mode="after")
    def _consistent(self) -> BenchRecord:
        if not self.tps_min <= self.tps_avg <= self.tps_peak:
            raise PydanticCustomError(
                "less_than_equal",
                "tps_min <= tps_avg <= tps_peak must hold ({min} {avg} {peak})",
                {"min": self.tps_min, "avg": self.tps_avg, "peak": self.tps_peak},
            )
        if len(self.series) != self.runs:
            raise PydanticCustomError(
                "less_than_equal",
                "series has {count} rates for {runs} runs",
                {"count": len(self.series), "runs": self.runs},
            )
        if self.drafted is not None and self.accepted is not None and self.accepted > self.drafted:
            raise PydanticCustomError(
                "less_than_equal",
                "accepted ({accepted}) is more than drafted ({drafted})",
                {"accepted": self.accepted, "drafted": self.drafted},
            )
        return self


SweepValue = Annotated[bool | int | float | Text, Field(union_mode="left_to_right")]


class SweepPoint(StrictModel):
    value: SweepValue = Field(description="The value the engine was restarted with.")
    tps_avg: Rate | None = Field(None, description="Average tokens per second of its runs.")
    tps_min: Rate | None = Field(None, description="Its slowest run.")
    tps_peak: Rate | None = Field(None, description="Its fastest run.")
    steady_avg: Rate | None = Field(None, description="Average without the runs of a slow phase.")
    acceptance: float | None = Field(None, ge=0, le=100, description="Speculative acceptance over its runs (%).")
    slow_runs: list[Annotated[int, Field(ge=1, le=1_000)]] | None = Field(None, description="Its slow phase's runs.")
    refused: Text | None = Field(None, description="Why it was not measured (the engine refused the value).")


class SweepRecord(StrictModel):
    """A sweep of one setting (`olarespack bench sweep SPEC FIELD=V1,V2 --write`): the engine restarted with each
    value and benched, the value chosen by the criterion written into the spec, and this kept with the entry."""

    field: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*){0,7}$")] = Field(
        description="The spec field swept (a dotted path, e.g. engine.speculative.num_speculative_tokens)."
    )
    criterion: Literal["average", "steady"] = Field(
        description="average: the highest average; steady: the highest average without slow runs."
    )
    chosen: SweepValue = Field(description="The value written into the spec.")
    points: list[SweepPoint] = Field(min_length=2, max_length=20, description="Each value's figures, in order.")
    runs: int = Field(ge=1, le=1_000, description="Measured runs per value.")
    tokens: int = Field(gt=0, le=1_000_000, description="max_tokens of every request.")
    prompt: Text = Field(description="The prompt's name.")
    where: Text = Field(description="The engine build it ran on (a CPU build here, or the box's).")
    gpu_mode: Literal["exclusive", "memory-slicing", "time-slicing"] | None = Field(
        None, description="The GPU mode the box's app ran in (read from the pod, or --gpu-mode)."
    )
    date: dt.date = Field(description="The day it was measured.")


class ChangelogEntry(StrictModel):
    version: SemVer
    date: dt.date | None = Field(None, description="Release date (YYYY-MM-DD).")
    note: Note = Field(description="What changed, as published in upgradeDescription.")
    bench: BenchRecord | None = Field(
        None,
        description="The speed measured on this version (`olarespack bench run --record`); the newest entry "
        "that has one is what descriptions cite as [[ bench.tps_avg ]].",
    )
    sweep: SweepRecord | None = Field(None, description="The sweep that chose a setting of this version.")


class AppSpec(StrictModel):
    """One Olares app: what it runs, on which GPU, how it is presented and its release history."""

    name: AppName = Field(description="App name = chart folder = Deployment name; [a-z0-9]{1,30}.")
    version: SemVer = Field(description="Chart and manifest version; equal to the newest changelog entry.")
    hardware: HardwareName = Field(
        "rtx5090-laptop", description="Target GPU profile (device facts such as the HAMi memory limit)."
    )
    olares: Olares = Field(default_factory=lambda: Olares())
    metadata: Metadata
    entrance: Entrance = Field(default_factory=lambda: Entrance())
    engine: EngineModel
    resources: Resources
    startup_timeout_minutes: int = Field(
        45, gt=30, le=240, description="Startup probe budget; a first boot downloads the model (> 30 min)."
    )
    changelog: list[ChangelogEntry] = Field(
        min_length=1, max_length=1_000, description="One entry per release, newest first."
    )

    def offered_generations(self) -> tuple[GenerationName, ...]:
        """The manifest generations the market publishes the app in: a pinned-model app is a shared app, which
        only the current generation's manifest (apiVersion v3) can say."""
        return ("current",) if self.olares.pinned_model is not None else GENERATION_NAMES

    def gpu_memory(self) -> int:
        """The GPU memory the app books, in bytes: the spec's request (its limit must equal it), or the hardware
        profile's default booking. Olares gives the pod exactly this (requests = limits = requiredGPUMemory),
        and the engine sees it as the device. The one place this amount is computed."""
        if self.resources.gpu_memory is not None:
            return quantity.parse_bytes(self.resources.gpu_memory.request)
        return profiles()[self.hardware].booking_mib * 2**20
