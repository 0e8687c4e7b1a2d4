"""`olarespack build` and `olarespack schema`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from olarespack.cli import options
from olarespack.cli.group import output_folder
from olarespack.core.errors import UsageError
from olarespack.olares.generations import GenerationName
from olarespack.project import orphan_charts, render_apps, sibling_names, spec_files
from olarespack.spec.models import AppSpec
from olarespack.write import changed_files, write_chart, write_file

SCHEMA_PATH = Path("schemas/app-spec.schema.json")


@click.command()
@options.specs
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the charts differ from what the specs render.")
@options.charts_dir
@options.apps_dir
@options.olares_version
def build(
    specs: tuple[str, ...], check: bool, charts_dir: Path, apps_dir: Path, generation: GenerationName | None
) -> None:
    """Render charts/<app>/ from each SPEC (default: every apps/*.yaml)."""
    output_folder(charts_dir, "--charts-dir")
    files = spec_files(specs, apps_dir)
    if not files:
        click.echo(
            f"no apps: {apps_dir}/ holds no spec; write {apps_dir}/<app>.yaml or bring a chart in with "
            "`olarespack import CHART`",
            err=True,
        )
    others = sibling_names(apps_dir, files) if specs else None
    apps = render_apps(files, [generation] if generation else None, others)
    for app in apps:
        for warning in app.warnings:
            click.echo(f"WARN {warning}", err=True)
    orphans = [] if specs else orphan_charts(charts_dir, {app.spec.name for app in apps})
    for orphan in orphans:
        click.echo(f"{'ORPHAN' if check else 'WARN'} {orphan}", err=True)
    drifted = len(orphans) if check else 0
    for app in apps:
        folder = charts_dir / app.spec.name
        if check:
            changes = changed_files(app.chart, folder)
            if changes:
                drifted += 1
                click.echo(f"DRIFT {app.spec.name} ({folder}): {', '.join(changes)}")
            else:
                click.echo(f"ok {app.spec.name}: up to date")
        else:
            status = write_chart(app.chart, folder)
            click.echo(f"ok {app.spec.name} {app.spec.version}: {status} ({folder})")
    if drifted:
        click.echo(f"{drifted} chart(s) differ from their specs: run `olarespack build` and commit", err=True)
        sys.exit(1)


@click.command()
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the schema file is out of date.")
@click.option(
    "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=SCHEMA_PATH, show_default=True
)
def schema(check: bool, out_file: Path) -> None:
    """Write the JSON Schema of app specs (for editors and validation) from the models."""
    text = app_spec_schema()
    current = out_file.read_text(encoding="utf-8") if out_file.is_file() else None
    if check:
        if current != text:
            click.echo(f"DRIFT {out_file}: run `olarespack schema` and commit", err=True)
            sys.exit(1)
        click.echo(f"ok {out_file}: up to date")
        return
    write_file(out_file, text.encode("utf-8"))
    click.echo(f"ok {out_file}: {'unchanged' if current == text else 'written'}")


def app_spec_schema() -> str:
    document = AppSpec.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "https://olarespack.invalid/app-spec.schema.json"
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _user(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9]{0,31}", value):
        raise click.BadParameter(f"{value!r} is not an Olares user name (lower-case letters and digits)")
    return value


@click.command("values")
@click.argument("target", metavar="SPEC_OR_CHART", type=click.Path(exists=True))
@click.option("--gpu", default="nvidia", show_default=True, help="The accelerator mode Olares renders for.")
@click.option(
    "--user",
    default="alice",
    show_default=True,
    help="The Olares user the app is installed for.",
    callback=lambda ctx, param, value: _user(value),
)
def values(target: str, gpu: str, user: str) -> None:
    """Print the values Olares gives a chart at install (its app name, entrances, envs already filled in), for
    `helm install --dry-run=client -f` on a box, or `helm template -f` anywhere.

    The Hugging Face token is left empty: the first line printed names its key (olaresEnv.HF_TOKEN for a current
    chart, olaresEnv.OLARES_USER_HUGGINGFACE_TOKEN for a legacy one); give yours with --set KEY=..."""
    import yaml

    from olarespack.check.inputs import read_chart
    from olarespack.check.render import SECRET_SENTINEL, render_values
    from olarespack.project import load_resolved
    from olarespack.render import render_chart

    path = Path(target)
    if path.is_file():
        # as build renders it: a context `auto` is resolved first (render takes a number)
        chart = render_chart(load_resolved(path, target).spec, target)
    elif (path / "Chart.yaml").is_file():
        chart = read_chart(path, target)
    else:
        raise UsageError(f"{target}: neither a spec (.yaml) nor a chart folder")
    found = render_values(chart, gpu, user)
    tokens = sorted(k for k, v in found["olaresEnv"].items() if v == SECRET_SENTINEL)
    found["olaresEnv"] = {k: "" if v == SECRET_SENTINEL else v for k, v in found["olaresEnv"].items()}
    text = yaml.safe_dump(found, sort_keys=True)
    click.echo(f"# olarespack values {target}: what Olares gives {chart.name} at install (user {user}, GPU {gpu})")
    for key in tokens:
        click.echo(f"# the Hugging Face token is left empty: give yours with --set olaresEnv.{key}=...")
    click.echo(text, nl=False)
