"""App spec models (the only thing people edit) and load_spec(), which turns a file into an AppSpec or
a list of Problems naming the file, the field path and the fix."""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

import semver
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from olarespack import quantity
from olarespack.errors import Problem, SpecError
from olarespack.hardware import profiles
from olarespack.specfile import load_spec_data
from olarespack.textguard import string_problems

RESERVED_APP_NAMES = frozenset({
    "user", "system", "space", "default", "os", "kubesphere", "kube", "kubekey", "kubernetes", "gpu", "tapr",
    "bfl", "bytetrade", "project", "pod",
})
# Names the rendered chart sets itself; a spec that set them too would silently lose or win.
CHART_OWNED_ENV = frozenset({"HF_HOME", "HF_ENDPOINT", "HF_TOKEN", "CUDA_DEVICE_MEMORY_LIMIT_0"})
# Bounds on what a spec may ask for: far above any real app, low enough that no arithmetic on them
# overflows or takes long (contexts of 16M tokens, 2**63-byte quantities).
MAX_TOKENS = 2**24
MAX_ITEMS = 64


def _semver(text: str) -> str:
    try:
        semver.Version.parse(text)
    except ValueError:
        raise PydanticCustomError(
            "semver", "{text!r} is not a SemVer 2 version like 1.0.5 (no leading 'v')", {"text": text}
        ) from None
    return text


def _quantity(parse: Callable[[str], int], example: str, numbers_too: bool) -> Callable[[object], str]:
    """A validator keeping the spec's own spelling of a quantity once Kubernetes would accept it."""

    def check(value: object) -> str:
        if numbers_too and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise PydanticCustomError("quantity", "write a quantity like {example}", {"example": example})
        try:
            parse(value)
        except ValueError as exc:
            raise PydanticCustomError("quantity", str(exc)) from None
        return value

    return check


def _app_name(text: str) -> str:
    if text in RESERVED_APP_NAMES:
        raise PydanticCustomError("reserved-name", "{text!r} is reserved by Olares", {"text": text})
    return text


def _hardware(text: str) -> str:
    if text not in profiles():
        raise PydanticCustomError(
            "hardware-profile", "unknown hardware profile {text!r}; known: {known}",
            {"text": text, "known": ", ".join(sorted(profiles()))})
    return text


SemVer = Annotated[str, StringConstraints(max_length=128), AfterValidator(_semver)]
# Spec text is bounded per field; control characters, {{ }} and token shapes are refused for every string
# by textguard before the models see the data.
Text = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Description = Annotated[str, StringConstraints(min_length=1, max_length=2_000)]
LongText = Annotated[str, StringConstraints(min_length=1, max_length=50_000)]
Note = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
ArgText = Annotated[str, StringConstraints(max_length=4_096)]
Title = Annotated[str, StringConstraints(min_length=1, max_length=30)]
EntranceTitle = Annotated[str, StringConstraints(min_length=1, max_length=30, pattern=r"^[a-zA-Z0-9 -]+$")]
Url = Annotated[str, StringConstraints(max_length=2_048, pattern=r"^https?://[^\s]+$")]
AppName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]{1,30}$"), AfterValidator(_app_name)]
HfRepo = Annotated[str, StringConstraints(max_length=200,
                                           pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")]
_IMAGE_PATTERN = r"^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$"
Image = Annotated[str, StringConstraints(max_length=512, pattern=_IMAGE_PATTERN)]
EnvName = Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Z_][A-Z0-9_]*$")]
Revision = Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9._/-]+$")]
Tokens = Annotated[int, Field(gt=0, le=MAX_TOKENS)]
LocaleName = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}-[A-Z]{2}$")]
CpuQuantity = Annotated[str, BeforeValidator(_quantity(quantity.parse_cpu, "4, 0.5 or 1500m", numbers_too=True))]
ByteQuantity = Annotated[str, BeforeValidator(_quantity(quantity.parse_bytes, "512Mi or 24Gi", numbers_too=False))]
GithubUser = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,39}$")]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


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
    categories: list[Text] = Field(default_factory=lambda: ["AI"], min_length=1, max_length=10,
                                   description="Market categories.")
    developer: Text = Field(description="Who made the model or the software.")
    submitter: Text = Field(description="Who publishes this app.")
    website: Url | None = Field(None, description="Project or model homepage.")
    source_code: Url | None = Field(None, description="Where the chart's source lives.")
    license: list[License] = Field(min_length=1, max_length=10, description="Licenses of what the app runs.")
    owners: list[GithubUser] = Field(min_length=1, max_length=20,
                                     description="GitHub users written to the chart's owners file.")
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


