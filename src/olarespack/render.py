"""Spec -> RenderedChart (a mapping of chart-relative path -> text), in memory and without I/O.

All Jinja goes through make_env(): delimiters that cannot collide with Helm's {{ }}, StrictUndefined,
and a check that no Jinja marker survives. What the templates print is computed here once (the plan),
so a number typed once in the spec reaches args, manifest, descriptions and resource sums.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jinja2
import semver

from olarespack import citations, engines, quantity
from olarespack.errors import Problem, RenderError, UsageError
from olarespack.hardware import HardwareProfile, profiles
from olarespack.spec import AppSpec, LlamaCppEngine, VllmEngine

GenerationName = Literal["current", "legacy"]
_MARKERS = re.compile(r"\[\[|\]\]|\[%|%\]|\[#|#\]")


@dataclass(frozen=True)
class Generation:
    """What differs between the two Olares manifest generations."""

    name: GenerationName
    manifest_version: str
    api_version: str
    olares_dependency: str
    hf_endpoint_env: str  # envName in the manifest = key under .Values.olaresEnv
    hf_endpoint_source: str  # the Olares system/user env it is filled from
    hf_token_env: str
    hf_token_source: str


GENERATIONS: dict[GenerationName, Generation] = {
    "current": Generation(
        "current", "0.12.0", "v3", ">=1.12.6-0",
        "HF_ENDPOINT", "OLARES_SYSTEM_HUGGINGFACE_SERVICE", "HF_TOKEN", "OLARES_SYSTEM_HUGGINGFACE_TOKEN",
    ),
    "legacy": Generation(
        "legacy", "0.10.0", "v2", ">=1.12.3-0",
        "OLARES_USER_HUGGINGFACE_SERVICE", "OLARES_USER_HUGGINGFACE_SERVICE",
        "OLARES_USER_HUGGINGFACE_TOKEN", "OLARES_USER_HUGGINGFACE_TOKEN",
    ),
}


def generation_for_olares(version: str) -> GenerationName:
    """The manifest generation an Olares release installs: 1.12.3-1.12.5 legacy, 1.12.6 and later current."""
    try:
        parsed = semver.Version.parse(version, optional_minor_and_patch=True)
    except ValueError:
        raise UsageError(f"--olares-version: {version!r} is not a version like 1.12.5") from None
    if parsed < semver.Version(1, 12, 3):
        raise UsageError(f"--olares-version: Olares {version} predates both manifest generations (>= 1.12.3)")
    return "legacy" if parsed < semver.Version(1, 12, 6) else "current"


@dataclass(frozen=True)
class ContainerResources:
    name: str
    cpu_request: int  # millicores
    cpu_limit: int
    memory_request: int  # bytes
    memory_limit: int


DOWNLOADER = ContainerResources("model-downloader", 100, 1000, 128 * 2**20, 512 * 2**20)


@dataclass(frozen=True)
class Plan:
    """Everything the templates print, computed once from the spec."""

    spec: AppSpec
    generation: Generation
    hardware: HardwareProfile
    engine_kind: str
    engine_version: str | None
    container_name: str
    command: list[str]
    args: list[str]
    effective_args: list[str]
    port: int
    containers: list[ContainerResources]
    init_containers: list[ContainerResources]
    gpu_memory_request: int
    gpu_memory_limit: int
    startup_failure_threshold: int
    startup_period_seconds: int
    engine_env: list[tuple[str, str]]  # beyond HF_*: the legacy HAMi limit, then the spec's env, sorted
    texts: dict[str, dict[str, str]]  # locale -> title, description, full_description, upgrade_description
    locales: list[str]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sums(self) -> dict[str, int]:
        """What the pod needs as Kubernetes counts it; the manifest declares exactly this."""
        return {key: quantity.pod_effective([getattr(c, key) for c in self.containers],
                                            [getattr(c, key) for c in self.init_containers])
                for key in ("cpu_request", "cpu_limit", "memory_request", "memory_limit")}


RenderedChart = dict[str, str]


# --------------------------------------------------------------------------- Jinja


def template_dir() -> Path:
    """Installed wheels carry the templates inside the package; a source checkout has them at the top."""
    packaged = Path(__file__).parent / "templates"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "templates"


def yaml_scalar(value: object) -> str:
    """Any value as a YAML flow scalar that Helm's parser reads back unchanged (strings always quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def helm_scalar(value: object) -> str:
    """A quoted string inside a Helm template; text containing Go template delimiters goes through a
    Go string literal so Helm prints it instead of executing it."""
    text = yaml_scalar(value)
    if "{{" in text:
        return "{{ " + json.dumps(str(value), ensure_ascii=False) + " | quote }}"
    return text


