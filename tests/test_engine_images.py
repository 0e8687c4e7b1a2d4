"""Engine images as families (engines/<kind>/images.yaml): a fork's speculative types, drafter flag and KV
cache types reach the command line and the rules; a custom build passes through with a warning. Also the
llama.cpp pieces that came with them: a drafter from another repository, scratch folders, another port,
the drafter-made-for-target rule and a calibration from a llama.cpp boot log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from olarespack.core.errors import SpecError
from olarespack.engines.images import family_of
from olarespack.fit.budget import fit_report
from olarespack.project import load_apps
from olarespack.render import render_chart
from olarespack.render.plan import plan_chart
from olarespack.spec.load import load_spec
from specs import app_data, write_spec
from test_calibrate import LLAMA_LOG

ATOMIC = "docker.io/aamsellem/llamacpp-atomic-mtp:0.1.0"
BUUN = "docker.io/aamsellem/buun-llama-cpp-dflash:0.2.0"


def audio(**engine: Any) -> dict[str, Any]:
    data = app_data("gemma4-audio")
    # the committed description cites the official image's build, which a fork's tag does not name
    data["metadata"]["full_description"] = "Gemma 4 E4B, context [[ engine.ctx_size ]] tokens."
    data["engine"].update(engine)
    return data


def problems(tmp_path: Path, data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """rule -> (field path, severity) of every problem the build's checks find."""
    file = write_spec(tmp_path, data)
    apps, errors = load_apps([file])
    found = {p.rule: (p.path, p.severity) for p in errors}
    for app in apps:
        found.update({p.rule: (p.path, p.severity) for p in app.warnings})
    return found


def test_families_match_images_with_or_without_registry_prefix() -> None:
    assert (
        family_of("llamacpp", "ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101").build_number(
            "ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101"
        )
        == 9101
    )
    assert family_of("llamacpp", ATOMIC).name == family_of("llamacpp", "aamsellem/llamacpp-atomic-mtp:0.1.0").name
    assert family_of("llamacpp", "example.org/me/llama-custom:1") is None
    assert family_of("vllm", "vllm/vllm-openai:v0.21.0-cu129").version


def test_the_fork_names_its_drafter_with_its_own_flag_and_its_own_executable(tmp_path: Path) -> None:
    data = audio(
        image=ATOMIC,
        cache_type_k="turbo3",
        cache_type_v="turbo3",
        speculative={
            "type": "mtp",
            "drafter": {"repo": "AtomicChat/gemma-4-E4B-it-assistant-GGUF", "file": "head.gguf"},
            "draft_max": 8,
            "n_gpu_layers": 99,
            "cache_type_k": "turbo3",
        },
    )
    spec = load_spec(write_spec(tmp_path, data))
    plan = plan_chart(spec, "app.yaml")
    assert plan.command == ["llama-server"]
    args = plan.effective_args
    assert args[args.index("--mtp-head") + 1] == "/models/head.gguf"
    assert args[args.index("--spec-type") + 1] == "mtp"
    assert args[args.index("--n-gpu-layers-draft") + 1] == "99"
    assert args[args.index("--cache-type-k-draft") + 1] == "turbo3"
    assert "--model-draft" not in args
    # the downloader fetches the head from its own repository, next to the model
    deployment = render_chart(spec, "app.yaml")["templates/deployment.yaml"]
    assert "head.gguf /models/head.gguf AtomicChat/gemma-4-E4B-it-assistant-GGUF main" in deployment


