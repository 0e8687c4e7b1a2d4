"""One run shows every layer's problems: the spec's own rules, the engine's, and every citation of every
description, each naming the field the author changes (a citation of a value derived from a field names
that field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import APPS, run_cli, spec_version
from olarespack.spec import citations

VISION = (APPS / "gemma4-vision.yaml").read_text(encoding="utf-8")


def found(output: str) -> set[tuple[str, str]]:
    """(field path, rule) of every ERROR or FAIL line naming a field."""
    out = set()
    for line in output.splitlines():
        if line.startswith(("ERROR ", "FAIL ")) and line.endswith("]") and line.count(": ") >= 2:
            body = line.split(": ", 1)[1]
            out.add((body.split(": ", 1)[0], line.rsplit("[", 1)[1][:-1]))
    return out


def floating(text: str) -> str:
    """The vision app with a floating image and two citations of fields that do not exist."""
    text = text.replace("image: vllm/vllm-openai:v0.21.0-cu129\n  model:", "image: vllm/vllm-openai:latest\n  model:")
    text = text.replace("K context on Olares One\n", "K context on Olares One [[ engine.nope ]]\n", 1)
    text = text.replace("with no slow runs.\n", "with no slow runs. [[ metadata.bogus ]]\n", 1)
    assert text.count("[[ engine.nope ]]") == text.count("[[ metadata.bogus ]]") == 1
    return text


EXPECTED = {
    ("engine.image", "image-floating-tag"),
    ("engine.image", "render"),  # [[ engine_version ]] derives from the image's tag
    ("engine.calibration", "calibration-stale"),
    ("metadata.description", "render"),
    ("metadata.full_description", "render"),
}


@pytest.mark.parametrize("command", ["lint", "build"])
def test_every_problem_of_every_layer_in_one_run(tmp_path: Path, command: str) -> None:
    spec = tmp_path / "x.yaml"
    spec.write_text(floating(VISION), encoding="utf-8")
    args = [command, str(spec)] + (["--out", str(tmp_path / "charts")] if command == "build" else [])
    code, output = run_cli(tmp_path, *args)
    assert code == 1
    assert found(output) >= EXPECTED, output
    derived = next(line for line in output.splitlines() if "engine.image:" in line and "[render]" in line)
    assert "[[ engine_version ]]" in derived and "metadata.full_description" in derived
    assert "set engine.version" in derived and "vllm/vllm-openai:v0.21.0-cu129" in derived
    assert "Traceback" not in output and not (tmp_path / "charts").exists()


def test_the_spec_layer_does_not_hide_the_others(tmp_path: Path) -> None:
    current = spec_version("gemma4-vision")
    raised = f"{int(current.split('.')[0]) + 1}.0.0"  # a version no changelog entry has
    text = floating(VISION).replace(f"version: {current}\nhardware:", f"version: {raised}\nhardware:", 1)
    spec = tmp_path / "x.yaml"
    spec.write_text(text, encoding="utf-8")
    code, output = run_cli(tmp_path, "lint", str(spec))
    assert code == 1
    assert found(output) >= EXPECTED | {("changelog[0].version", "changelog-version")}, output


def test_a_llamacpp_release_is_read_from_its_image(tmp_path: Path) -> None:
    text = (APPS / "gemma4-audio.yaml").read_text(encoding="utf-8")
    text = text.replace("ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101", "ghcr.io/ggml-org/llama.cpp:server-cuda")
    spec = tmp_path / "a.yaml"
    spec.write_text(text, encoding="utf-8")
    code, output = run_cli(tmp_path, "lint", str(spec))
    assert code == 1
    line = next(line for line in output.splitlines() if "engine.image:" in line and "[render]" in line)
    assert "llama.cpp:server-cuda13-b9101" in line and "engine.version" not in line, line


def test_citations_report_every_mistake_of_a_text() -> None:
    text, errors = citations.cite("[[ a ]] [[ b ]] [[ x ]] [[ c.d ]]", {"x": 1, "c": None, "a": None})
    assert text == "[[ a ]] [[ b ]] 1 [[ c.d ]]"
    assert [e.unset for e in errors] == ["a", None, "c"]
    assert "b is not a field" in str(errors[1])


def test_a_warning_shows_beside_the_error_that_refuses_the_spec(tmp_path: Path) -> None:
    # vLLM 0.35 has no release table (a warning saying how to refresh) and its KV arithmetic refuses the
    # 128K context (an error): both in the first run
    spec = tmp_path / "v.yaml"
    spec.write_text(
        VISION.replace("image: vllm/vllm-openai:v0.21.0-cu129\n  model:", "image: vllm/vllm-openai:v0.35.0\n  model:"),
        encoding="utf-8",
    )
    code, output = run_cli(tmp_path, "lint", str(spec))
    assert code == 1
    lines = output.splitlines()
    assert any(line.startswith("ERROR ") and line.endswith("[context-fit]") for line in lines), output
    warning = next(line for line in lines if line.endswith("[engine-release-table]"))
    assert warning.startswith("WARN ") and "0.35" in warning and "refresh" in warning