class Olares(StrictModel):
    generation: Literal["current", "legacy"] = Field(
        "current",
        description="Manifest generation: current = 0.12.0 / apiVersion v3 for Olares >= 1.12.6; "
        "legacy = 0.10.0 / v2 for Olares 1.12.3-1.12.5.",
    )


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
        None, description="GPU memory; defaults to the hardware profile's whole device (its HAMi limit)."
    )


class Speculative(StrictModel):
    method: Literal[
        "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3",
        "extract_hidden_states", "dflash", "ngram_gpu", "mtp",
        "gemma4_mtp", "deepseek_mtp", "qwen3_5_mtp", "qwen3_next_mtp", "mimo_mtp", "glm4_moe_mtp",
        "ernie_mtp", "longcat_flash_mtp",
    ] = Field(description="vLLM speculative method (MTP aliases such as gemma4_mtp are rewritten to mtp).")
    model: HfRepo | None = Field(None, description="Draft model repository (required for MTP, DFlash, EAGLE).")
    num_speculative_tokens: int = Field(gt=0, le=128, description="Tokens drafted per step.")


class Calibration(StrictModel):
    """What vLLM printed at one boot, so fit checks use this app's real non-KV memory."""

    available_kv_cache_gib: float = Field(
        gt=0, le=4096, description="From the boot log line `Available KV cache memory: X GiB`."
    )
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="The utilization of that boot; defaults to engine.gpu_memory_utilization."
    )


KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "bfloat16", "float16"]
AttentionBackend = Literal[
    "triton_attn", "flash_attn", "flashinfer", "flex_attention", "tree_attn", "xformers", "rocm_attn",
    "cpu_attn", "flashmla", "cutlass_mla", "triton_mla",
]


class VllmEngine(StrictModel):
    kind: Literal["vllm"]
    image: Image = Field(description="Container image with a pinned tag, e.g. vllm/vllm-openai:v0.21.0-cu129.")
    version: Annotated[str, StringConstraints(max_length=64,
                                              pattern=r"^[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*$")] | None = Field(
        None, description="vLLM version inside the image (e.g. 0.20.2rc1); needed only when the tag does not say it."
    )
    model: HfRepo = Field(description="Hugging Face repository of the served model.")
    revision: Revision | None = Field(None, description="Model revision (branch, tag or commit).")
    served_model_name: Text = Field(description="Name clients use in the OpenAI API.")
    max_model_len: Tokens | Literal["auto"] = Field(
        description="Context length (--max-model-len), or auto: the largest that fits the GPU, which the "
        "build computes with vLLM's own KV-cache arithmetic."
    )
    gpu_memory_utilization: float = Field(gt=0, le=1, description="Fraction of device memory vLLM may use.")
    kv_cache_dtype: KvCacheDtype = Field("auto", description="--kv-cache-dtype.")
    attention_backend: AttentionBackend | None = Field(None, description="--attention-backend.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field("auto", description="--dtype.")
    trust_remote_code: bool = Field(False, description="--trust-remote-code.")
    max_num_seqs: int | None = Field(None, gt=0, le=65_536, description="--max-num-seqs.")
    max_num_batched_tokens: Tokens | None = Field(None, description="--max-num-batched-tokens.")
    enable_prefix_caching: bool | None = Field(None, description="--enable-prefix-caching / --no-...")
    enable_chunked_prefill: bool | None = Field(None, description="--enable-chunked-prefill / --no-...")
    speculative: Speculative | None = Field(None, description="--speculative-config.")
    limit_mm_per_prompt: dict[Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,32}$")],
                              Annotated[int, Field(ge=0, le=1_000)]] | None = Field(
        None, max_length=8, description="--limit-mm-per-prompt, e.g. {image: 1}."
    )
    tool_call_parser: Text | None = Field(
        None, description="--tool-call-parser; also turns on --enable-auto-tool-choice."
    )
    reasoning_parser: Text | None = Field(None, description="--reasoning-parser.")
    extra_args: list[ArgText] = Field(default_factory=list, max_length=MAX_ITEMS,
                                  description="Further vLLM arguments, passed as given.")
    env: dict[EnvName, ArgText] = Field(default_factory=dict, max_length=MAX_ITEMS,
                                    description="Extra environment of the engine (values are literal: $(VAR) is "
                                    "not expanded).")
    calibration: Calibration | None = Field(
        None, description="One boot's measured KV budget; replaces the estimated non-KV memory in fit checks."
    )

    @property
    def context_length(self) -> int:
        if self.max_model_len == "auto":
            raise ValueError("max_model_len: auto is resolved by the build before it is read")
        return self.max_model_len


