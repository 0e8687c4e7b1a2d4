"""The market texts of a chart: descriptions with their citations filled in, the generated preset
section that lists the exact engine arguments, and the changelog as upgradeDescription."""

from __future__ import annotations

from typing import Any

from olarespack import quantity
from olarespack.engines.base import Engine, shell_join
from olarespack.errors import Problem, RenderError
from olarespack.hardware import HardwareProfile
from olarespack.spec import citations
from olarespack.spec.models import AppSpec

Texts = dict[str, str]  # title, description, full_description, upgrade_description


def citation_context(spec: AppSpec, engine: Engine, hardware: HardwareProfile, effective: list[str],
                     version: str | None) -> dict[str, Any]:
    """What a description may cite: every spec field, plus a few facts of the chart."""
    context = spec.model_dump(mode="json")
    context.update(hardware_profile=hardware.model_dump(), engine_version=version, command_line=shell_join(effective),
                   port=engine.server_port(spec.engine))
    return context


def _cite(source: str, context: dict[str, Any], file: str, path: str) -> str:
    """Spec text with its citations filled in: data only, never a template (see spec/citations.py)."""
    try:
        return citations.render(source, context).strip()
    except citations.CitationError as exc:
        fix = "cite an existing spec field, e.g. [[ engine.max_model_len ]]"
        raise RenderError([Problem(file, path, str(exc), fix, rule="render")]) from None


def preset_section(spec: AppSpec, engine: Engine, listed_args: list[str], hardware: HardwareProfile,
                   gpu_memory: int) -> str:
    lines = ["**Preset configuration**", f"- Image: `{spec.engine.image}`", *engine.preset_lines(spec.engine),
             f"- Engine args: `{shell_join(listed_args)}`",
             f"- GPU: {hardware.title}, {quantity.format_bytes(gpu_memory)} GPU memory"]
    return "\n".join(lines)


def changelog_text(spec: AppSpec) -> str:
    return "\n\n".join(f"v{entry.version}: {entry.note.strip()}" for entry in spec.changelog)


def market_texts(spec: AppSpec, file: str, context: dict[str, Any], preset: str) -> dict[str, Texts]:
    """locale -> texts; a translation falls back to the default locale's text for what it leaves out."""
    upgrade = changelog_text(spec)
    meta = spec.metadata
    default: Texts = {
        "title": meta.title,
        "description": _cite(meta.description, context, file, "metadata.description"),
        "full_description": _cite(meta.full_description, context, file, "metadata.full_description")
        + "\n\n" + preset,
        "upgrade_description": upgrade,
    }
    texts = {meta.default_locale: default}
    for locale, translated in sorted(meta.locales.items()):
        base = f"metadata.locales.{locale}"
        texts[locale] = {
            "title": translated.title or meta.title,
            "description": _cite(translated.description, context, file, f"{base}.description")
            if translated.description else default["description"],
            "full_description": _cite(translated.full_description, context, file, f"{base}.full_description")
            + "\n\n" + preset if translated.full_description else default["full_description"],
            "upgrade_description": upgrade,
        }
    return texts
