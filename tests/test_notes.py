"""bump's default upgrade note: settings in people's words, each once, then what a box sees."""

from __future__ import annotations

from typing import Any

from olarespack.release.diff import AppDiff, ResourceChange
from olarespack.release.notes import upgrade_note


def deployment(
    args: list[str],
    env: dict[str, str] | None = None,
    image: str = "vllm/vllm-openai:v0.21.0-cu129",
    memory: str = "40Gi",
) -> dict[str, Any]:
    container = {
        "name": "vllm",
        "image": image,
        "args": args,
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        "resources": {"limits": {"memory": memory}, "requests": {"memory": "24Gi"}},
    }
    return {"kind": "Deployment", "spec": {"template": {"spec": {"containers": [container]}}}}


def diff(*changes: ResourceChange) -> AppDiff:
    return AppDiff("app", "apps/app.yaml", "1.0.0", "1.0.0", changes)


def changed(old: dict[str, Any], new: dict[str, Any]) -> ResourceChange:
    return ResourceChange("Deployment/app", "changed", ("...",), old, new)


MANIFESTS = (
    ResourceChange("OlaresManifest.yaml", "changed", ("...",)),
    ResourceChange("i18n/en-US/OlaresManifest.yaml", "changed", ("...",)),
    ResourceChange("Chart.yaml", "changed", ("...",)),
)


def test_a_context_change_reads_as_people_say_it_and_once() -> None:
    old = deployment(["org/model", "--max-model-len", "131072", "--gpu-memory-utilization", "0.94"])
    new = deployment(["org/model", "--max-model-len", "163840", "--gpu-memory-utilization", "0.94"])
    note = upgrade_note(diff(changed(old, new), *MANIFESTS))
    assert note == "Context 128K -> 160K. Upgrading restarts the app; the downloaded model files are kept."
    assert "Chart.yaml" not in note and "--" not in note


def test_speculative_settings_are_read_from_the_env_the_args_cite() -> None:
    args = ["org/model", "--speculative-config", "$(SPEC_CONFIG)"]
    old = deployment(args, {"SPEC_CONFIG": '{"method":"dflash","model":"z-lab/d","num_speculative_tokens":13}'})
    new = deployment(args, {"SPEC_CONFIG": '{"method":"dflash","model":"z-lab/d","num_speculative_tokens":8}'})
    assert upgrade_note(diff(changed(old, new))).startswith("Speculative decoding: 13 -> 8 tokens.")


def test_a_new_model_says_it_downloads_and_an_image_names_its_release() -> None:
    old = deployment(["org/model-a", "--max-model-len", "8192"])
    new = deployment(["org/model-b", "--max-model-len", "8192"], image="vllm/vllm-openai:v0.22.0-cu129", memory="48Gi")
    note = upgrade_note(diff(changed(old, new)))
    assert "Engine image v0.21.0-cu129 -> v0.22.0-cu129" in note
    assert "Model org/model-a -> org/model-b" in note and "Memory limit 40Gi -> 48Gi" in note
    assert note.endswith("the new model files download on its first start.")


def test_descriptions_alone_restart_nothing() -> None:
    assert upgrade_note(diff(*MANIFESTS)) == "Description and market details updated."


def test_a_measured_figure_beside_a_changed_setting_is_flagged() -> None:
    from olarespack.release.notes import stale_figures

    manifest = ResourceChange(
        "OlaresManifest.yaml",
        "changed",
        (
            "--- a/OlaresManifest.yaml",
            "+++ b/OlaresManifest.yaml",
            "@@ -5,3 +5,3 @@",
            '-  description: "Gemma 4 26B: 250 t/s at 128K context on Olares One"',
            '+  description: "Gemma 4 26B: 250 t/s at 160K context on Olares One"',
            "-  title: Old",
            "+  title: New",
        ),
    )
    [warning] = stale_figures(diff(manifest))
    assert "250 t/s stays beside a changed setting (128K -> 160K)" in warning
    assert warning.startswith("apps/app.yaml: OlaresManifest.yaml:")
    remeasured = ResourceChange(
        "OlaresManifest.yaml",
        "changed",
        ('-  description: "250 t/s at 128K context"', '+  description: "231 t/s at 160K context"'),
    )
    assert stale_figures(diff(remeasured)) == []


def test_an_app_new_at_the_base_is_its_first_release() -> None:
    new = AppDiff("app", "apps/app.yaml", None, "1.0.0", MANIFESTS)
    assert upgrade_note(new) == "First release of this app in this market."
