"""The imported spec checked as `olarespack build` checks it, before anything is written: typed by the spec
model, loaded, its engine and Olares rules run, its chart rendered; then its server command line compared
with the chart's. A spec that does not build is not written: every problem is named instead."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from olarespack.core.errors import OlaresPackError
from olarespack.importer.compare import argv_differences
from olarespack.importer.tokens import token_fields
from olarespack.spec.translate import problem_of

if TYPE_CHECKING:
    from olarespack.importer import ImportResult

PASS_THROUGH = ("scratch", "extra_args", "env")


def typed(data: dict[str, Any], result: ImportResult, label: str) -> dict[str, Any] | None:
    """The data as the spec model reads it (numbers as numbers), in field order, defaults left out; None
    when the model refuses it, each refusal named by field path."""
    from olarespack.spec.models import AppSpec

    try:
        spec = AppSpec.model_validate(data, strict=False)
    except ValidationError as exc:
        for error in exc.errors():
            problem = problem_of(label, error)
            result.unexpressed.append(f"{problem.path}: {problem.message}")
        return None
    dumped: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True)
    engine = dumped["engine"]
    # what passes through (args, env, scratch folders) reads best after the typed settings
    dumped["engine"] = {k: v for k, v in engine.items() if k not in PASS_THROUGH} | {
        k: engine[k] for k in PASS_THROUGH if k in engine
    }
    return dumped


class _Dumper(yaml.SafeDumper):
    pass


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def spec_yaml(data: dict[str, Any], label: str) -> str:
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)
    return (
        "# yaml-language-server: $schema=../schemas/app-spec.schema.json\n"
        f"# Imported from the chart {label} by `olarespack import`.\n" + body
    )


def verify(result: ImportResult, data: dict[str, Any], spec_file: Path) -> None:
    """Type, check and build the spec; compare the server command lines. Sets result.text, and
    result.buildable false (nothing to write) when the spec would not build."""
    tokens = list(token_fields(data))
    for path in tokens:
        result.unexpressed.append(
            f"{path}: holds a token; a spec never does (take it out of the chart, or "
            "leave it to the Secret the spec's chart makes)"
        )
    found = typed(data, result, str(spec_file))
    if found is None or tokens:
        result.buildable = False
        return
    result.text = spec_yaml(found, result.label)
    with tempfile.TemporaryDirectory(prefix="olarespack-import-") as tmp:
        # laid out as the project is: the build reads models/ beside the spec's folder
        models = spec_file.absolute().parent.parent / "models"
        if models.is_dir() and not models.is_symlink():
            shutil.copytree(models, Path(tmp) / "models", symlinks=True)
        built = Path(tmp) / "apps" / spec_file.name
        built.parent.mkdir()
        built.write_text(result.text, encoding="utf-8")
        problems, argv, kind = _build(built, spec_file)
    if problems:
        result.unexpressed += problems
        result.buildable = False
        return
    result.spec_argv = argv
    result.unexpressed += argv_differences(result.chart_argv, result.spec_argv, kind)


def _build(path: Path, spec_file: Path) -> tuple[list[str], list[str], str]:
    """(the build's errors, else the server command line of the spec's chart, and its engine kind)."""
    from olarespack.project import load_apps
    from olarespack.render.plan import plan_chart

    def named(text: str) -> str:
        return text.replace(str(path), str(spec_file))

    try:
        apps, found = load_apps([path])
        problems = [p for p in found if p.severity == "error"]
        if problems or not apps:
            return [named(str(p)) for p in problems] or ["the spec does not build"], [], ""
        plan = plan_chart(apps[0].spec, str(spec_file))
    except OlaresPackError as exc:
        return [named(line) for line in str(exc).splitlines()], [], ""
    return [], plan.server_argv, apps[0].spec.engine.kind
