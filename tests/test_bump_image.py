"""`olarespack bump SPEC --image REF` on a scratch git repository holding a copy of the project's apps and
charts: the app moves to another engine release, rendered with that release's facts, or nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import semver
import yaml
from click.testing import CliRunner

from conftest import git, spec_version, tree_bytes
from olarespack.cli import main

pytestmark = pytest.mark.helm
AUDIO, VISION = "llamacppgemma4audione", "vllmgemma426ba4bvisionone"
LLAMA = "ghcr.io/ggml-org/llama.cpp:server-cuda13-b{}"
LLAMA12 = "ghcr.io/ggml-org/llama.cpp:server-cuda12-b{}"  # CUDA 12.8.1: starts on every Olares driver
V_AUDIO = spec_version("gemma4-audio")
AUDIO_MINOR = str(semver.Version.parse(V_AUDIO).bump_minor())


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def deployment(repo: Path, name: str) -> str:
    """The rendered Deployment's text (a Helm template: its args are lines `- "ARG"`)."""
    return (repo / f"charts/{name}/templates/deployment.yaml").read_text(encoding="utf-8")


def test_audio_moves_to_b11434_and_back(repo: Path) -> None:
    spec = repo / "apps/gemma4-audio.yaml"
    before = spec.read_text(encoding="utf-8")
    code, out, err = run("bump", "apps/gemma4-audio.yaml", "--image", LLAMA12.format(11434))
    assert code == 0, err
    note = "llama.cpp b9101 -> b11434: memory locking is now --load-mode mmap+mlock"
    assert f"bumped {AUDIO} {V_AUDIO} -> {AUDIO_MINOR}: {note}" in out
    # the flag the build needs for its boot log reaches the production pod: the note people read says so
    assert "the server now runs with --log-verbosity 4" in out
    after = spec.read_text(encoding="utf-8")
    assert after.replace(LLAMA12.format(11434), LLAMA.format(9101)).startswith(
        before.split("changelog:")[0].replace(f"version: {V_AUDIO}", f"version: {AUDIO_MINOR}")
    )
    assert "# where the installed 1.0.0 chart saved the files" in after and "mlock: true" in after
    data = yaml.safe_load(after)
    assert data["version"] == AUDIO_MINOR and data["changelog"][0]["note"].startswith(note)
    assert '- "--mlock"' not in deployment(repo, AUDIO)
    assert '- "--load-mode"\n            - "mmap+mlock"' in deployment(repo, AUDIO)
    # b11434 prints the buffer sizes calibrate reads only at verbosity 4 (libllama's info lines at trace level)
    assert '- "--log-verbosity"\n            - "4"' in deployment(repo, AUDIO)
    assert yaml.safe_load((repo / f"charts/{AUDIO}/Chart.yaml").read_text())["version"] == AUDIO_MINOR
    assert run("build", "--check")[0] == 0
    git(repo, "commit", "-qam", "audio on b11434")
    code, out, err = run("bump", "apps/gemma4-audio.yaml", "--image", "server-cuda13-b9101", "--patch")
    assert code == 0, err
    assert "llama.cpp b11434 -> b9101: memory locking is now --mlock" in out
    assert '- "--mlock"' in deployment(repo, AUDIO) and "--load-mode" not in deployment(repo, AUDIO)
    assert "--log-verbosity" not in deployment(repo, AUDIO)


def test_vision_moves_to_v0_33_with_mtp_and_a_stale_calibration(repo: Path) -> None:
    spec = repo / "apps/gemma4-vision.yaml"
    # 0.33's KV cache for 131072 tokens does not fit the booking (a refusal of its own); a shorter context does
    spec.write_text(
        spec.read_text(encoding="utf-8").replace("max_model_len: 131072", "max_model_len: 65536"), encoding="utf-8"
    )
    git(repo, "commit", "-qam", "vision at 64K")
    code, out, err = run("bump", "apps/gemma4-vision.yaml", "--image", "vllm/vllm-openai:v0.33.0")
    assert code == 0, err
    # the note says what boxes get since the released chart (the context cut before the move is part of this
    # release), in their words, and no internal flag
    assert "vLLM 0.21.0 -> 0.33.0: Context 128K -> 64K. Upgrading restarts the app" in out, out
    assert "is now" not in out and "engine." not in out.split("changelog")[0]
    # the description's "250 t/s at 128K context" now reads "at 64K", beside a figure measured at 128K
    assert "250 t/s stays beside a changed setting (128K -> 64K)" in err, err
    assert "engine.calibration was measured on vllm/vllm-openai:v0.21.0-cu129: commented out as stale" in err
    text = (repo / "apps/gemma4-vision.yaml").read_text(encoding="utf-8")
    assert "calibration" not in yaml.safe_load(text)["engine"]
    assert "  # calibration stale: measured on vllm/vllm-openai:v0.21.0-cu129" in text
    assert "  #   available_kv_cache_gib: 2.82" in text  # the measurement stays readable for the re-measure
    assert 'value: \'{"method":"mtp","model":' in deployment(repo, VISION)
    assert run("build", "--check")[0] == 0