def yaml_block(text: str, indent: int) -> str:
    """Multi-line text as a literal block scalar (readable diffs); falls back to a quoted scalar when a
    literal block could not hold the text exactly."""
    lines = [line.rstrip() for line in text.strip("\n").split("\n")]
    if not lines[0] or lines[0][0] in " \t" or any("\t" in line or not line.isprintable() for line in lines):
        return yaml_scalar("\n".join(lines) + "\n")
    pad = " " * indent
    return "|\n" + "\n".join(pad + line if line else "" for line in lines)


def make_env(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    """The one Jinja factory: chart templates and description texts are rendered through it."""
    env = jinja2.Environment(
        loader=loader or jinja2.FileSystemLoader(str(template_dir())),
        block_start_string="[%",
        block_end_string="%]",
        variable_start_string="[[",
        variable_end_string="]]",
        comment_start_string="[#",
        comment_end_string="#]",
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = yaml_scalar
    env.filters["hq"] = helm_scalar
    env.filters["block"] = yaml_block
    env.filters["cpu"] = quantity.format_cpu
    env.filters["bytes"] = quantity.format_bytes
    env.filters["mib"] = quantity.mib
    return env


@functools.cache
def chart_env() -> jinja2.Environment:
    """The environment of the chart templates, made once: Jinja compiles each template on first use and
    caches it in the environment, so a fresh one per chart would recompile every template every time."""
    return make_env()


# --------------------------------------------------------------------------- plan


def _text_context(
    spec: AppSpec, hardware: HardwareProfile, effective: list[str], version: str | None
) -> dict[str, Any]:
    context = spec.model_dump(mode="json")
    context.update(hardware_profile=hardware.model_dump(), engine_version=version,
                   command_line=engines.shell_join(effective),
                   port=engines.VLLM_PORT if isinstance(spec.engine, VllmEngine) else engines.LLAMACPP_PORT)
    return context


def _render_text(source: str, context: dict[str, Any], file: str, path: str) -> str:
    """Spec text with its citations filled in: data only, never a template (see citations.py)."""
    try:
        return citations.render(source, context)
    except citations.CitationError as exc:
        fix = "cite an existing spec field, e.g. [[ engine.max_model_len ]]"
        raise RenderError([Problem(file, path, str(exc), fix, rule="render")]) from None


def _preset_section(spec: AppSpec, plan_args: list[str], hardware: HardwareProfile, gpu_limit: int) -> str:
    engine = spec.engine
    lines = ["**Preset configuration**", f"- Image: `{engine.image}`"]
    if isinstance(engine, VllmEngine):
        lines.append(f"- Model: `{engine.model}`")
        if engine.speculative and engine.speculative.model:
            lines.append(f"- Drafter: `{engine.speculative.model}` ({engine.speculative.method}, "
                         f"num_speculative_tokens={engine.speculative.num_speculative_tokens})")
        lines.append(f"- Served model name: `{engine.served_model_name}`, context {engine.context_length} tokens")
    else:
        lines.append(f"- Model: `{engine.model.repo}` file `{engine.model.file}`"
                     + (f" + projector `{engine.model.mmproj}`" if engine.model.mmproj else ""))
        lines.append(f"- Served model name: `{engine.alias}`, context {engine.ctx_size} tokens")
    lines.append(f"- Engine args: `{engines.shell_join(plan_args)}`")
    lines.append(f"- GPU: {hardware.title}, {quantity.format_bytes(gpu_limit)} GPU memory")
    return "\n".join(lines)


def _changelog_text(spec: AppSpec) -> str:
    return "\n\n".join(f"v{entry.version}: {entry.note.strip()}" for entry in spec.changelog)


def plan_chart(spec: AppSpec, file: str, generation: GenerationName | None = None) -> Plan:
    gen = GENERATIONS[generation or spec.olares.generation]
    hardware = profiles()[spec.hardware]
    engine = spec.engine
    args = engines.engine_args(engine)
    effective = engines.effective_args(args)
    version = engines.engine_version(engine)

    res = spec.resources
    engine_resources = ContainerResources(
        "vllm" if isinstance(engine, VllmEngine) else "llama-server",
        quantity.parse_cpu(res.cpu.request), quantity.parse_cpu(res.cpu.limit),
        quantity.parse_bytes(res.memory.request), quantity.parse_bytes(res.memory.limit),
    )
    init_containers = [DOWNLOADER] if isinstance(engine, LlamaCppEngine) else []
    device = hardware.hami_limit_mib * 2**20
    gpu_request = quantity.parse_bytes(res.gpu_memory.request) if res.gpu_memory else device
    gpu_limit = quantity.parse_bytes(res.gpu_memory.limit) if res.gpu_memory else device

    context = _text_context(spec, hardware, effective, version)
    preset = _preset_section(spec, effective[1:] if isinstance(engine, VllmEngine) else effective,
                             hardware, gpu_limit)
    upgrade = _changelog_text(spec)
    meta = spec.metadata
    default_texts = {
        "title": meta.title,
        "description": _render_text(meta.description, context, file, "metadata.description").strip(),
        "full_description": _render_text(meta.full_description, context, file,
                                         "metadata.full_description").strip() + "\n\n" + preset,
        "upgrade_description": upgrade,
    }
    texts = {meta.default_locale: default_texts}
    for locale, translated in sorted(meta.locales.items()):
        base = f"metadata.locales.{locale}"
        texts[locale] = {
            "title": translated.title or meta.title,
            "description": _render_text(translated.description, context, file, f"{base}.description").strip()
            if translated.description else default_texts["description"],
            "full_description": _render_text(translated.full_description, context, file,
                                             f"{base}.full_description").strip() + "\n\n" + preset
            if translated.full_description else default_texts["full_description"],
            "upgrade_description": upgrade,
        }

    if isinstance(engine, VllmEngine):
        command, port = ["vllm", "serve"], engines.VLLM_PORT
        extra: dict[str, Any] = {"hf_home": engines.HF_HOME}
    else:
        command, port = ["/app/llama-server"], engines.LLAMACPP_PORT
        extra = {
            "gguf_dir": engines.gguf_dir(engine),
            "downloads": {"MODEL_REPO": engine.model.repo, "MODEL_REVISION": engine.model.revision,
                          "MODEL_FILE": engine.model.file, **({"MMPROJ_FILE": engine.model.mmproj}
                                                            if engine.model.mmproj else {})},
        }
    engine_env = sorted((name, engines.kubernetes_literal(value)) for name, value in engine.env.items())
    if gen.name == "legacy":
        # HAMi-core reads Olares' default CUDA_DEVICE_MEMORY_LIMIT_0=0m as zero bytes.
        engine_env.insert(0, ("CUDA_DEVICE_MEMORY_LIMIT_0", f"{quantity.mib(gpu_limit)}m"))
    return Plan(
        spec=spec, generation=gen, hardware=hardware, engine_kind=engine.kind, engine_version=version,
        container_name=engine_resources.name, command=command, args=engines.container_args(args),
        effective_args=effective, port=port, containers=[engine_resources],
        init_containers=init_containers,
        gpu_memory_request=gpu_request, gpu_memory_limit=gpu_limit,
        startup_failure_threshold=math.ceil(spec.startup_timeout_minutes * 60 / STARTUP_PERIOD_SECONDS),
        startup_period_seconds=STARTUP_PERIOD_SECONDS, engine_env=engine_env,
        texts=texts, locales=[meta.default_locale, *sorted(meta.locales)], extra=extra,
    )


STARTUP_PERIOD_SECONDS = 15

# chart path -> template (a None key means one file per locale)
_CHART_FILES = {
    "Chart.yaml": "chart/Chart.yaml.j2",
    "values.yaml": "chart/values.yaml.j2",
    "owners": "chart/owners.j2",
    ".helmignore": "chart/helmignore.j2",
    "templates/secret.yaml": "chart/secret.yaml.j2",
    "templates/service.yaml": "chart/service.yaml.j2",
}


def render_chart(spec: AppSpec, file: str, generation: GenerationName | None = None,
                 env: jinja2.Environment | None = None) -> RenderedChart:
    """Render one app's chart folder into memory. Pure: reads only templates."""
    plan = plan_chart(spec, file, generation)
    env = env or chart_env()
    sources = dict(_CHART_FILES)
    sources["OlaresManifest.yaml"] = f"manifest/{plan.generation.name}.yaml.j2"
    sources["templates/deployment.yaml"] = f"engine/{plan.engine_kind}.yaml.j2"
    chart: RenderedChart = {}
    for path, template in sources.items():
        chart[path] = _render_file(env, template, {"plan": plan, "spec": spec}, file, path)
    for locale in plan.locales:
        path = f"i18n/{locale}/OlaresManifest.yaml"
        chart[path] = _render_file(env, "manifest/i18n.yaml.j2", {"plan": plan, "texts": plan.texts[locale]},
                                   file, path)
    return dict(sorted(chart.items()))


def _render_file(env: jinja2.Environment, template: str, context: dict[str, Any], file: str, path: str) -> str:
    try:
        text = env.get_template(template).render(context)
    except jinja2.TemplateError as exc:
        raise RenderError([Problem(file, path, f"template {template}: {exc}", "report this as a bug in "
                                   "olarespack's templates", rule="render")]) from None
    leftover = _MARKERS.search(text)
    if leftover:
        line = text.count("\n", 0, leftover.start()) + 1
        raise RenderError([Problem(file, path, f"Jinja marker {leftover.group()!r} survived rendering at "
                                   f"line {line}", "remove [[ ]] / [% %] / [# #] from spec values",
                                   rule="render")])
    return text
