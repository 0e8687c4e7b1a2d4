"""`olarespack outdated` on a scratch git repository holding the project's apps and charts: the newer engine
releases the tables know, the image of the newest that starts on the box, and the move planned as bump plans it,
with nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import git, tree_bytes
from olarespack.cli import main
from olarespack.engines.llamacpp.cuda import image_at as llama_image_at
from olarespack.engines.vllm.cuda import image_at as vllm_image_at

pytestmark = pytest.mark.helm
NEWEST_LLAMA = "b11549"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_shipped_apps_are_told_their_newer_releases_and_the_image_that_starts(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(repo.parent / "empty-cache"))  # no engine build here
    before = tree_bytes(repo / "apps"), tree_bytes(repo / "charts")
    code, out, err = run("outdated", "--json")
    assert code == 1, err  # an upgrade is available
    apps = {app["app"]: app for app in json.loads(out)["apps"]}
    audio = apps["llamacppgemma4audione"]
    assert audio["release"] == "b9101"
    newest = audio["newer"][0]
    assert newest["release"] == NEWEST_LLAMA and newest["evaluated"] and newest["movable"]
    # the audio app's cuda13 flavour is CUDA 13.4.1 at that build: the cuda12 image is the one an Olares One runs
    assert newest["image"] == f"ghcr.io/ggml-org/llama.cpp:server-cuda12-{NEWEST_LLAMA}"
    assert "memory locking is now --load-mode mmap+mlock" in newest["note"]
    # nothing here boots that build: said, with how to build it, so the move is not taken as smoke-tested
    assert any(
        reason.startswith("not booted here by `olarespack smoke`: no CPU llama-server b")
        and "tools/engine_releases/llama_server.py --build" in reason
        for reason in newest["reasons"]
    )
    assert all(not c["evaluated"] for c in audio["newer"][1:])  # only the newest is planned without --all
    # vLLM 0.34 sizes its KV cache with CUDA virtual memory, which HAMi crashes on: a move there is refused with
    # that reason, and the plan goes on down to the first release the app can move to
    for name in ("vllmgemma4dflashone", "vllmgemma426ba4bvisionone"):
        newest_vllm = apps[name]["newer"][0]
        assert newest_vllm["release"] == "0.34" and not newest_vllm["movable"], newest_vllm
        assert any("HAMi-core #187" in reason for reason in newest_vllm["reasons"]), newest_vllm["reasons"]
    # the DFlash move keeps every setting but leaves the context far less room: its note says so
    dflash = apps["vllmgemma4dflashone"]["newer"][1]
    assert (
        dflash["release"] == "0.33"
        and dflash["movable"]
        and re.search(r"GPU memory left over by olarespack's fit: 0\.\d\d GiB -> 0\.\d\d GiB", dflash["note"])
    ), dflash["note"]
    vision = apps["vllmgemma426ba4bvisionone"]["newer"][1]
    assert vision["release"] == "0.33" and not vision["movable"]
    assert any("engine.async_scheduling: false keeps the context" in reason for reason in vision["reasons"])
    # a newest release the app cannot run does not hide an older one it can: planned down to the first movable
    # (outdated said "up to date" for the vision app, exit 0, although 0.22 to 0.25 can move)
    planned = [c for c in apps["vllmgemma426ba4bvisionone"]["newer"] if c["evaluated"]]
    assert planned[-1]["movable"] and not any(c["movable"] for c in planned[:-1])
    assert planned[-1]["release"] == "0.25" and all(
        not c["evaluated"] for c in apps["vllmgemma426ba4bvisionone"]["newer"][len(planned) :]
    )
    assert (tree_bytes(repo / "apps"), tree_bytes(repo / "charts")) == before  # nothing written
    code, out, _ = run("outdated", "apps/gemma4-audio.yaml")
    assert code == 1
    assert (
        f"`olarespack bump apps/gemma4-audio.yaml --image ghcr.io/ggml-org/llama.cpp:server-cuda12-{NEWEST_LLAMA}`"
        in out
        and out.rstrip().endswith("upgrades available")
    )


def test_the_proposed_move_is_what_bump_then_does(repo: Path) -> None:
    code, out, _ = run("outdated", "apps/gemma4-audio.yaml", "--json")
    [app] = json.loads(out)["apps"]
    proposal = app["newer"][0]
    code, out, err = run("bump", "apps/gemma4-audio.yaml", "--image", proposal["image"])
    assert code == 0, err
    assert proposal["note"] in out
    git(repo, "commit", "-qam", "audio on the newest build")
    code, out, err = run("outdated", "apps/gemma4-audio.yaml")
    assert code == 0, out + err
    assert "up to date with the release tables" in out and out.rstrip().endswith("up to date")


def test_every_newer_release_is_planned_with_all(repo: Path) -> None:
    _, out, _ = run("outdated", "apps/gemma4-audio.yaml", "--all", "--json")
    [app] = json.loads(out)["apps"]
    assert len(app["newer"]) > 1 and all(c["evaluated"] for c in app["newer"])
    assert all(c["movable"] or c["reasons"] for c in app["newer"])


def test_the_image_of_another_release_keeps_the_flavour() -> None:
    assert (
        llama_image_at("ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101", "b11434")
        == "ghcr.io/ggml-org/llama.cpp:server-cuda13-b11434"
    )
    assert (
        llama_image_at("ghcr.io/ggml-org/llama.cpp:server-b9101", "b11434")
        == "ghcr.io/ggml-org/llama.cpp:server-b11434"
    )
    assert llama_image_at("example/llama:custom", "b11434") is None
    assert vllm_image_at("vllm/vllm-openai:v0.21.0-cu129", "0.25") == "vllm/vllm-openai:v0.25.0-cu129"
    # 0.33 publishes no -cu129 tag the tables know: its default image
    assert vllm_image_at("vllm/vllm-openai:v0.21.0-cu129", "0.33") == "vllm/vllm-openai:v0.33.0"
