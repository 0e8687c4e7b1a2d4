"""The one Jinja factory for olarespack's own chart templates, and the filters they print values with.

Delimiters that cannot collide with Helm's {{ }} ([[ ]], [% %], [# #]), StrictUndefined, no autoescape.
Spec text never goes through Jinja: it is data for these templates (see spec/citations.py).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jinja2

from olarespack.core import quantity


def template_dir() -> Path:
    """Installed wheels carry the templates inside the package; a source checkout has them at the top."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "templates"
    return packaged if packaged.is_dir() else package.parents[1] / "templates"


def yaml_scalar(value: object) -> str:
    """Any value as a YAML flow scalar that Helm's parser reads back unchanged (strings always quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if '"' in text and "'" not in text and text.isprintable():
        return f"'{text}'"  # JSON values read as they are typed: '{"image":1}', not "{\"image\":1}"
    return json.dumps(text, ensure_ascii=False)


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
