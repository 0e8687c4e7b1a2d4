"""The market texts of a chart: descriptions with their citations filled in, the generated preset
section that lists the exact engine arguments, and the changelog as upgradeDescription."""

from __future__ import annotations

from typing import Any

from olarespack.core import quantity
from olarespack.core.errors import Problem, RenderError
from olarespack.core.hardware import HardwareProfile
from olarespack.engines import engine_for
from olarespack.engines.base import EngineSpec, shell_join
from olarespack.engines.protocol import Bound
from olarespack.fit.record import CITED_AS, newest_record
from olarespack.spec import citations
from olarespack.spec.models import AppSpec

Texts = dict[str, str]  # title, description, full_description, upgrade_description


def citation_context(
    spec: AppSpec, engine: Bound[EngineSpec], hardware: HardwareProfile, effective: list[str], version: str | None
) -> dict[str, Any]:
    """What a description may cite: every spec field, a few facts of the chart, and the newest bench record as
    `bench` (its fields, the version it was measured on, whether it is stale; None when no entry has one)."""
    context = spec.model_dump(mode="json")
    recorded = newest_record(spec)
    context.update(
        hardware_profile=hardware.model_dump(),
        engine_version=version,
        command_line=shell_join(effective),
        port=engine.server_port(),
        **{CITED_AS: recorded.cited() if recorded else None},
    )
    return context


def citation_marks(spec: AppSpec) -> dict[str, str]:
    """What is printed after a citation of a stale bench figure: the version it was measured on."""
    recorded = newest_record(spec)
    return recorded.marks() if recorded else {}


# Values a description may cite that the chart derives from a spec field: when one has no value, that field
# is what the author changes (or the citation goes), so the problem names it.
_DERIVED = {"engine_version": "engine.image", CITED_AS: "changelog"}


class _Citing:
    """Fills in the citations of every text of an app and keeps every mistake, so one run shows them all."""

    def __init__(self, spec: AppSpec, context: dict[str, Any], file: str) -> None:
        self.spec, self.context, self.file = spec, context, file
        self.marks = citation_marks(spec)
        self.problems: list[Problem] = []
        self.unset: dict[str, list[str]] = {}  # derived value -> the texts citing it

    def __call__(self, source: str, path: str) -> str:
        """Spec text with its citations filled in: data only, never a template (see spec/citations.py)."""
        text, errors = citations.cite(source, self.context, self.marks)
        for error in errors:
            if error.unset in _DERIVED:
                self.unset.setdefault(error.unset, []).append(path)
            else:
                self.problems.append(
                    Problem(
                        self.file,
                        path,
                        str(error),
                        "cite an existing spec field, e.g. [[ engine.max_model_len ]]",
                        rule="render",
                    )
                )
        return text.strip()

    def raise_problems(self) -> None:
        for derived, paths in self.unset.items():
            source = _DERIVED[derived]
            if derived == CITED_AS:
                self.problems.append(
                    Problem(
                        self.file,
                        source,
                        f"{' and '.join(sorted(set(paths)))} cite [[ {CITED_AS}.* ]], but no changelog "
                        "entry records a bench",
                        "measure the app with `olarespack bench run SPEC --url URL --record`, or remove the citation",
                        rule="render",
                    )
                )
                continue
            example = engine_for(self.spec.engine).engine.pinned_image
            fix = f"pin {source} to a tag that names the engine release (e.g. {example})"
            if "version" in type(self.spec.engine).model_fields:
                fix += " or set engine.version"
            self.problems.append(
                Problem(
                    self.file,
                    source,
                    f"{self.spec.engine.image!r} does not say which engine release it runs, and "
                    f"{' and '.join(sorted(set(paths)))} cite it as [[ {derived} ]]",
                    f"{fix}, or remove the citation",
                    rule="render",
                )
            )
        if self.problems:
            raise RenderError(self.problems)


def preset_section(
    spec: AppSpec, engine: Bound[EngineSpec], listed_args: list[str], hardware: HardwareProfile, gpu_memory: int
) -> str:
    lines = [
        "**Preset configuration**",
        f"- Image: `{spec.engine.image}`",
        *engine.preset_lines(),
        f"- Engine args: `{shell_join(listed_args)}`",
        f"- GPU: {hardware.title}, {quantity.format_bytes(gpu_memory)} GPU memory",
    ]
    return "\n".join(lines)


def changelog_text(spec: AppSpec) -> str:
    """Each entry's note; where its version and an older one both recorded a bench, how the figures moved."""
    from olarespack.fit.record import comparisons

    moved = comparisons(spec)
    return "\n\n".join(
        f"v{entry.version}: {entry.note.strip()}"
        + (f" Measured: {moved[str(entry.version)]}." if str(entry.version) in moved else "")
        for entry in spec.changelog
    )


def market_texts(spec: AppSpec, file: str, context: dict[str, Any], preset: str) -> dict[str, Texts]:
    """locale -> texts; a translation falls back to the default locale's text for what it leaves out."""
    cite = _Citing(spec, context, file)
    upgrade = changelog_text(spec)
    meta = spec.metadata
    default: Texts = {
        "title": meta.title,
        "description": cite(meta.description, "metadata.description"),
        "full_description": cite(meta.full_description, "metadata.full_description") + "\n\n" + preset,
        "upgrade_description": upgrade,
    }
    texts = {meta.default_locale: default}
    for locale, translated in sorted(meta.locales.items()):
        base = f"metadata.locales.{locale}"
        texts[locale] = {
            "title": translated.title or meta.title,
            "description": cite(translated.description, f"{base}.description")
            if translated.description
            else default["description"],
            "full_description": cite(translated.full_description, f"{base}.full_description") + "\n\n" + preset
            if translated.full_description
            else default["full_description"],
            "upgrade_description": upgrade,
        }
    cite.raise_problems()
    return texts
