"""People's text in a spec: brackets are theirs (a Markdown link, `[% x %]`, `[# y #]`), only `[[ ... ]]` is a
citation, and only descriptions may cite; `{{` stays refused everywhere (Helm and Olares would execute it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from olarespack.render import render_chart
from olarespack.spec import citations
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

LINK = "[#40082](https://github.com/vllm-project/vllm/pull/40082)"


def rules_at(output: str) -> set[tuple[str, str]]:
    """(field path, rule) of every FAIL or ERROR line."""
    found = set()
    for line in output.splitlines():
        if line.startswith(("FAIL ", "ERROR ")) and line.endswith("]"):
            body = line.split(": ", 1)[1]
            found.add((body.split(": ", 1)[0] if ": " in body else "", line.rsplit("[", 1)[1][:-1]))
    return found


@pytest.mark.parametrize(
    "text",
    [
        f"fixed in {LINK}",
        "[% for x in name %]x[% endfor %]",
        "[# not a comment #]",
        "a[0] and [b[1]] and [x]",
        "ends ]]",
        "[]",
    ],
)
def test_brackets_are_text_in_a_citing_field(text: str) -> None:
    assert citations.render(f"{text} at [[ name ]]", {"name": "x"}) == f"{text} at x"


def bracketed() -> dict[str, object]:
    data = app_data()
    meta = data["metadata"]
    meta["description"] += f" See {LINK}."
    meta["full_description"] += f"\nFixed upstream in {LINK}; [% kept %] and [# kept #] as typed.\n"
    meta["locales"]["fr-FR"]["description"] += f" Voir {LINK}."
    meta["developer"] = "aamsellem [bot]"
    data["changelog"][0]["note"] += f" Fixed upstream in {LINK}."
    data["engine"]["env"] = {"NOTE": "[#1] [x] ]]"}
    return data


@pytest.mark.helm
def test_a_markdown_link_builds_and_lints(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, bracketed())
    code, output = run_cli(tmp_path, "build", str(spec), "--out", str(tmp_path / "charts"))
    assert code == 0, output
    manifest = (tmp_path / "charts" / "vllmgemma426ba4bvisionone" / "OlaresManifest.yaml").read_text()
    assert LINK in manifest and "[% kept %] and [# kept #]" in manifest
    french = tmp_path / "charts" / "vllmgemma426ba4bvisionone" / "i18n" / "fr-FR" / "OlaresManifest.yaml"
    assert f"Voir {LINK}" in french.read_text()
    code, output = run_cli(tmp_path, "lint", str(spec))  # every layer, the real helm included
    assert code == 0, output


def test_the_link_reaches_the_upgrade_description(tmp_path: Path) -> None:
    chart = render_chart(load_spec(write_spec(tmp_path, bracketed())), "app.yaml")
    manifest = yaml.safe_load(chart["OlaresManifest.yaml"])
    assert LINK in manifest["spec"]["upgradeDescription"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("changelog", 0, "note"), "see {{ .Values.os.appSecret }}"),
        (("metadata", "description"), "{{ .Values.domain }}"),
        (("engine", "env"), {"X": "{{ .Release.Name }}"}),
        (("changelog", 0, "note"), "cites [[ name ]]"),
        (("changelog", 0, "note"), "[[ open"),
        (("metadata", "developer"), "[[ name ]]"),
        (("engine", "env"), {"X": "[[ name ]]"}),
    ],
)
def test_go_templates_and_citations_outside_descriptions_stay_refused(
    tmp_path: Path, field: tuple[object, ...], value: object
) -> None:
    data = app_data()
    target = data
    for key in field[:-1]:
        target = target[key]  # type: ignore[index]
    target[field[-1]] = value  # type: ignore[index]
    spec = write_spec(tmp_path, data)
    code, output = run_cli(tmp_path, "build", str(spec), "--out", str(tmp_path / "charts"))
    assert code == 1
    where = ".".join(str(k) for k in field).replace(".0.", "[0].")
    assert any(rule == "template-marker" and at.startswith(where) for at, rule in rules_at(output)), output
    assert not (tmp_path / "charts").exists()