def test_cache_and_speculative_types_are_checked_against_the_image(tmp_path: Path) -> None:
    # turbo3 is a fork's cache type: the official image refuses it
    found = problems(tmp_path, audio(cache_type_k="turbo3", flash_attn="on"))
    assert found["llamacpp-cache-type"] == ("engine.cache_type_k", "error")
    assert "llamacpp-cache-type" not in problems(tmp_path, audio(image=ATOMIC, cache_type_k="turbo3", flash_attn="on"))
    # dflash is the buun fork's; draft-mtp arrived in build 9180, after the official b9101
    found = problems(tmp_path, audio(speculative={"type": "dflash"}))
    assert found["llamacpp-spec-type"] == ("engine.speculative.type", "error")
    found = problems(tmp_path, audio(speculative={"type": "draft-mtp"}))
    assert found["llamacpp-spec-type"] == ("engine.speculative.type", "error")
    assert "llamacpp-spec-type" not in problems(
        tmp_path, audio(image="ghcr.io/ggml-org/llama.cpp:server-cuda13-b9200", speculative={"type": "draft-mtp"})
    )
    # a type that reads a drafter file needs one
    found = problems(tmp_path, audio(image=BUUN, speculative={"type": "dflash"}))
    assert found["llamacpp-spec-type"] == ("engine.speculative.drafter", "error")


def test_a_custom_build_passes_through_with_a_warning(tmp_path: Path) -> None:
    data = audio(
        image="example.org/me/llama-custom:1.2",
        command=["/opt/llama/bin/llama-server"],
        cache_type_k="turbo9",
        flash_attn="on",
    )
    found = problems(tmp_path, data)
    assert found["llamacpp-image-family"] == ("engine.image", "warning")
    assert "llamacpp-cache-type" not in found
    spec = load_spec(write_spec(tmp_path, data))
    assert plan_chart(spec, "app.yaml").command == ["/opt/llama/bin/llama-server"]


def test_port_and_scratch_folders_reach_the_pod_the_service_and_the_entrance(tmp_path: Path) -> None:
    spec = load_spec(
        write_spec(tmp_path, audio(port=8000, scratch=["/cache"], extra_args=["--slot-save-path", "/cache"]))
    )
    chart = render_chart(spec, "app.yaml")
    deployment = chart["templates/deployment.yaml"]
    assert '"--port"\n            - "8000"' in deployment
    assert "containerPort: 8000" in deployment and "port: 8000" in chart["templates/service.yaml"]
    assert "port: 8000" in chart["OlaresManifest.yaml"]
    assert '- name: scratch-1\n              mountPath: "/cache"' in deployment
    assert "- name: scratch-1\n          emptyDir: {}" in deployment


@pytest.mark.parametrize("path", ["/models/cache", "/etc", "/proc/x", "relative"])
def test_scratch_folders_stay_off_models_and_system_folders(tmp_path: Path, path: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, audio(scratch=[path])))
    assert "engine.scratch[0]" in str(caught.value)


def test_a_drafter_made_for_another_family_is_refused(tmp_path: Path) -> None:
    data = audio(
        image=BUUN,
        speculative={
            "type": "dflash",
            "drafter": {"repo": "Ardenzard/Qwen3.6-27B-DFlash-GGUF", "file": "Qwen3.6-27B-DFlash-Q4_K_M.gguf"},
        },
    )
    found = problems(tmp_path, data)
    assert found["drafter-target"][0] == "engine.speculative.drafter"


def test_a_llama_cpp_boot_log_calibrates_fit(project: Path) -> None:
    log = project / "boot.log"
    log.write_text(LLAMA_LOG, encoding="utf-8")
    code, output = run_cli(project, "calibrate", "apps/gemma4-audio.yaml", "--log", str(log))
    assert code == 0, output
    spec = load_spec(project / "apps" / "gemma4-audio.yaml")
    assert spec.engine.calibration is not None
    assert spec.engine.calibration.model_buffer_mib["CUDA0"] == pytest.approx(3223.75)
    report = fit_report(spec)
    assert report.overhead_source == "calibrated"
    assert report.weights_bytes == round(3223.75 * 2**20)
    assert report.weights_exact
    code, output = run_cli(project, "fit", "apps/gemma4-audio.yaml", "--json")
    assert json.loads(output)["overhead_source"] == "calibrated"
    # another image: the calibration no longer holds, lint says so and fit goes back to its estimate
    text = (project / "apps" / "gemma4-audio.yaml").read_text(encoding="utf-8")
    (project / "apps" / "gemma4-audio.yaml").write_text(
        text.replace(
            "image: ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101",
            "image: ghcr.io/ggml-org/llama.cpp:server-cuda13-b9200",
            1,
        ),
        encoding="utf-8",
    )
    code, output = run_cli(project, "lint", "apps/gemma4-audio.yaml")
    assert code == 1 and "calibration-stale" in output
    assert fit_report(load_spec(project / "apps" / "gemma4-audio.yaml")).overhead_source == "estimate"