class GgufModel(StrictModel):
    repo: HfRepo = Field(description="Hugging Face repository holding the GGUF files.")
    file: Annotated[str, StringConstraints(max_length=200, pattern=r"^[A-Za-z0-9._-]+\.gguf$")] = Field(
        description="Model GGUF file name."
    )
    mmproj: Annotated[str, StringConstraints(max_length=200, pattern=r"^[A-Za-z0-9._-]+\.gguf$")] | None = Field(
        None, description="Multimodal projector GGUF file name."
    )
    revision: Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9._-]+$")] = Field(
        "main", description="Branch, tag or commit to download from."
    )


CacheType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


class LlamaCppEngine(StrictModel):
    kind: Literal["llamacpp"]
    image: Image = Field(description="llama.cpp server image pinned to a build, e.g. ...:server-cuda13-b9101.")
    downloader_image: Image | None = Field(
        None, description="Image of the init container that downloads the GGUF files (needs sh and curl); "
        "default: the engine image, whose official builds carry curl.")
    model: GgufModel
    alias: Text = Field(description="--alias: the model name clients use.")
    ctx_size: Tokens = Field(description="-c / --ctx-size.")
    n_gpu_layers: int = Field(99, ge=0, le=10_000, description="-ngl / --n-gpu-layers.")
    flash_attn: Literal["on", "off", "auto"] = Field("auto", description="-fa.")
    cache_type_k: CacheType | None = Field(None, description="-ctk.")
    cache_type_v: CacheType | None = Field(None, description="-ctv (a quantized V cache needs flash_attn on).")
    batch_size: Tokens | None = Field(None, description="-b / --batch-size.")
    ubatch_size: Tokens | None = Field(None, description="-ub / --ubatch-size.")
    parallel: int | None = Field(None, gt=0, le=1_024, description="--parallel.")
    threads: int | None = Field(None, gt=0, le=1_024, description="--threads.")
    jinja: bool = Field(False, description="--jinja (use the model's chat template).")
    mlock: bool = Field(False, description="--mlock.")
    context_shift: bool | None = Field(None, description="false renders --no-context-shift.")
    extra_args: list[ArgText] = Field(default_factory=list, max_length=MAX_ITEMS,
                                  description="Further llama-server arguments.")
    env: dict[EnvName, ArgText] = Field(default_factory=dict, max_length=MAX_ITEMS,
                                    description="Extra environment of the engine (values are literal: $(VAR) is "
                                    "not expanded).")


Engine = Annotated[Union[VllmEngine, LlamaCppEngine], Field(discriminator="kind")]  # noqa: UP007


class ChangelogEntry(StrictModel):
    version: SemVer
    date: dt.date | None = Field(None, description="Release date (YYYY-MM-DD).")
    note: Note = Field(description="What changed, as published in upgradeDescription.")


class AppSpec(StrictModel):
    """One Olares app: what it runs, on which GPU, how it is presented and its release history."""

    name: AppName = Field(description="App name = chart folder = Deployment name; [a-z0-9]{1,30}.")
    version: SemVer = Field(description="Chart and manifest version; equal to the newest changelog entry.")
    hardware: Annotated[str, AfterValidator(_hardware)] = Field(
        "rtx5090-laptop", description="Target GPU profile (device facts such as the HAMi memory limit)."
    )
    olares: Olares = Field(default_factory=lambda: Olares())
    metadata: Metadata
    entrance: Entrance = Field(default_factory=lambda: Entrance())
    engine: Engine
    resources: Resources
    startup_timeout_minutes: int = Field(
        45, gt=30, le=240, description="Startup probe budget; a first boot downloads the model (> 30 min)."
    )
    changelog: list[ChangelogEntry] = Field(min_length=1, max_length=1_000,
                                            description="One entry per release, newest first.")


# --------------------------------------------------------------------------- loading


