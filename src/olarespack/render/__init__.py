"""Spec -> chart, in memory and without I/O: the plan (render/plan.py) printed by olarespack's own
templates (render/jinja.py), with a check that no template marker survives."""

from __future__ import annotations

import re
from typing import Any

import jinja2

from olarespack.core.chart import Chart
from olarespack.core.errors import Problem, RenderError
from olarespack.olares.generations import GenerationName
from olarespack.render.jinja import chart_env
from olarespack.render.plan import plan_chart
from olarespack.spec.models import AppSpec

CHAT_TEMPLATE_DIR = "files"
# A citation opener left in a chart means a citation was printed instead of evaluated; other brackets are
# the text people wrote (spec text is data for the templates, never a template).
_MARKERS = re.compile(r"\[\[")
# chart path -> template; the manifest, the Deployment and the i18n files are added per app
_CHART_FILES = {
    "Chart.yaml": "chart/Chart.yaml.j2",
    "values.yaml": "chart/values.yaml.j2",
    "owners": "chart/owners.j2",
    ".helmignore": "chart/helmignore.j2",
    "templates/secret.yaml": "chart/secret.yaml.j2",
    "templates/service.yaml": "chart/service.yaml.j2",
}
# engine template -> what its charts carry beside the Deployment: chart path -> template rendered, and chart
# path -> file copied as it is (a script Helm reads with .Files and never renders: no Jinja, no YAML around it)
_ENGINE_TEMPLATES = {
    "engine/llamacpp.yaml.j2": {"templates/model-downloader.yaml": "engine/model-downloader.yaml.j2"},
}
_ENGINE_FILES = {
    "engine/llamacpp.yaml.j2": {"files/download-models.sh": "engine/files/download-models.sh"},
}


class MarkerLeftover(RenderError):
    """A citation opener printed into a chart file: text the spec's guards refuse with its field named."""


def render_chart(spec: AppSpec, file: str, generation: GenerationName | None = None,
                 env: jinja2.Environment | None = None) -> Chart:
    """Render one app's chart folder into memory. Pure: reads only templates."""
    plan = plan_chart(spec, file, generation)
    env = env or chart_env()
    sources = dict(_CHART_FILES)
    sources["OlaresManifest.yaml"] = f"manifest/{plan.generation.name}.yaml.j2"
    sources["templates/deployment.yaml"] = plan.engine_template
    sources.update(_ENGINE_TEMPLATES.get(plan.engine_template, {}))
    template_file = plan.extra.get("chat_template")
    if template_file:
        sources["templates/chat-template.yaml"] = "chart/chat-template.yaml.j2"
    files: dict[str, str] = {}
    for path, template in sources.items():
        files[path] = _render_file(env, template, {"plan": plan, "spec": spec}, file, path)
    for locale in plan.locales:
        path = f"i18n/{locale}/OlaresManifest.yaml"
        files[path] = _render_file(env, "manifest/i18n.yaml.j2", {"plan": plan, "texts": plan.texts[locale]},
                                   file, path)
    if template_file:
        # verbatim, outside templates/: Helm reads it with .Files and never renders it
        files[f"{CHAT_TEMPLATE_DIR}/{template_file['file']}"] = template_file["text"]
    for path, source in _ENGINE_FILES.get(plan.engine_template, {}).items():
        files[path] = _verbatim(env, source, file, path)
    return Chart(spec.name, dict(sorted(files.items())), f"{file} [{plan.generation.name}]")


def _verbatim(env: jinja2.Environment, source: str, file: str, path: str) -> str:
    """A file of olarespack's templates as it is, read through the environment's loader (never rendered)."""
    try:
        if env.loader is None:
            raise jinja2.TemplateNotFound(source)
        text: str = env.loader.get_source(env, source)[0]
    except jinja2.TemplateError as exc:
        raise RenderError([Problem(file, path, f"{source}: {exc}", "report this as a bug in olarespack's "
                                   "templates (this installation lacks a file olarespack ships)",
                                   rule="render")]) from None
    return text


def _render_file(env: jinja2.Environment, template: str, context: dict[str, Any], file: str, path: str) -> str:
    try:
        text = env.get_template(template).render(context)
    except jinja2.TemplateError as exc:
        raise RenderError([Problem(file, path, f"template {template}: {exc}", "report this as a bug in "
                                   "olarespack's templates", rule="render")]) from None
    leftover = _MARKERS.search(text)
    if leftover:
        line = text.count("\n", 0, leftover.start()) + 1
        raise MarkerLeftover([Problem(file, path, f"Jinja marker {leftover.group()!r} survived rendering at "
                                      f"line {line}", "remove [[ from spec values outside citations",
                                      rule="render")])
    return text
