"""`olarespack plan --write`: the plan booked in the specs, so each chart carries its share in every place Olares
and HAMi read it (the manifest's GPU request and limit, the pod's nvidia.com/gpumem), and its description can
say it; nothing is written when the plan does not fit or a spec's layout defeats the edit."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, tree_bytes
from olarespack.core.errors import ProblemsError
from olarespack.release.edit import set_gpu_memory

ROOT = Path(__file__).resolve().parents[1]
AUDIO_NAME = "llamacppgemma4audione"


def audio_text(booking: str = "  gpu_memory: {request: 8Gi, limit: 8Gi}\n") -> str:
    """The audio spec with its GPU booking line made `booking`."""
    text = (ROOT / "apps" / "gemma4-audio.yaml").read_text(encoding="utf-8")
    return re.sub(r"^  gpu_memory: .*\n", booking, text, count=1, flags=re.MULTILINE)


def second_llamacpp_app(project: Path) -> Path:
    """The audio app's model again, as another app at 128K without the projector: two llama.cpp apps that
    share an Olares One (the pair the device co-run measured)."""
    source = ROOT / "tools" / "llamacpp_cuda" / "corun" / "e4b-128k.yaml"
    target = project / "apps" / "e4b-128k.yaml"
    shutil.copyfile(source, target)
    return target


def box(project: Path, *apps: str, hardware: str = "rtx5090-laptop") -> Path:
    path = project / "boxes" / "box.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"hardware: {hardware}\napps:\n" + "".join(f"  - ../apps/{a}\n" for a in apps), encoding="utf-8")
    return path


def shares(project: Path, box_file: Path) -> dict[str, int]:
    code, out = run_cli(project, "plan", "--box", str(box_file), "--json")
    assert code == 0, out
    data = yaml.safe_load(out[out.index("{") :])
    return {app["name"]: app["gpu_memory_bytes"] // 2**20 for app in data["apps"]}


def test_the_written_plan_is_carried_alike_in_every_place_of_the_charts(project: Path) -> None:
    second = second_llamacpp_app(project)
    audio = project / "apps" / "gemma4-audio.yaml"
    text = audio_text()  # booking 8Gi, as before the plan; its description cites the booking
    assert "It books [[ resources.gpu_memory.request ]] of GPU memory" in text
    audio.write_text(text, encoding="utf-8")
    box_file = box(project, "gemma4-audio.yaml", "e4b-128k.yaml")
    planned = shares(project, box_file)
    assert planned[AUDIO_NAME] < 8192 and planned["llamacppe4blongone"] < 8192
    code, out = run_cli(project, "plan", "--box", str(box_file), "--write")
    assert code == 0, out
    assert f"{audio}: updated" in out and f"{second}: updated" in out
    written = audio.read_text(encoding="utf-8")
    # one line changed, the comments kept, the line naming the plan it came from
    before, after = text.splitlines(), written.splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    share = planned[AUDIO_NAME]
    assert changed == [
        (
            "  gpu_memory: {request: 8Gi, limit: 8Gi}",
            f"  gpu_memory: {{request: {share}Mi, limit: {share}Mi}}  # share from `olarespack plan --box {box_file}`",
        )
    ]
    # a second run finds the same shares and writes nothing new
    code, out = run_cli(project, "plan", "--box", str(box_file), "--write")
    assert code == 0 and f"{audio}: unchanged" in out
    code, out = run_cli(project, "build", str(audio), str(second))
    assert code == 0, out
    for name in (AUDIO_NAME, "llamacppe4blongone"):
        chart = project / "charts" / name
        manifest = yaml.safe_load((chart / "OlaresManifest.yaml").read_text(encoding="utf-8"))
        (accelerator,) = manifest["spec"]["accelerator"]
        assert accelerator["mode"] == "nvidia"
        assert accelerator["requiredGPUMemory"] == accelerator["limitedGPUMemory"] == f"{planned[name]}Mi"
        deployment = (chart / "templates" / "deployment.yaml").read_text(encoding="utf-8")
        assert re.findall(r"nvidia\.com/gpumem: (\d+)", deployment) == [str(planned[name])] * 2
    described = yaml.safe_load((project / "charts" / AUDIO_NAME / "OlaresManifest.yaml").read_text(encoding="utf-8"))
    assert f"It books {share}Mi of GPU memory" in described["spec"]["fullDescription"]


def test_a_plan_that_does_not_fit_writes_nothing(project: Path) -> None:
    box_file = box(project, "gemma4-audio.yaml", "gemma4-vision.yaml")
    before = tree_bytes(project / "apps")
    code, out = run_cli(project, "plan", "--box", str(box_file), "--write")
    assert code == 1
    assert "the plan does not fit: no spec written" in out and "DOES NOT FIT" in out
    assert tree_bytes(project / "apps") == before


def test_a_missing_booking_is_added_as_the_last_key_of_resources() -> None:
    text = audio_text("")
    written = set_gpu_memory(Path("a.yaml"), text, 5871, "why")
    data = yaml.safe_load(written)
    assert data["resources"]["gpu_memory"] == {"request": "5871Mi", "limit": "5871Mi"}
    assert "  disk: {request: 10Gi, limit: 15Gi}\n  gpu_memory: {request: 5871Mi, limit: 5871Mi}  # why\n" in written


def test_a_block_booking_is_replaced_whole() -> None:
    text = audio_text("  gpu_memory:\n    request: 8Gi  # the old booking\n    limit: 8Gi\n")
    written = set_gpu_memory(Path("a.yaml"), text, 4669, "why")
    assert yaml.safe_load(written) == {
        **yaml.safe_load(text),
        "resources": {**yaml.safe_load(text)["resources"], "gpu_memory": {"request": "4669Mi", "limit": "4669Mi"}},
    }
    assert "the old booking" not in written and written.count("\n") == text.count("\n") - 2


@pytest.mark.parametrize(
    "layout",
    [
        "resources: {cpu: {request: 2, limit: 16}, memory: {request: 4Gi, limit: 16Gi},\n"
        "            disk: {request: 10Gi, limit: 15Gi}}\n",
        "resources: null\n",
    ],
)
def test_a_layout_the_edit_cannot_keep_is_refused(layout: str) -> None:
    text = audio_text()
    start = text.index("resources:\n")
    end = text.index("\nchangelog:")
    with pytest.raises(ProblemsError) as refused:
        set_gpu_memory(Path("a.yaml"), text[:start] + layout + text[end:], 4669, "why")
    (problem,) = refused.value.problems
    assert problem.rule == "plan" and problem.path == "resources.gpu_memory"


def test_write_books_shares_only_for_the_hardware_the_specs_target(project: Path) -> None:
    box_file = box(project, "gemma4-audio.yaml", hardware="rtx5090")  # the spec targets rtx5090-laptop
    before = tree_bytes(project / "apps")
    code, out = run_cli(project, "plan", "--box", str(box_file), "--write")
    assert code == 2 and "targets rtx5090-laptop, the plan rtx5090" in out
    assert tree_bytes(project / "apps") == before


def test_a_linked_spec_is_refused_before_any_spec_is_written(project: Path) -> None:
    second = second_llamacpp_app(project)
    link = project / "apps" / "linked.yaml"
    link.symlink_to(second)
    box_file = box(project, "gemma4-audio.yaml", "linked.yaml")
    before = tree_bytes(project / "apps")
    code, out = run_cli(project, "plan", "--box", str(box_file), "--write")
    assert code == 1 and "not a regular file: its share cannot be written in place" in out
    assert tree_bytes(project / "apps") == before


def test_the_plans_name_in_the_comment_does_not_depend_on_how_its_path_was_typed(project: Path) -> None:
    box(project, "gemma4-audio.yaml")
    code, out = run_cli(project, "plan", "--box", "./boxes/box.yaml", "--write")
    assert code == 0 and "updated" in out
    code, out = run_cli(project, "plan", "--box", "boxes/box.yaml", "--write")
    assert code == 0 and "unchanged" in out
