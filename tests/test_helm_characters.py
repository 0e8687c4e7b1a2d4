"""Characters helm cannot load are refused at the spec, with the field named: helm reads every chart file as
YAML 1.1, whose printable set leaves out C0 and C1 controls, surrogates, U+FFFE and U+FFFF. A chart built
from such a value is unloadable; the real helm shows it, and shows the characters kept are loadable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli
from olarespack.helm import HelmBinary, values_file
from olarespack.olares.values import olares_values
from olarespack.render import render_chart
from olarespack.spec.models import AppSpec
from olarespack.write import write_chart
from specs import app_data, write_spec

REFUSED = ["\uffff", "\ufffe", "\ufdd0", "\U0010ffff", "\x85", "\x9b", "\x7f"]
KEPT = "\ufffd \U0001f600 \u00a0 \ue000 é 中"


def escaped(text: str) -> str:
    """A YAML double-quoted escape for each character, as a spec would carry it."""
    return "".join(f"\\U{ord(c):08X}" for c in text)


def spec_with(tmp_path: Path, field: str, value: str) -> Path:
    """The vision app with `field` (an env value or a description) holding `value`, written as escapes."""
    data = app_data()
    marker = "VALUE-TO-REPLACE"
    if field == "env":
        data["engine"]["env"] = {"WEIRD": marker}
    else:
        data["metadata"][field] = marker
    path = write_spec(tmp_path, data)
    path.write_text(path.read_text(encoding="utf-8").replace(marker, f'"{escaped(value)}"'), encoding="utf-8")
    return path


@pytest.mark.parametrize("char", REFUSED, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize(("field", "path"), [("env", "engine.env.WEIRD"), ("description", "metadata.description")])
def test_what_helm_cannot_load_is_refused_at_the_spec(tmp_path: Path, char: str, field: str, path: str) -> None:
    spec = spec_with(tmp_path, field, f"a{char}b")
    code, output = run_cli(tmp_path, "build", str(spec), "--out", str(tmp_path / "charts"))
    assert code == 1, output
    line = next(line for line in output.splitlines() if line.startswith("FAIL ") and f": {path}: " in line)
    assert f"U+{ord(char):04X}" in line and "(fix: remove it)" in line and line.endswith("[control-character]")
    assert not (tmp_path / "charts").exists() and "Traceback" not in output


def test_text_helm_loads_builds(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, "env", KEPT)
    code, output = run_cli(tmp_path, "build", str(spec), "--out", str(tmp_path / "charts"))
    assert code == 0, output


def template(tmp_path: Path, value: str) -> tuple[bool, str, list[dict[str, Any]]]:
    """helm template of the chart a spec with WEIRD=value renders, the spec's guards left out."""
    data = app_data()
    data["engine"]["env"] = {"WEIRD": value}
    spec = AppSpec.model_validate(data)  # the models alone: what the guards refuse still renders here
    folder = tmp_path / spec.name
    write_chart(render_chart(spec, "app.yaml"), folder)
    with values_file(olares_values(spec.name)) as values:
        out = HelmBinary(name="helm").template(folder, spec.name, f"{spec.name}-alice", values)
    return out.ok, out.stderr, [doc for doc in yaml.safe_load_all(out.stdout) if doc] if out.ok else []


@pytest.mark.helm
def test_helm_refuses_what_the_spec_refuses_and_loads_what_it_keeps(tmp_path: Path) -> None:
    for char in ("\uffff", "\ufffe", "\x9b"):
        ok, stderr, _ = template(tmp_path / f"{ord(char):x}", f"a{char}b")
        assert not ok and "control characters are not allowed" in stderr, stderr
    ok, stderr, documents = template(tmp_path / "kept", KEPT)
    assert ok, stderr
    [deployment] = [d for d in documents if d["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "WEIRD", "value": KEPT} in env