CHAT_TEMPLATE = (
    "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content }}"
    "{%- endfor %}\n{# [[ not a citation ]] #}\n"
)


def test_a_chat_template_is_kept_verbatim_and_mounted_where_the_server_reads_it(tmp_path: Path) -> None:
    spec = load_spec(
        write_spec(tmp_path, audio(chat_template={"path": "/models/chat_template.jinja", "text": CHAT_TEMPLATE}))
    )
    chart = render_chart(spec, "app.yaml")
    assert chart["files/chat-template.jinja"] == CHAT_TEMPLATE
    assert '.Files.Glob "files/chat-template.jinja"' in chart["templates/chat-template.yaml"]
    deployment = chart["templates/deployment.yaml"]
    assert '"--chat-template-file"\n            - "/models/chat_template.jinja"' in deployment
    assert 'subPath: "chat-template.jinja"' in deployment and "checksum/chat-template:" in deployment
    assert "{{ '<|im_start|>'" not in "".join(v for k, v in chart.items() if k.startswith("templates/"))


@pytest.mark.helm
def test_helm_copies_the_chat_template_without_rendering_it(tmp_path: Path) -> None:
    from olarespack.check.render import render_values
    from olarespack.cli.group import helm_binary
    from olarespack.helm import split_rendered, values_file
    from olarespack.write import write_chart

    # a name .helmignore drops (*.bak) must not empty the ConfigMap the pod mounts
    spec = load_spec(
        write_spec(tmp_path, audio(chat_template={"path": "/models/chat_template.bak", "text": CHAT_TEMPLATE}))
    )
    chart = render_chart(spec, "app.yaml")
    write_chart(chart, tmp_path / "chart")
    with values_file(render_values(chart, "nvidia")) as values:
        out = helm_binary().template(tmp_path / "chart", spec.name, "ns", values)
    assert out.ok, out.stderr
    [config] = [
        d
        for _, d, _ in split_rendered(out.stdout)
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == f"{spec.name}-chat-template"
    ]
    assert config["data"] == {"chat-template.jinja": CHAT_TEMPLATE}
    [deployment] = [d for _, d, _ in split_rendered(out.stdout) if d.get("kind") == "Deployment"]
    mounts = deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {
        "name": "chat-template",
        "mountPath": "/models/chat_template.bak",
        "subPath": "chat-template.jinja",
        "readOnly": True,
    } in mounts


@pytest.mark.parametrize("text, rule", [("ok {{ x }}\x07", "control-character"), ("hf_" + "A" * 30, "secret-in-clear")])
def test_a_chat_template_is_still_guarded(tmp_path: Path, text: str, rule: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, audio(chat_template={"path": "/models/t.jinja", "text": text})))
    assert "engine.chat_template.text" in str(caught.value) and rule in str(caught.value)


def test_template_markers_stay_refused_outside_the_chat_template(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, audio(alias="{{ .Values.x }}")))
    assert "engine.alias" in str(caught.value) and "template-marker" in str(caught.value)


@pytest.mark.parametrize("path", ["/models/gemma-4-E4B-it-Q4_K_M.gguf", "/cache/template.jinja"])
def test_a_chat_template_cannot_cover_a_model_file_or_sit_in_a_scratch_folder(tmp_path: Path, path: str) -> None:
    data = audio(scratch=["/cache"], chat_template={"path": path, "text": CHAT_TEMPLATE})
    data["engine"]["model"].pop("saved_as", None)
    found = problems(tmp_path, data)
    assert found["chat-template-path"] == ("engine.chat_template.path", "error")
