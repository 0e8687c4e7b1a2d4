"""`olarespack plan`: several apps on one GPU, each in the share Olares books for it, by fit's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from olarespack.cli import main
from olarespack.core.hardware import profiles
from olarespack.plan.box import load_apps
from olarespack.plan.shares import MiB, plan

ROOT = Path(__file__).resolve().parents[1]
AUDIO, VISION, DFLASH = (ROOT / "apps" / f"gemma4-{name}.yaml" for name in ("audio", "vision", "dflash"))
BOX = ROOT / "boxes" / "olares-one.yaml"


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["plan", *map(str, args)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def plan_json(*args: str | Path) -> tuple[int, dict[str, Any]]:
    code, out, _ = invoke(*args, "--json")
    return code, json.loads(out)


def fit_json(spec: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["fit", str(spec), "--json", *args], catch_exceptions=False)
    loaded: dict[str, Any] = json.loads(result.stdout)
    return loaded


def apps_of(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    apps = data["apps"]
    assert isinstance(apps, list)
    return {app["name"]: app for app in apps}


@pytest.mark.parametrize("spec", [AUDIO, VISION, DFLASH], ids=lambda p: p.stem)
def test_an_apps_need_is_the_smallest_mib_share_fit_holds_its_context_in(spec: Path) -> None:
    profile, (app,) = load_apps([spec], None)
    result = plan(profile, [app])
    (placed,) = result.apps
    assert result.fits and placed.fits
    need = placed.need_bytes
    assert need is not None and need % MiB == 0 and placed.gpu_memory_bytes == need
    assert app.fit_at(need // MiB).fits and not app.fit_at(need // MiB - 1).fits
    # the same figures `olarespack fit` prints for that share
    at_share = fit_json(spec)  # the spec's own booking
    report = app.fit_at(need // MiB)
    assert report.weights_bytes == at_share["weights_bytes"]
    assert report.kv_cache_needed_bytes == at_share["kv_cache_needed_bytes"]


def test_the_audio_apps_share_is_its_fit_total_rounded_up_to_a_mib() -> None:
    needed = fit_json(AUDIO)["total_needed_bytes"]
    assert isinstance(needed, int)
    code, data = plan_json(AUDIO)
    assert code == 0 and data["fits"] is True
    assert apps_of(data)["llamacppgemma4audione"]["gpu_memory_bytes"] == -(-needed // MiB) * MiB


@pytest.mark.parametrize("pair", [(AUDIO, DFLASH), (AUDIO, VISION), (VISION, DFLASH)], ids=lambda p: p[0].stem)
def test_no_seed_pair_fits_the_laptop_and_the_second_app_is_named_with_its_shortfall(pair: tuple[Path, Path]) -> None:
    code, data = plan_json(*pair)
    assert code == 1 and data["fits"] is False
    first, second = data["apps"]
    assert first["fits"] is True and second["fits"] is False
    left = data["gpu_memory_bytes"] - data["kept_bytes"] - first["gpu_memory_bytes"]
    # what does not fit books nothing: it is shown in what was left for it, never counted as booked
    assert second["gpu_memory_bytes"] == 0 and second["left_bytes"] == left
    assert data["booked_bytes"] == first["gpu_memory_bytes"]
    assert second["shortfall_bytes"] == second["need_bytes"] - left
    assert second["context_fit"] == 0  # neither 26B app's weights fit in what the other leaves
    assert second["kv_cache_available_bytes"] >= 0
    assert second["fits_alone"] is True and data["fit_together"] == [first["name"]]
    code, out, _ = invoke(*pair)
    assert code == 1 and "DOES NOT FIT" in out and f"short of {second['shortfall_bytes'] / 2**30:.2f} GiB" in out
    assert f"these fit together: {first['name']}; leave out {second['name']}" in out
    assert f"fits the card alone: {second['name']}" in out


def test_the_vllm_needs_are_fits_total_over_the_utilization() -> None:
    _, data = plan_json(AUDIO, VISION, DFLASH)
    apps = apps_of(data)
    for spec, name in ((VISION, "vllmgemma426ba4bvisionone"), (DFLASH, "vllmgemma4dflashone")):
        report = fit_json(spec)
        need = apps[name]["need_bytes"]
        assert isinstance(need, int)
        utilization = report["gpu_memory_utilization"]
        assert isinstance(utilization, float)
        # the smallest MiB whose budget (share x utilization) holds weights, non-KV memory and the KV cache
        assert (need - MiB) * utilization < report["total_needed_bytes"] <= need * utilization


def test_the_trio_does_not_fit_the_laptop_and_the_json_adds_up() -> None:
    code, data = plan_json(AUDIO, VISION, DFLASH)
    assert code == 1 and data["fits"] is False and data["hardware"] == "rtx5090-laptop"
    assert data["gpu_memory_bytes"] == profiles()["rtx5090-laptop"].gpu_memory_mib * MiB
    apps = data["apps"]
    assert isinstance(apps, list) and [app["fits"] for app in apps] == [True, False, False]
    for app in apps:
        assert {"name", "gpu_memory_bytes", "context", "fits"} <= app.keys()
    booked = sum(app["gpu_memory_bytes"] for app in apps)
    assert booked == data["booked_bytes"] == apps[0]["gpu_memory_bytes"]
    assert booked + data["kept_bytes"] + data["free_bytes"] == data["gpu_memory_bytes"]
    assert all(app["kv_cache_available_bytes"] >= 0 for app in apps)
    assert data["fit_together"] == [apps[0]["name"]]


def test_a_pair_fits_the_desktop_card_and_leaves_the_rest_free() -> None:
    code, data = plan_json(AUDIO, DFLASH, "--hardware", "rtx5090")
    assert code == 0 and data["fits"] is True and data["hardware"] == "rtx5090"
    apps = apps_of(data)
    assert all(app["gpu_memory_bytes"] == app["need_bytes"] for app in apps.values())
    assert data["free_bytes"] > 0
    code, out, _ = invoke(AUDIO, DFLASH, "--hardware", "rtx5090")
    assert code == 0 and out.rstrip().endswith("fits") and "book " in out


def test_the_box_file_plans_the_seed_apps_in_its_order() -> None:
    code, data = plan_json("--box", BOX)
    assert code == 1
    assert [app["name"] for app in data["apps"]] == [
        "llamacppgemma4audione",
        "vllmgemma426ba4bvisionone",
        "vllmgemma4dflashone",
    ]
    files = [app["file"] for app in data["apps"]]
    assert files == [str(AUDIO), str(VISION), str(DFLASH)]  # relative to the box file's folder, normalised


def test_a_box_file_states_what_the_box_keeps(tmp_path: Path) -> None:
    box = tmp_path / "box.yaml"
    box.write_text(f"hardware: rtx5090\nkeep_mib: 1024\napps: [{AUDIO}]\n", encoding="utf-8")
    code, data = plan_json("--box", box)
    assert code == 0 and data["kept_bytes"] == 1024 * MiB and data["hardware"] == "rtx5090"


def test_a_box_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    box = tmp_path / "box.yaml"
    box.write_text("- apps/gemma4-audio.yaml\n", encoding="utf-8")
    code, out, err = invoke("--box", box)
    assert code == 1 and "box.yaml: a box file must be a YAML mapping" in out + err and "Traceback" not in out + err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("apps: [missing.yaml]\n", "apps[0]: no spec file"),
        ("hardware: gtx480\napps: [x.yaml]\n", "hardware: unknown hardware profile 'gtx480'"),
        ("apps: []\n", "apps: must be a list"),
        ("apps: [a.yaml]\nextra: 1\n", "extra: unknown key"),
        ("keep_mib: -1\napps: [a.yaml]\n", "keep_mib: must be a whole number"),
    ],
)
def test_a_bad_box_file_names_the_field_and_the_fix(tmp_path: Path, text: str, where: str) -> None:
    box = tmp_path / "box.yaml"
    box.write_text(text, encoding="utf-8")
    code, out, err = invoke("--box", box)
    assert code == 1 and f"box.yaml: {where}" in out + err and "(fix: " in out + err


def test_an_unknown_app_file_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = invoke(tmp_path / "nope.yaml")
    assert code == 2 and "nope.yaml" in out + err and "does not exist" in out + err


def test_unknown_hardware_is_a_usage_error() -> None:
    code, out, err = invoke(AUDIO, "--hardware", "gtx480")
    assert code == 2 and "unknown hardware 'gtx480'" in out + err and "rtx5090-laptop" in out + err


def test_nothing_to_plan_is_a_usage_error() -> None:
    code, out, err = invoke()
    assert code == 2 and "give app spec files or --box FILE" in out + err


def test_an_app_listed_twice_is_refused() -> None:
    code, out, err = invoke(AUDIO, AUDIO)
    assert code == 1 and "llamacppgemma4audione is already in the plan" in out + err


def test_the_set_that_fits_together_has_the_most_apps_not_the_first_that_fit() -> None:
    from olarespack.plan.shares import _fitting_set

    # greedy in order would take the 10 alone; the 6 and the 5 fit together
    assert _fitting_set([10, 6, 5], 11) == (1, 2)
    assert _fitting_set([4, None, 4, 4], 8) == (0, 2)  # ties: the earliest apps
    assert _fitting_set([12, 13], 11) == ()
