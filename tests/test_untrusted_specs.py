"""Specs from strangers: what an attacker wrote in issue 9 is refused with the field named, runs no code,
reads no secret, and every input ends in a message and an exit code, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APPS, run_cli, tree_bytes
from olarespack.core.errors import Problem
from olarespack.render import render_chart
from olarespack.spec import citations
from olarespack.spec.load import load_spec
from specs import app_data, write_spec

CANARY_TOKEN = "hf_" + "Q" * 34


def run(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    return run_cli(cwd, *args)


def build(
    project: Path,
    data: dict[str, Any] | None = None,
    *,
    text: str | bytes | None = None,
    name: str = "gemma4-vision.yaml",
) -> tuple[int, str]:
    """Replace one spec of the project, build it, and check charts/ is untouched when the build fails."""
    spec = project / "apps" / name
    if text is not None:
        spec.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    elif data is not None:
        write_spec(spec.parent, data, name)
    before = tree_bytes(project / "charts")
    code, output = run("build", cwd=project)
    assert "Traceback" not in output
    if code != 0:
        assert tree_bytes(project / "charts") == before
    return code, output


def rules_at(output: str) -> set[tuple[str, str]]:
    """(field path, rule) of every FAIL line."""
    found = set()
    for line in output.splitlines():
        if line.startswith("FAIL ") and line.endswith("]"):
            body = line.split(": ", 1)[1]
            found.add((body.split(": ", 1)[0] if ": " in body else "", line.rsplit("[", 1)[1][:-1]))
    return found


# --------------------------------------------------------------------------- citations are data


@pytest.mark.parametrize(
    "attack",
    [
        "cycler.__init__.__globals__.os.popen('touch {marker}').read()",
        "lipsum.__globals__['os'].popen('touch {marker}').read()",
        "'x' * (10**10)",
        "range(10**12) | list",
        "config.items()",
        "self._TemplateReference__context",
        "name.__class__.__mro__",
    ],
)
def test_a_description_cannot_run_code(project: Path, tmp_path: Path, attack: str) -> None:
    marker = tmp_path / "ran"
    data = app_data()
    data["metadata"]["description"] = f"[[ {attack.format(marker=marker)} ]]"
    code, output = build(project, data)
    assert code == 1
    assert ("metadata.description", "render") in rules_at(output)
    assert not marker.exists()


def test_a_description_cannot_read_the_environment(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", CANARY_TOKEN)
    data = app_data()
    data["metadata"]["description"] = "[[ cycler.__init__.__globals__.os.environ.get('HF_TOKEN') ]]"
    code, output = build(project, data)
    assert code == 1 and CANARY_TOKEN not in output
    assert CANARY_TOKEN not in "".join(t.decode() for t in tree_bytes(project / "charts").values())


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("engine.max_model_len // 1024", "128"),
        ("(engine.max_model_len + 1024) / 2048", "64.5"),
        ("-engine.speculative.num_speculative_tokens % 2", "1"),
        ("metadata.categories[0]", "AI"),
        ("engine.trust_remote_code", "true"),
        ("  name  ", "vllmgemma426ba4bvisionone"),
    ],
)
def test_citations_compute_what_they_say(source: str, value: str) -> None:
    spec = load_spec(APPS / "gemma4-vision.yaml")
    assert citations.evaluate(source, spec.model_dump(mode="json")) == value


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("engine.max_model_len * 4294967296 * 4294967296", "2**63"),
        ("engine.max_model_len // 0", "division by zero"),
        ("engine.speculative.model", "engine.speculative is not set"),
        ("engine.nope", "engine.nope is not a field"),
        ("metadata.categories[3]", "has 1 item"),
        ("metadata.categories", "cites a list"),
        ("name * 2", "not a number"),
        ("engine.max_model_len ** 2", "unexpected"),
        ("x" * 201, "at most 200"),
        ("", "empty"),
    ],
)
def test_citations_refuse_what_they_cannot_do(source: str, message: str) -> None:
    context = load_spec(APPS / "gemma4-vision.yaml").model_dump(mode="json")
    context["engine"]["speculative"] = None
    with pytest.raises(citations.CitationError, match=message.replace("*", r"\*")):
        citations.evaluate(source, context)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a [[ name", "without a closing"),
        ("[[ " * 201 + "]]", "nest"),
    ],
)
def test_citation_texts_refuse_markers(text: str, message: str) -> None:
    with pytest.raises(citations.CitationError, match=message):
        citations.render(text, {"name": "x"})


def test_a_missing_cited_section_names_the_field_path(tmp_path: Path) -> None:
    data = app_data()
    del data["engine"]["speculative"]
    data["metadata"]["full_description"] = "drafter [[ engine.speculative.model ]]"
    data["engine"]["max_num_batched_tokens"] = 8192
    with pytest.raises(Exception) as caught:
        render_chart(load_spec(write_spec(tmp_path, data)), "app.yaml")
    problems = caught.value.problems  # type: ignore[attr-defined]
    # every text citing the missing section, the translation too, in one run
    assert {p.path for p in problems} == {"metadata.full_description", "metadata.locales.fr-FR.full_description"}
    assert all("engine.speculative is not set" in p.message for p in problems)


# --------------------------------------------------------------------------- strings are guarded


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        (("metadata", "description"), "one\x00olarespack-version\x00two", "control-character"),
        (("metadata", "title"), "Gemma\x1b[31m", "control-character"),
        (("engine", "extra_args"), ["--x=\x00"], "control-character"),
        (("engine", "served_model_name"), "gemma\nname", "control-character"),
        (("metadata", "full_description"), "rtl \u202e text", "control-character"),
        (("metadata", "icon"), "https://x.example/{{ .Values.x }}.png", "template-marker"),
        (("metadata", "website"), "https://x.example/{{.Values.os.appSecret}}", "template-marker"),
        (("engine", "revision"), "{{ .Values }}", "template-marker"),
        (("engine", "extra_args"), ["--chat-template={{ messages }}"], "template-marker"),
        (("metadata", "description"), "[[ '{' ]]{ .Values.os.appSecret }}", "render"),
        (("engine", "env"), {"AUTH": f"Bearer {CANARY_TOKEN}"}, "secret-in-clear"),
        (("engine", "extra_args"), [f"--header=Authorization: Bearer {CANARY_TOKEN}"], "secret-in-clear"),
        (("metadata", "full_description"), f"token {CANARY_TOKEN}", "secret-in-clear"),
        (("engine", "env"), {"GH": "ghp_" + "a" * 36}, "secret-in-clear"),
        (("metadata", "developer"), "sk-proj-" + "b" * 30, "secret-in-clear"),
        (("metadata", "description"), "x" * 2001, "spec-format"),
        (("engine", "extra_args"), ["--x"] * 65, "spec-format"),
    ],
)
def test_guards_name_the_field(project: Path, field: tuple[str, ...], value: Any, rule: str) -> None:
    data = app_data()
    data[field[0]][field[1]] = value
    code, output = build(project, data)
    assert code == 1
    found = rules_at(output)
    assert any(found_rule == rule and at.startswith(".".join(field)) for at, found_rule in found), output
    assert CANARY_TOKEN not in output


def test_license_url_and_locale_texts_are_guarded(project: Path) -> None:
    data = app_data()
    data["metadata"]["license"][0]["url"] = "https://x.example/{{ .Values.os.appKey }}"
    data["metadata"]["locales"]["fr-FR"]["description"] = "a\x07b"
    code, output = build(project, data)
    assert code == 1
    assert {
        ("metadata.license[0].url", "template-marker"),
        ("metadata.locales.fr-FR.description", "control-character"),
    } <= rules_at(output)


def test_env_values_are_literal_for_kubernetes(tmp_path: Path) -> None:
    data = app_data()
    data["engine"]["env"] = {"FOO": "$(HF_TOKEN)"}
    chart = render_chart(load_spec(write_spec(tmp_path, data)), "app.yaml")
    deployment = yaml.safe_load(chart["templates/deployment.yaml"].replace("{{", "#{{"))
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "FOO", "value": "$$(HF_TOKEN)"} in env


def test_printed_problems_never_carry_a_token() -> None:
    problem = Problem("apps/x.yaml", "version", f"{CANARY_TOKEN!r} is not SemVer", rule="semver")
    assert CANARY_TOKEN not in str(problem) and "hf_Q…[redacted]" in str(problem)


# --------------------------------------------------------------------------- files and numbers


def nested(depth: int) -> str:
    return "metadata:\n  categories: " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize(
    ("mutate", "where", "rule"),
    [
        (
            lambda d: d["engine"]["calibration"].update(available_kv_cache_gib=float("inf")),
            "engine.calibration.available_kv_cache_gib",
            "spec-type",
        ),
        (lambda d: d["engine"].update(max_num_seqs=2**63), "engine.max_num_seqs", "spec-range"),
        (lambda d: d["engine"].update(max_model_len=2**63), "engine.max_model_len", "spec-range"),
        (
            lambda d: d["engine"]["speculative"].update(num_speculative_tokens=10**30),
            "engine.speculative.num_speculative_tokens",
            "spec-range",
        ),
        (lambda d: d["resources"]["memory"].update(limit="9" * 40 + "Ti"), "resources.memory.limit", "quantity"),
    ],
)
def test_numbers_out_of_range_are_messages(project: Path, mutate: Any, where: str, rule: str) -> None:
    data = app_data()
    mutate(data)
    code, output = build(project, data)
    assert code == 1
    assert (where, rule) in rules_at(output), output


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("version: 1.0.0\nchangelog:\n  - version: 1.0.0\n    date: 2026-02-30\n    note: x\n", "yaml"),
        (nested(3000), "yaml"),
        ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b]\n", "yaml"),
        ("name: x\nname: y\n", "yaml"),
        ("- just\n- a list\n", "yaml"),
        ("name: [unclosed\n", "yaml"),
        ("? [a, b]\n: c\n", "spec-type"),
        ("--- {}\n--- {}\n", "yaml"),
        ("x: !!python/object/apply:os.system ['touch /tmp/olarespack-pwned']\n", "yaml"),
    ],
)
def test_malformed_yaml_is_a_message(project: Path, text: str, rule: str) -> None:
    code, output = build(project, text=text)
    assert code == 1
    assert any(found_rule == rule for _, found_rule in rules_at(output)), output
    assert not Path("/tmp/olarespack-pwned").exists()


@pytest.mark.parametrize(("encoding", "message"), [("utf-16", "UTF-16"), ("latin-1", "not UTF-8")])
def test_a_spec_in_another_encoding_is_named(project: Path, encoding: str, message: str) -> None:
    text = (APPS / "gemma4-vision.yaml").read_text(encoding="utf-8")
    code, output = build(project, text=text.encode(encoding, errors="replace"))
    assert code == 1 and message in output and "[encoding]" in output


def test_a_huge_spec_file_is_refused_unread(project: Path) -> None:
    code, output = build(project, text=b"# " + b"x" * (2 << 20))
    assert code == 1 and "larger than 1024 KiB" in output


def test_a_fifo_is_not_a_spec(project: Path) -> None:
    fifo = project / "apps" / "pipe.yaml"
    os.mkfifo(fifo)
    code, output = run("build", str(fifo), cwd=project)
    assert code in (1, 2) and "Traceback" not in output


# --------------------------------------------------------------------------- output folders


def test_out_under_a_regular_file_is_a_usage_error(project: Path) -> None:
    (project / "blocker").write_text("x")
    code, output = run("build", "--out", "blocker/charts", cwd=project)
    assert code == 2 and "--charts-dir" in output and "Traceback" not in output


def test_a_chart_path_that_is_a_file_is_refused_and_left(project: Path) -> None:
    folder = project / "charts" / "vllmgemma426ba4bvisionone"
    import shutil

    shutil.rmtree(folder)
    folder.write_text("mine")
    code, output = run("build", cwd=project)
    assert code == 1 and "is not a folder" in output
    assert folder.read_text() == "mine"
    assert not [p for p in (project / "charts").iterdir() if p.name.startswith(".")]
    folder.unlink()
    code, output = run("build", cwd=project)
    assert code == 0, output
    assert not [p for p in (project / "charts").iterdir() if p.name.startswith(".")]