def test_a_move_across_034_says_how_the_box_sizes_its_kv_cache(repo: Path) -> None:
    spec = repo / "apps/gemma4-vision.yaml"
    text = spec.read_text(encoding="utf-8").replace(
        "max_model_len: 131072", "max_model_len: 65536\n  kv_cache_memory_bytes: 2360Mi"
    )
    spec.write_text(text, encoding="utf-8")
    assert run("build", "apps/gemma4-vision.yaml")[0] == 0
    git(repo, "commit", "-qam", "vision at 64K, its KV cache fixed")
    code, out, err = run("bump", "apps/gemma4-vision.yaml", "--image", "vllm/vllm-openai:v0.34.0")
    assert code == 0, err
    assert "vLLM 0.21.0 -> 0.34.0: no setting a box would see changes. From 0.34 on, vLLM sizes the KV cache" in out
    assert "this app fixes it at 2360Mi (kv_cache_memory_bytes), which keeps 0.34's extensible cache off" in out
    assert out.index("extensible cache off") < out.index("Upgrading restarts the app")


@pytest.mark.parametrize(
    ("image", "named"),
    [
        (
            LLAMA.format(9113),
            "engine.speculative.type: --spec-type draft-mtp is not a speculative type of llama.cpp b9113",
        ),
        (
            "vllm/vllm-openai:v0.33.0",
            "engine.image: vllm/vllm-openai:v0.33.0 is a vLLM release image; the spec configures llama.cpp",
        ),
        ("Not An Image", "engine.image: --image 'Not An Image' is not an image reference"),
    ],
)
def test_a_move_the_release_cannot_run_is_refused_and_writes_nothing(repo: Path, image: str, named: str) -> None:
    spec = repo / "apps/gemma4-audio.yaml"
    text = spec.read_text(encoding="utf-8").replace(LLAMA.format(9101), LLAMA.format(11434))
    spec.write_text(
        text.replace("  mlock: true\n", "  mlock: true\n  speculative:\n    type: draft-mtp\n"), encoding="utf-8"
    )
    git(repo, "commit", "-qam", "audio on b11434 drafts with its MTP head")
    before = tree_bytes(repo / "apps"), tree_bytes(repo / "charts")
    code, _, err = run("bump", "apps/gemma4-audio.yaml", "--image", image)
    assert code == 1
    assert f"apps/gemma4-audio.yaml: {named}" in err and "Traceback" not in err
    assert (tree_bytes(repo / "apps"), tree_bytes(repo / "charts")) == before


def test_image_needs_the_specs_it_moves(repo: Path) -> None:
    assert run("bump", "--image", LLAMA.format(11434))[0] == 2


def test_a_stated_engine_release_does_not_outlive_its_image(repo: Path) -> None:
    # the DFlash app's preview image names no release in its tag: engine.version says which vLLM it holds
    spec = repo / "apps/gemma4-dflash.yaml"
    stated = yaml.safe_load(spec.read_text(encoding="utf-8"))["engine"]["version"]
    code, out, err = run("bump", "apps/gemma4-dflash.yaml", "--image", "vllm/vllm-openai:v0.33.0")
    assert code == 0, err
    assert f"vLLM {stated} -> 0.33.0" in out  # the new facts are the tag's, not the old image's release
    text = spec.read_text(encoding="utf-8")
    assert "version" not in yaml.safe_load(text)["engine"]
    assert (
        f"  # version stale: the release inside vllm/vllm-openai:tokenspeed-preview-x86_64-ubuntu2404\n"
        f"  # version: {stated}\n" in text
    )


def test_a_stated_engine_release_is_not_carried_to_an_image_that_names_none(repo: Path) -> None:
    spec = repo / "apps/gemma4-dflash.yaml"
    before = spec.read_text(encoding="utf-8")
    code, out, err = run("bump", "apps/gemma4-dflash.yaml", "--image", "vllm/vllm-openai:preview-2026-11")
    assert code == 1
    assert "engine.version" in out + err and "names no release" in out + err
    assert spec.read_text(encoding="utf-8") == before


def test_a_chart_rebuilt_from_an_unreleased_spec_change_is_no_hand_edit(repo: Path) -> None:
    """A branch with an unreleased spec change, its chart rebuilt by `olarespack build`: the move goes ahead
    (the folder was compared with an empty chart and called hand-edited, so outdated and propose failed)."""
    spec = repo / "apps/gemma4-audio.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("threads: 8", "threads: 6"), encoding="utf-8")
    assert run("build")[0] == 0
    code, _, err = run("bump", "apps/gemma4-audio.yaml", "--image", LLAMA12.format(11434))
    assert code == 0 and "hand" not in err, err
    assert '- "--threads"\n            - "6"' in deployment(repo, AUDIO)
    # a folder edited by hand is still refused
    target = repo / f"charts/{AUDIO}/templates/deployment.yaml"
    target.write_text(target.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    code, _, err = run("bump", "apps/gemma4-audio.yaml", "--image", LLAMA12.format(9101), "--patch")
    assert code == 1 and "edits that are not in the spec" in err, err