def load_spec(path: Path) -> AppSpec:
    """Read and validate one spec file; raises SpecError with every problem found."""
    shown = str(path)
    data = load_spec_data(path)
    if not isinstance(data, dict):
        raise SpecError([Problem(shown, "", "the spec must be a YAML mapping", "start from apps/*.yaml", rule="yaml")])
    guarded = [Problem(shown, where, message, fix, rule=rule)
               for where, message, fix, rule in string_problems(data)]
    try:
        spec = AppSpec.model_validate(data)
    except ValidationError as exc:
        found = _merge_union_problems([_problem(shown, err) for err in exc.errors()])
        raise SpecError(guarded + [p for p in found if p.path not in {g.path for g in guarded}]) from None
    problems = guarded + cross_field_problems(shown, spec)
    if problems:
        # one finding per field and rule: a token in an env value trips both the generic and the env check
        raise SpecError(list({(p.path, p.rule): p for p in problems}.values()))
    return spec


_UNION_MEMBER_TAGS = ("function-", "constrained-", "literal[", "lax-", "json-or-python")


def _loc_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        if loc[:i] == ("engine",) and item in ("vllm", "llamacpp"):
            continue  # the discriminator tag pydantic adds for the union branch
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item.startswith(_UNION_MEMBER_TAGS) or item in ("str", "int", "float", "bool"):
            continue  # which member of a union pydantic tried: not a field the user wrote
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts)


_FIXES = {
    "missing": "add the field",
    "int_type": "write a whole number without quotes",
    "int_from_float": "write a whole number",
    "float_type": "write a number without quotes",
    "bool_type": "write true or false",
    "string_type": "write text (quote it if YAML reads it as a number, date or boolean)",
    "dict_type": "write a mapping (key: value lines)",
    "list_type": "write a list (- item lines)",
    "literal_error": "use one of the values listed",
    "union_tag_invalid": "set engine.kind to vllm or llamacpp",
    "union_tag_not_found": "add engine.kind: vllm or llamacpp",
    "semver": "write MAJOR.MINOR.PATCH, e.g. 1.0.5",
    "reserved-name": "choose another name",
    "hardware-profile": "use one of the known profiles",
    "quantity": "write a Kubernetes quantity",
}


def _merge_union_problems(problems: list[Problem]) -> list[Problem]:
    """A value that matches no member of a union (a number or auto) is one problem, not one per member."""
    by_path: dict[str, list[Problem]] = {}
    for problem in problems:
        by_path.setdefault(problem.path, []).append(problem)
    merged = []
    for group in by_path.values():
        first = group[0]
        if len(group) > 1:
            messages = " or ".join(dict.fromkeys(p.message.removeprefix("Input should be ") for p in group))
            first = Problem(first.file, first.path, f"Input should be {messages}", first.fix, rule=first.rule)
        merged.append(first)
    return merged


def _rule_for(kind: str) -> str:
    """Rule id of a schema error: the model's own checks name themselves, pydantic's are grouped."""
    if kind in ("semver", "reserved-name", "hardware-profile", "quantity"):
        return kind
    if kind == "extra_forbidden":
        return "spec-unknown-key"
    if kind == "missing":
        return "spec-missing"
    if kind.startswith(("greater_than", "less_than")):
        return "spec-range"
    if kind.startswith("string_") or kind in ("too_short", "too_long"):
        return "spec-format"
    if kind.startswith(("literal", "union_tag")):
        return "spec-choice"
    return "spec-type"


def _problem(file: str, err: Any) -> Problem:
    loc = tuple(err["loc"])
    path = _loc_path(loc)
    kind = err["type"]
    message = str(err["msg"]).removeprefix("Value error, ")
    fix = _FIXES.get(kind, "see schemas/app-spec.schema.json")
    if kind == "missing":
        fix = f"add `{path.rsplit('.', 1)[-1]}`"
    elif kind == "extra_forbidden":
        message = "unknown key"
        fix = _unknown_key_fix(loc)
    elif kind.startswith(("greater_than", "less_than")):
        fix = "use a value in the allowed range"
    elif kind.startswith("string_"):
        fix = "change the value to match the rule above"
    return Problem(file, path, message, fix, rule=_rule_for(kind))


def _unknown_key_fix(loc: tuple[int | str, ...]) -> str:
    allowed = _fields_at(AppSpec, [p for p in loc[:-1] if p not in ("vllm", "llamacpp")], loc)
    key = str(loc[-1])
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"did you mean `{close[0]}`?"
    return f"remove it; allowed keys: {', '.join(sorted(allowed))}" if allowed else "remove it"


