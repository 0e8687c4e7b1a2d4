"""In-place edits of spec files (calibrate, bench --record, plan --write, bump, bump --image) go through one
path (spec/inplace.py): the file keeps its line endings, and two editors of one spec at once (real processes)
both land, the second waiting for the first."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import APPS, git, run_cli
from olarespack.core.errors import ProblemsError
from olarespack.spec.inplace import editing, newline_of, read_spec_text, write_spec_text
from test_calibrate import LLAMA_LOG, VLLM_LOG

AUDIO = "apps/gemma4-audio.yaml"
VISION = "apps/gemma4-vision.yaml"
BOX = "hardware: rtx5090-laptop\napps:\n  - ../apps/gemma4-audio.yaml\n"


def with_newlines(path: Path, newline: str) -> None:
    path.write_bytes(path.read_bytes().replace(b"\n", newline.encode()))


def assert_line_ends(data: bytes, newline: str) -> None:
    """Every line of the file ends as `newline` does, and nothing else breaks a line."""
    rest = data.replace(newline.encode(), b"")
    assert b"\r" not in rest and b"\n" not in rest, [line for line in re.split(rb"\r\n|\r|\n", data)][:3]


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_calibrate_and_plan_write_keep_the_files_line_endings(project: Path, newline: str) -> None:
    audio = project / AUDIO
    audio.write_text(
        re.sub(
            r"^  gpu_memory: .*\n",
            "  gpu_memory: {request: 8Gi, limit: 8Gi}\n",
            audio.read_text(encoding="utf-8"),
            count=1,
            flags=re.M,
        ),
        encoding="utf-8",
    )
    with_newlines(audio, newline)
    (project / "boot.log").write_text(LLAMA_LOG, encoding="utf-8")
    code, out = run_cli(project, "calibrate", AUDIO, "--log", "boot.log")
    assert code == 0, out
    assert_line_ends(audio.read_bytes(), newline)
    (project / "boxes").mkdir()
    (project / "boxes" / "box.yaml").write_text(BOX, encoding="utf-8")
    code, out = run_cli(project, "plan", "--box", "boxes/box.yaml", "--write")
    assert code == 0, out
    data = audio.read_bytes()
    assert_line_ends(data, newline)
    text = data.decode().replace(newline, "\n")
    assert "  calibration:\n" in text and "# share from `" in text and "limit: 8Gi" not in text


@pytest.mark.helm
@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_bump_and_bump_image_keep_the_files_line_endings(repo: Path, newline: str) -> None:
    spec = repo / VISION
    with_newlines(spec, newline)
    git(repo, "commit", "-qam", "a CRLF spec")
    code, out = run_cli(repo, "bump", "--patch", VISION, "--note", "Same app, new text")
    assert code == 0, out
    assert_line_ends(spec.read_bytes(), newline)
    git(repo, "commit", "-qam", "the patch release")
    code, out = run_cli(repo, "bump", VISION, "--image", "vllm/vllm-openai:v0.22.0")
    assert code == 0, out
    data = spec.read_bytes()
    assert_line_ends(data, newline)
    assert b"image: vllm/vllm-openai:v0.22.0" + newline.encode() in data
    # the review diff shows only what the edits changed, not every line
    changed = git(repo, "diff", "--numstat", "HEAD", "--", VISION).split()[:2]
    assert int(changed[0]) < 20 and int(changed[1]) < 10, changed


def test_the_shared_path_keeps_line_endings_and_a_bom(tmp_path: Path) -> None:
    assert (newline_of(b"a\r\nb\r\n"), newline_of(b"a\rb\r"), newline_of(b"a\nb\n"), newline_of(b"")) == (
        "\r\n",
        "\r",
        "\n",
        "\n",
    )
    spec = tmp_path / "s.yaml"
    spec.write_bytes(b"\xef\xbb\xbfname: x\r\nversion: 1.0.0\r\n")
    with editing(spec):
        text = read_spec_text(spec)
        assert text == "name: x\nversion: 1.0.0\n"
        write_spec_text(spec, text.replace("1.0.0", "1.0.1"))
    assert spec.read_bytes() == b"\xef\xbb\xbfname: x\r\nversion: 1.0.1\r\n"
    with pytest.raises(RuntimeError):  # an editor that forgot the lock is a bug, caught before it writes
        write_spec_text(spec, text)


def test_a_second_editor_waits_with_a_bound_then_says_why(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\n", encoding="utf-8")
    with open(spec, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        start = time.monotonic()
        with pytest.raises(ProblemsError) as refused, editing(spec, wait=0.3):
            pass
        assert 0.3 <= time.monotonic() - start < 5
    assert "another olarespack command has been editing this spec" in str(refused.value)
    assert "nothing was written" in str(refused.value)


def olarespack(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """The real command in its own process, as two terminals (or a CI job and a person) would run it."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from olarespack.cli import main; sys.argv[0] = 'olarespack'; main()",
            *args,
        ],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_an_editor_waits_for_the_one_holding_the_spec(project: Path) -> None:
    # the test is an editor that read the spec first and writes its edit 10 s later; calibrate, started in
    # between, must wait for it and then edit the text with that edit in it (without the lock it writes first
    # and the test's write drops the calibration)
    spec = project / VISION
    (project / "boot.log").write_text(VLLM_LOG, encoding="utf-8")
    with editing(spec):
        text = read_spec_text(spec)
        proc = olarespack(project, "calibrate", VISION, "--log", "boot.log")
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        write_spec_text(spec, text.replace("max_num_seqs: 4", "max_num_seqs: 3"))
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, out
    after = spec.read_text(encoding="utf-8")
    assert "max_num_seqs: 3" in after and "available_kv_cache_gib: 2.45" in after, out


@pytest.mark.parametrize("trial", range(3))
def test_calibrate_and_plan_write_at_once_both_land(project: Path, trial: int) -> None:
    audio = project / AUDIO
    audio.write_text(
        re.sub(
            r"^  gpu_memory: .*\n",
            "  gpu_memory: {request: 8Gi, limit: 8Gi}\n",
            audio.read_text(encoding="utf-8"),
            count=1,
            flags=re.M,
        ),
        encoding="utf-8",
    )
    (project / "boot.log").write_text(LLAMA_LOG, encoding="utf-8")
    (project / "boxes").mkdir()
    (project / "boxes" / "box.yaml").write_text(BOX, encoding="utf-8")
    first = olarespack(project, "calibrate", AUDIO, "--log", "boot.log")
    second = olarespack(project, "plan", "--box", "boxes/box.yaml", "--write")
    outs = [proc.communicate(timeout=180)[0] for proc in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outs
    text = audio.read_text(encoding="utf-8")
    assert "  calibration:\n" in text, outs  # calibrate's edit
    assert "# share from `" in text and "limit: 8Gi" not in text, outs  # plan's edit
    assert text.startswith((APPS / "gemma4-audio.yaml").read_text(encoding="utf-8").split("\nresources:")[0][:200])
