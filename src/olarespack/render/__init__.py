"""Spec -> chart, in memory and without I/O: the plan (render/plan.py) printed by olarespack's own
templates (render/jinja.py), with a check that no template marker survives."""

from __future__ import annotations

import fnmatch
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
_PINNED_FILES = {
    "templates/deployment.yaml": "pinned/engine.yaml.j2",
    "templates/engine-wrapper.yaml": "pinned/wrapper.yaml.j2",
    "templates/model-console.yaml": "pinned/console.yaml.j2",
}
# What a chart template reads from the chart's own files (the chat template, the downloader's script)
_FILES_READ = re.compile(r'\.Files\.(?:Get|Glob) "([^"]+)"')


class MarkerLeftover(RenderError):
    """A citation opener printed into a chart file: text the spec's guards refuse with its field named."""


def render_chart(
    spec: AppSpec, file: str, generation: GenerationName | None = None, env: jinja2.Environment | None = None
) -> Chart:
    """Render one app's chart folder into memory. Pure: reads only templates."""
    plan = plan_chart(spec, file, generation)
    env = env or chart_env()
    sources = dict(_CHART_FILES)
    sources["OlaresManifest.yaml"] = f"manifest/{plan.generation.name}.yaml.j2"
    if plan.pinned is not None:
        # the official pinned-model shape: the engine behind the Model Console, no downloader of its own
        sources.update(_PINNED_FILES)
        carried: dict[str, str] = {}
    else:
        sources["templates/deployment.yaml"] = plan.engine_template
        rendered, carried = _engine_extras(env, plan.engine_template)
        sources.update(rendered)
    template_file = plan.extra.get("chat_template")
    if template_file:
        sources["templates/chat-template.yaml"] = "chart/chat-template.yaml.j2"
    files: dict[str, str] = {}
    for path, template in sources.items():
        files[path] = _render_file(env, template, {"plan": plan, "spec": spec}, file, path)
    for locale in plan.locales:
        path = f"i18n/{locale}/OlaresManifest.yaml"
        files[path] = _render_file(
            env, "manifest/i18n.yaml.j2", {"plan": plan, "texts": plan.texts[locale]}, file, path
        )
    if template_file:
        # verbatim, outside templates/: Helm reads it with .Files and never renders it
        files[f"{CHAT_TEMPLATE_DIR}/{template_file['file']}"] = template_file["text"]
    for path, source in carried.items():
        files[path] = _verbatim(env, source)
    _check_files_read(files, file)
    return Chart(spec.name, dict(sorted(files.items())), f"{file} [{plan.generation.name}]")


def _engine_extras(env: jinja2.Environment, engine_template: str) -> tuple[dict[str, str], dict[str, str]]:
    """What an engine's charts carry beside the Deployment, found beside its template: for engine/<kind>.yaml.j2,
    engine/<kind>/templates/<name>.j2 rendered into templates/<name>, and engine/<kind>/files/<name> copied as it
    is into files/<name> (a script Helm reads with .Files and never renders: no Jinja, no YAML around it)."""
    folder = engine_template.removesuffix(".yaml.j2") + "/"
    try:
        names = env.list_templates(filter_func=lambda name: name.startswith(folder))
    except TypeError:  # a loader that cannot list its templates (tests' in-memory ones) has no extras
        return {}, {}
    rendered, carried = {}, {}
    for name in names:
        inside = name.removeprefix(folder)
        if inside.startswith("templates/") and inside.endswith(".j2"):
            rendered[inside.removesuffix(".j2")] = name
        elif inside.startswith("files/"):
            carried[inside] = name
    return rendered, carried


def _check_files_read(files: dict[str, str], file: str) -> None:
    """Every file a chart template reads with .Files is one the chart carries: Helm would read an empty one."""
    problems = []
    for path, text in files.items():
        if not path.startswith("templates/"):
            continue
        for wanted in _FILES_READ.findall(text):
            if not any(fnmatch.fnmatchcase(carried, wanted) for carried in files):
                problems.append(
                    Problem(
                        file,
                        path,
                        f"reads {wanted} with .Files, which the chart does not carry",
                        "report this as a bug in olarespack's templates (this installation "
                        "lacks a file olarespack ships)",
                        rule="render",
                    )
                )
    if problems:
        raise RenderError(problems)


def _verbatim(env: jinja2.Environment, source: str) -> str:
    """A file of olarespack's templates as it is, read through the loader that listed it (never rendered)."""
    loader = env.loader
    assert loader is not None, "only a loader lists templates"
    text: str = loader.get_source(env, source)[0]
    return text


def _render_file(env: jinja2.Environment, template: str, context: dict[str, Any], file: str, path: str) -> str:
    try:
        text = env.get_template(template).render(context)
    except jinja2.TemplateError as exc:
        raise RenderError(
            [
                Problem(
                    file,
                    path,
                    f"template {template}: {exc}",
                    "report this as a bug in olarespack's templates",
                    rule="render",
                )
            ]
        ) from None
    leftover = _MARKERS.search(text)
    if leftover:
        line = text.count("\n", 0, leftover.start()) + 1
        raise MarkerLeftover(
            [
                Problem(
                    file,
                    path,
                    f"Jinja marker {leftover.group()!r} survived rendering at line {line}",
                    "remove [[ from spec values outside citations",
                    rule="render",
                )
            ]
        )
    return text