def _fields_at(model: type[BaseModel], parts: list[int | str], loc: tuple[int | str, ...]) -> list[str]:
    """Names a mapping accepts at a location, for 'did you mean' hints."""
    current: Any = model
    for part in parts:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            current = _inner_model(current)
            if isinstance(part, int):
                continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return []
        annotation = current.model_fields[part].annotation
        if part == "engine" and current is AppSpec:
            current = LlamaCppEngine if "llamacpp" in loc else VllmEngine
        else:
            current = _inner_model(annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------------- cross-field rules


def cross_field_problems(file: str, spec: AppSpec) -> list[Problem]:
    """Rules that involve more than one field; each names the field to change."""
    problems: list[Problem] = []
    problems += _changelog_problems(file, spec)
    problems += _resource_problems(file, spec)
    problems += _env_problems(file, spec)
    if spec.entrance.title is None and not re.fullmatch(r"[a-zA-Z0-9 -]+", spec.metadata.title):
        problems.append(Problem(
            file, "metadata.title", "is also the entrance title, where Olares before 1.12.6 refuses anything but "
            "letters, digits, spaces and dashes", "set entrance.title, or drop the dots and brackets",
            rule="entrance-title"))
    if spec.metadata.default_locale in spec.metadata.locales:
        problems.append(Problem(
            file, f"metadata.locales.{spec.metadata.default_locale}",
            "duplicates the default-locale texts", "remove it or change metadata.default_locale",
            rule="locale-duplicate"))
    return problems


def _changelog_problems(file: str, spec: AppSpec) -> list[Problem]:
    problems: list[Problem] = []
    versions = [semver.Version.parse(e.version) for e in spec.changelog]
    if spec.changelog[0].version != spec.version:
        problems.append(Problem(
            file, "changelog[0].version",
            f"the newest changelog entry is {spec.changelog[0].version} but version is {spec.version}",
            f"add a changelog entry for {spec.version} at the top (or run olarespack bump)",
            rule="changelog-version"))
    for i in range(1, len(versions)):
        if versions[i] >= versions[i - 1]:
            problems.append(Problem(
                file, f"changelog[{i}].version",
                f"{versions[i]} is not older than the entry above it ({versions[i - 1]})",
                "list entries newest first, one per version", rule="changelog-order"))
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
        gpu_request = quantity.parse_bytes(res.gpu_memory.request)
        gpu_limit = quantity.parse_bytes(res.gpu_memory.limit)
        pairs.append(("gpu_memory", gpu_request, gpu_limit))
        device = profiles()[spec.hardware].hami_limit_mib * 2**20
        if gpu_limit > device:
            problems.append(Problem(
                file, "resources.gpu_memory.limit",
                f"exceeds the {spec.hardware} device limit of {profiles()[spec.hardware].hami_limit_mib}Mi",
                f"use at most {profiles()[spec.hardware].hami_limit_mib}Mi or pick another hardware profile",
                rule="gpu-memory-device"))
    for name, request, limit in pairs:
        if limit < request:
            problems.append(Problem(
                file, f"resources.{name}.limit", "is below the request", "raise it to at least the request",
                rule="resource-limit"))
    return problems


def _env_problems(file: str, spec: AppSpec) -> list[Problem]:
    problems: list[Problem] = []
    for key in spec.engine.env:
        path = f"engine.env.{key}"
        if re.search(r"TOKEN|SECRET|PASSWORD|API_KEY", key) or spec.engine.env[key].startswith("hf_"):
            problems.append(Problem(
                file, path, "a credential typed in clear ends up in the chart and the market",
                "remove it: the chart passes Olares' Hugging Face token through a Secret", rule="secret-in-clear"))
        elif key in CHART_OWNED_ENV:
            problems.append(Problem(file, path, "is set by the chart itself", "remove it", rule="chart-owned-env"))
    for i, arg in enumerate(spec.engine.extra_args):
        if arg.startswith(("--hf-token", "--api-key", "hf_")):
            problems.append(Problem(
                file, f"engine.extra_args[{i}]", "a credential typed in clear ends up in the chart",
                "remove it: the chart passes Olares' Hugging Face token through a Secret", rule="secret-in-clear"))
    return problems
