"""The rendered charts through the real pinned helm (3.19, what Olares embeds, and 4.1), with the values
Olares injects, then the rendered manifests checked against Olares' rules and Kubernetes 1.34 schemas."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from conftest import APP_FILES, APPS
from olarespack.core import quantity
from olarespack.helm import HelmBinary, find_binary, values_file
from olarespack.olares.generations import GenerationName
from olarespack.olares.values import olares_values
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import write_chart
from test_render import SEED_VISION_ARGS, as_pairs

pytestmark = pytest.mark.helm

HELMS = [name for name in ("helm", "helm4") if find_binary(name)]
TOKEN = "hf_secret_value_for_tests"


@pytest.fixture(scope="module", params=HELMS)
def helm(request: pytest.FixtureRequest) -> HelmBinary:
    return HelmBinary(name=request.param)


def test_the_pinned_helm_is_installed() -> None:
    assert "helm" in HELMS, "run `make build`: it installs the pinned helm into .venv/bin"
    assert HelmBinary(name="helm").version == "v3.19.0"
    assert HelmBinary(name="helm4").version == "v4.1.4"


def rendered(tmp_path: Path, spec_file: Path, generation: GenerationName) -> tuple[Path, dict[str, Any]]:
    spec = load_spec(spec_file)
    folder = tmp_path / spec.name
    write_chart(render_chart(spec, str(spec_file), generation), folder)
    return folder, yaml.safe_load((folder / "OlaresManifest.yaml").read_text(encoding="utf-8"))


def template(helm: HelmBinary, chart: Path, env: dict[str, str] | None) -> list[dict[str, Any]]:
    namespace = f"{chart.name}-alice"
    with values_file({**olares_values(chart.name), **({"olaresEnv": env} if env else {})}) as values:
        lint = helm.lint(chart, values)
        assert lint.ok, lint.stdout + lint.stderr
        out = helm.template(chart, chart.name, namespace, values)
    assert out.ok, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def olares_env(manifest: dict[str, Any], token: bool) -> dict[str, str]:
    names = [e["envName"] for e in manifest["envs"]]
    endpoint, token_name = names
    return {endpoint: "https://hf-mirror.example", **({token_name: TOKEN} if token else {})}


def containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    pod = deployment["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


@pytest.mark.parametrize("generation", ["current", "legacy"])
@pytest.mark.parametrize("spec_file", APP_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("with_token", [False, True], ids=["no-token", "token"])
def test_chart_installs_as_olares_would(
    tmp_path: Path, helm: HelmBinary, spec_file: Path, generation: GenerationName, with_token: bool
) -> None:
    chart, manifest = rendered(tmp_path, spec_file, generation)
    app = chart.name
    docs = template(helm, chart, olares_env(manifest, with_token))
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Deployment", app) in kinds and ("Service", app) in kinds
    assert (("Secret", f"{app}-hf") in kinds) is with_token
    # args are literal and the server mounts no ConfigMap: a change restarts the pod; the one ConfigMap is the
    # downloader's script, which only a starting pod's init container reads
    pod_spec = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    configmaps = {v["name"]: v["configMap"]["name"] for v in pod_spec["volumes"] if "configMap" in v}
    assert {name for kind, name in kinds if kind == "ConfigMap"} == set(configmaps.values())
    assert not {m["name"] for c in pod_spec["containers"] for m in c["volumeMounts"]} & set(configmaps)
    assert set(configmaps.values()) <= {f"{app}-model-downloader"}
    for doc in docs:
        assert doc["metadata"]["namespace"] == f"{app}-alice", doc["kind"]
        kubernetes_validate.validate(doc, "1.34.0", strict=True)

    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    # Olares' webhook injects the GPU into the engine's container, not into the downloader
    assert (
        deployment["metadata"]["annotations"]["applications.app.bytetrade.io/gpu-inject"]
        == deployment["spec"]["template"]["spec"]["containers"][0]["name"]
    )
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "hostPath" in v]
    assert volume["hostPath"]["path"] == f"/olares/userspace/alice/Data/{app}/models"
    assert manifest["permission"]["appData"] is True

    # what the pod needs as Kubernetes counts it (app containers summed, init containers run alone
    # before them) is exactly what the manifest declares
    declared = manifest["spec"]["accelerator"][0] if generation == "current" else manifest["spec"]
    amounts: dict[tuple[str, str, str], list[int]] = {}
    for group in ("initContainers", "containers"):
        for container in pod.get(group, []):
            res = container["resources"]
            for side in ("requests", "limits"):
                amounts.setdefault((group, side, "cpu"), []).append(quantity.parse_cpu(res[side]["cpu"]))
                amounts.setdefault((group, side, "memory"), []).append(quantity.parse_bytes(res[side]["memory"]))
            assert quantity.parse_cpu(res["requests"]["cpu"]) <= quantity.parse_cpu(res["limits"]["cpu"])
            assert quantity.parse_bytes(res["requests"]["memory"]) <= quantity.parse_bytes(res["limits"]["memory"])

    def pod_needs(side: str, resource: str) -> int:
        return max(sum(amounts[("containers", side, resource)]), *amounts.get(("initContainers", side, resource), [0]))

    assert pod_needs("requests", "cpu") == quantity.parse_cpu(declared["requiredCpu"])
    assert pod_needs("limits", "cpu") == quantity.parse_cpu(declared["limitedCpu"])
    assert pod_needs("requests", "memory") == quantity.parse_bytes(declared["requiredMemory"])
    assert pod_needs("limits", "memory") == quantity.parse_bytes(declared["limitedMemory"])

    engine = pod["containers"][0]
    if generation == "current":
        gpu_mib = quantity.mib(quantity.parse_bytes(declared["requiredGPUMemory"]))
        assert declared["limitedGPUMemory"] == declared["requiredGPUMemory"]
        # requests = limits = requiredGPUMemory, the limit Olares' webhook sets: a bare integer of MiB
        assert engine["resources"]["requests"]["nvidia.com/gpumem"] == gpu_mib
        assert engine["resources"]["limits"]["nvidia.com/gpumem"] == gpu_mib
    else:
        assert engine["resources"]["limits"]["nvidia.com/gpu"] == "1"
        env = {e["name"]: e.get("value") for e in engine["env"]}
        gpu_mib = quantity.mib(quantity.parse_bytes(declared["limitedGpu"]))
        assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{gpu_mib}m"

    startup = engine["startupProbe"]
    assert startup.get("initialDelaySeconds", 0) + startup["periodSeconds"] * startup["failureThreshold"] > 1800

    # the token only ever travels through the Secret
    for doc in docs:
        if doc["kind"] != "Secret":
            assert TOKEN not in yaml.safe_dump(doc)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["huggingface-token"]["secret"] == {
        "secretName": f"{app}-hf",
        "optional": True,
        "defaultMode": 0o400,
        "items": [{"key": "HF_TOKEN", "path": "token"}],
    }
    for container in containers(deployment):
        env = {e["name"]: e for e in container.get("env", [])}
        assert "HF_TOKEN" not in env  # a file, not an env var every process listing shows
        if "HF_TOKEN_PATH" in env:
            assert env["HF_TOKEN_PATH"]["value"] == "/var/run/secrets/huggingface/token"
            mounts = {m["name"]: m for m in container["volumeMounts"]}
            assert mounts["huggingface-token"] == {
                "name": "huggingface-token",
                "mountPath": "/var/run/secrets/huggingface",
                "readOnly": True,
            }
            assert env["HF_ENDPOINT"]["value"] == "https://hf-mirror.example"
    if with_token:
        [secret] = [d for d in docs if d["kind"] == "Secret"]
        assert secret["stringData"] == {"HF_TOKEN": TOKEN}


def test_endpoint_defaults_to_hugging_face(tmp_path: Path, helm: HelmBinary) -> None:
    chart, _ = rendered(tmp_path, APPS / "gemma4-audio.yaml", "current")
    docs = template(helm, chart, None)
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    for container in containers(deployment):
        env = {e["name"]: e for e in container.get("env", [])}
        if "HF_ENDPOINT" in env:
            assert env["HF_ENDPOINT"]["value"] == "https://huggingface.co"


def test_vision_container_runs_the_seed_configuration(tmp_path: Path, helm: HelmBinary) -> None:
    spec_file = next(p for p in APP_FILES if p.stem == "gemma4-vision")
    chart, manifest = rendered(tmp_path, spec_file, "current")
    docs = template(helm, chart, olares_env(manifest, True))
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [engine] = deployment["spec"]["template"]["spec"]["containers"]
    assert engine["image"] == "vllm/vllm-openai:v0.21.0-cu129"
    # what Kubernetes runs: command + args after its expansion ($(VAR) from the container's env, $$ is $)
    values = {e["name"]: e["value"] for e in engine.get("env", []) if "value" in e}
    expanded = [
        re.sub(r"\$\$|\$\((\w+)\)", lambda m: "$" if m.group(0) == "$$" else values.get(m.group(1), m.group(0)), a)
        for a in engine["args"]
    ]
    assert engine["command"] + expanded[:1] == ["vllm", "serve", SEED_VISION_ARGS[0]]
    assert as_pairs(expanded[1:]) == as_pairs(SEED_VISION_ARGS[1:])
    # the speculative-decoding JSON is visible as SPEC_CONFIG in the pod template, the name the seed charts use
    assert "--speculative-config" in engine["args"]
    assert engine["args"][engine["args"].index("--speculative-config") + 1] == "$(SPEC_CONFIG)"
    assert json.loads(values["SPEC_CONFIG"])["method"] == "mtp"  # as the spec types it
