"""The in-box sweep: `bench sweep SPEC FIELD=V1,V2 --exec` prints the steps that patch the installed app's
Deployment to each value, await its rollout and run the in-box bench; `--responses DIR` reads their logs into the
sweep's table, plot and --write.

The charts are rendered by the real helm and the patches applied by a real RFC 6902 implementation (jsonpatch, as
the API server applies `kubectl patch --type=json`). No cluster runs here: the script itself runs under sh with a
stand-in `kubectl` on PATH that keeps the Deployment in a file, applies the patches to it with jsonpatch, and runs
the exec'd bench loop (sh and curl) against a loopback server standing in for the pod of the value it runs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from conftest import APPS, run_cli
from olarespack.bench.inbox_sweep import render
from test_bench_client import FakeServer, metrics, models, vllm_like
from test_downloader_script import shellcheck

pytestmark = pytest.mark.helm
VISION = APPS / "gemma4-vision.yaml"
APP = "vllmgemma426ba4bvisionone"
FIELD = "engine.speculative.num_speculative_tokens"
needs_sh = pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("sh") is None,
    reason="the steps run under sh, the bench loop with curl; this machine lacks one",
)

# The stand-in for kubectl: the Deployment lives in $FAKE_DEPLOYMENT; `patch --type=json` applies the ops with
# jsonpatch (a failed `test` changes nothing and exits 1, as the API server refuses the patch); `exec` runs the
# command after `--` here, its BENCH_URL pointed at the server of the value the Deployment now runs.
KUBECTL = """#!{python}
import json, os, subprocess, sys
import jsonpatch, jsonpointer
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as calls:
    calls.write(json.dumps(args[:4]) + "\\n")
state = os.environ["FAKE_DEPLOYMENT"]
with open(state) as handle:
    deployment = json.load(handle)

def value(deployment):
    [engine] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
    config = json.loads(next(e["value"] for e in engine["env"] if e["name"] == "SPEC_CONFIG"))
    return str(config["num_speculative_tokens"])

if "patch" in args:
    try:
        patched = jsonpatch.apply_patch(deployment, json.loads(args[args.index("-p") + 1]))
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        print(f"The request is invalid: {{exc}}", file=sys.stderr)
        sys.exit(1)
    if value(patched) == os.environ.get("FAKE_DENIED"):
        print("admission webhook denied the request", file=sys.stderr)
        sys.exit(1)
    if "--dry-run=server" not in args:
        with open(state, "w") as handle:
            json.dump(patched, handle)
    print("deployment.apps/app patched")
elif "rollout" in args:
    if value(deployment) == os.environ.get("FAKE_SLOW"):
        import time
        time.sleep(60)
    if value(deployment) == os.environ.get("FAKE_CRASHING"):
        print("error: timed out waiting for the condition", file=sys.stderr)
        sys.exit(1)
    print("deployment successfully rolled out")
elif "logs" in args:
    print("INFO starting\\nValueError: num_speculative_tokens too large for this drafter")
elif "exec" in args:
    url = json.loads(os.environ["FAKE_URLS"])[value(deployment)]
    command = [f"BENCH_URL={{url}}" if a.startswith("BENCH_URL=") else a for a in args[args.index("--") + 1:]]
    sys.exit(subprocess.run(command).returncode)
"""


@pytest.fixture
def pods() -> Iterator[dict[str, FakeServer]]:
    """A server per value, as the pod of that value would answer: 4 drafted tokens decode faster than 2."""
    made = {}
    for value, pause in (("2", 0.004), ("3", 0.003), ("4", 0.001)):
        counts = {"drafted": 0, "accepted": 0}
        made[value] = FakeServer(
            {
                "GET /v1/models": models(),
                "POST /v1/chat/completions": vllm_like(counts, 3, pause),
                "GET /metrics": metrics(counts),
            }
        )
    yield made
    for server in made.values():
        server.stop()


def steps(spec: Path, values: str = "2,4", *more: str) -> str:
    code, out = run_cli(
        None,
        "bench",
        "sweep",
        str(spec),
        f"{FIELD}={values}",
        "--exec",
        "--user",
        "alice",
        "--runs",
        "2",
        "--warmups",
        "0",
        "--max-tokens",
        "30",
        *more,
    )
    assert code == 0, out
    return out[: out.index("# run it in the box")]


def patches(script: str) -> list[list[dict[str, Any]]]:
    return [
        json.loads(shlex.split(line)[-1])
        for line in script.splitlines()
        if line.lstrip().startswith("kubectl") and " patch deployment " in line and "--dry-run" not in line
    ]


def spec_copy(tmp_path: Path) -> Path:
    spec = tmp_path / "apps" / "gemma4-vision.yaml"
    spec.parent.mkdir()
    shutil.copy(VISION, spec)
    return spec


def rendered(tmp_path: Path, value: Any) -> dict[str, Any]:
    text = VISION.read_text(encoding="utf-8")
    if value is not None:
        text = re.sub(r"num_speculative_tokens: \d+", f"num_speculative_tokens: {value}", text)
    return render(VISION, value, text, tmp_path / f"render-{value}", APP).deployment


def test_each_patch_turns_the_installed_deployment_into_that_values_render(tmp_path: Path) -> None:
    script = steps(VISION)
    restore, *values = patches(script)
    base, two, four = rendered(tmp_path, None), rendered(tmp_path, 2), rendered(tmp_path, 4)
    assert jsonpatch.apply_patch(base, values[0]) == two  # from what is installed
    assert jsonpatch.apply_patch(two, values[1]) == four  # from the value before
    assert jsonpatch.apply_patch(four, restore) == base  # and back
    container = two["spec"]["template"]["spec"]["containers"][0]
    assert '"num_speculative_tokens":2' in next(e["value"] for e in container["env"] if e["name"] == "SPEC_CONFIG")
    # only what the values change is replaced: the env Olares fills at install (HF_ENDPOINT) is never touched
    touched = {op["path"] for ops in values for op in ops}
    assert not any(path.endswith("/env/2") for path in touched) and any(p.endswith("/env/1") for p in touched)
    other = json.loads(json.dumps(base))
    other["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.33.0-cu129"
    with pytest.raises(jsonpatch.JsonPatchTestFailed):  # another version installed: refused, nothing changed
        jsonpatch.apply_patch(other, values[0])


def test_the_steps_pass_shellcheck(tmp_path: Path) -> None:
    checker = shellcheck()
    if checker is None:
        pytest.skip("shellcheck is not installed (the dev extras carry it)")
    script = tmp_path / "sweep.sh"
    script.write_text(steps(VISION), encoding="utf-8")
    done = subprocess.run([checker, "--shell=sh", str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout


def steps_env(
    tmp_path: Path, script: str, installed: dict[str, Any], pods: dict[str, FakeServer], **fail: str
) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(KUBECTL.format(python=sys.executable), encoding="utf-8")
    kubectl.chmod(0o755)
    (tmp_path / "deployment.json").write_text(json.dumps(installed), encoding="utf-8")
    urls = {value: server.url for value, server in pods.items()}
    (tmp_path / "sweep.sh").write_text(script, encoding="utf-8")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "FAKE_DEPLOYMENT": str(tmp_path / "deployment.json"),
        "CUDA_DEVICE_GPU_MODE_0": "0",  # what HAMi gives the engine's container on an exclusive card
        "FAKE_CALLS": str(tmp_path / "calls.txt"),
        "FAKE_URLS": json.dumps(urls),
        "HOME": str(tmp_path),
        **{f"FAKE_{name.upper()}": value for name, value in fail.items()},
    }
    return {**os.environ, **env}


def run_steps(
    tmp_path: Path, script: str, installed: dict[str, Any], pods: dict[str, FakeServer], **fail: str
) -> subprocess.CompletedProcess[str]:
    env = steps_env(tmp_path, script, installed, pods, **fail)
    return subprocess.run(
        ["sh", "sweep.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@needs_sh
def test_the_steps_sweep_the_box_and_the_logs_choose_and_write_the_value(
    tmp_path: Path, pods: dict[str, FakeServer]
) -> None:
    base = rendered(tmp_path, None)
    done = run_steps(tmp_path, steps(VISION), base, pods)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "deployment.json").read_text(encoding="utf-8")) == base  # put back
    for log in ("sweep-1.log", "sweep-2.log"):
        assert (tmp_path / log).read_text(encoding="utf-8").splitlines()[-1] == "### end"
    spec = spec_copy(tmp_path)
    code, out = run_cli(
        None,
        "bench",
        "sweep",
        str(spec),
        f"{FIELD}=2,4",
        "--responses",
        str(tmp_path),
        "--write",
        "--plot",
        str(tmp_path / "sweep.png"),
    )
    assert code == 0, out
    assert f"best: {FIELD} = 4" in out
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    assert data["engine"]["speculative"]["num_speculative_tokens"] == 4
    swept = data["changelog"][0]["sweep"]
    assert swept["chosen"] == 4 and swept["where"] == "the box (kubectl exec)" and swept["runs"] == 2
    assert swept["gpu_mode"] == "exclusive"  # from the pods' own CUDA_DEVICE_GPU_MODE_0
    assert [point["value"] for point in swept["points"]] == [2, 4]
    assert all(point["acceptance"] == 66.7 for point in swept["points"])  # each pod's own counters


@needs_sh
def test_another_app_installed_is_refused_before_anything_is_patched(
    tmp_path: Path, pods: dict[str, FakeServer]
) -> None:
    installed = rendered(tmp_path, None)
    installed["spec"]["template"]["spec"]["containers"][0]["args"][0] = "another/model"
    done = run_steps(tmp_path, steps(VISION), installed, pods)
    assert done.returncode != 0
    assert json.loads((tmp_path / "deployment.json").read_text(encoding="utf-8")) == installed
    calls = [json.loads(line) for line in (tmp_path / "calls.txt").read_text(encoding="utf-8").splitlines()]
    assert len(calls) == 1  # the check alone: no patch, no rollout, no bench


@needs_sh
def test_a_value_whose_pod_never_gets_ready_is_a_refused_row_and_the_sweep_goes_on(
    tmp_path: Path, pods: dict[str, FakeServer]
) -> None:
    base = rendered(tmp_path, None)
    done = run_steps(tmp_path, steps(VISION), base, pods, crashing="2")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "deployment.json").read_text(encoding="utf-8")) == base
    code, out = run_cli(None, "bench", "sweep", str(VISION), f"{FIELD}=2,4", "--responses", str(tmp_path))
    assert code == 0, out
    assert (
        "2 refused: the pod did not become ready (the rollout timed out): ValueError: num_speculative_tokens" in out
    ), out
    assert f"best: {FIELD} = 4" in out


@needs_sh
def test_a_failing_step_ends_the_sweep_and_puts_the_spec_value_back(
    tmp_path: Path, pods: dict[str, FakeServer]
) -> None:
    base = rendered(tmp_path, None)
    done = run_steps(tmp_path, steps(VISION), base, pods, denied="4")
    assert done.returncode != 0 and "admission webhook denied" in done.stderr
    assert json.loads((tmp_path / "deployment.json").read_text(encoding="utf-8")) == base
    assert (tmp_path / "sweep-1.log").is_file() and not (tmp_path / "sweep-2.log").exists()


def test_a_value_that_changes_more_than_the_engine_args_and_env_is_refused() -> None:
    code, out = run_cli(
        None,
        "bench",
        "sweep",
        str(VISION),
        "engine.image=vllm/vllm-openai:v0.21.0-cu129,vllm/vllm-openai:v0.21.0",
        "--exec",
        "--user",
        "alice",
    )
    assert code == 1, out
    assert "engine.image" in out and "image" in out and "beyond the vllm container's args and env" in out


@pytest.mark.parametrize(
    "args, said",
    [
        (["--exec"], "give --user NAME (namespace APP-NAME) or --namespace"),
        (["--exec", "--user", "alice", "--write"], "--write go with --responses DIR"),
        (["--tiny", "--exec", "--user", "alice"], "not --tiny and --exec"),
        (["--responses", str(VISION)], "is a file"),
    ],
)
def test_in_box_sweep_options_out_of_place_are_usage_errors(args: list[str], said: str) -> None:
    code, out = run_cli(None, "bench", "sweep", str(VISION), f"{FIELD}=2,4", *args)
    assert code == 2 and said in out, out


def test_a_missing_log_is_named(tmp_path: Path) -> None:
    code, out = run_cli(None, "bench", "sweep", str(VISION), f"{FIELD}=2,4", "--responses", str(tmp_path))
    assert code == 1 and "sweep-1.log: no log of value 1 of" in out, out


def test_a_value_with_quotes_or_a_newline_stays_text_in_the_script(tmp_path: Path) -> None:
    """The values are the user's text: in the script they are quoted data, never a command (sh -n checks the
    syntax; running the echo lines prints them back verbatim)."""
    from olarespack.bench.inbox_sweep import Rendered, script

    def deployment(value: str) -> dict[str, Any]:
        return {
            "kind": "Deployment",
            "metadata": {"name": "app"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "engine",
                                "image": "i:1",
                                "args": ["--x", value],
                                "env": [{"name": "A", "value": value}],
                            }
                        ]
                    }
                }
            },
        }

    hostile = ["a';touch pwned;'", "b\ntouch pwned2", "$(touch pwned3)"]
    renders = [Rendered(value, deployment(value), {}) for value in hostile]
    text = script(
        "app",
        "ns",
        "engine",
        "engine.x",
        renders,
        Rendered("0", deployment("0"), {}),
        ["kubectl", "exec", "sh", "-c", "true"],
        "1.0.0",
    )
    assert subprocess.run(["sh", "-n"], input=text, text=True, check=False).returncode == 0
    again = next(line for line in text.splitlines() if line.startswith("#   olarespack bench"))
    assert "pwned2" in again and "pwned3" in again  # the whole value stays on its comment line
    # the script's echo commands (each may span lines inside its quotes), run as the script would run them
    echoes = re.findall(r"^echo '.*?' >&2$", text, flags=re.M | re.S)
    assert len(echoes) == len(hostile)
    done = subprocess.run(["sh", "-c", "\n".join(echoes)], cwd=tmp_path, capture_output=True, text=True, check=True)
    for index, value in enumerate(hostile, start=1):
        assert f"--- engine.x = {value} ({index}/3)" in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing ran


@needs_sh
def test_an_interrupted_sweep_puts_the_spec_value_back(tmp_path: Path, pods: dict[str, FakeServer]) -> None:
    import signal
    import time

    base = rendered(tmp_path, None)
    env = steps_env(tmp_path, steps(VISION), base, pods, slow="4")
    sweep = subprocess.Popen(
        ["sh", "sweep.sh"],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline, first = time.monotonic() + 120, tmp_path / "sweep-1.log"
    while not (first.exists() and first.read_text(encoding="utf-8").endswith("### end\n")):
        assert time.monotonic() < deadline and sweep.poll() is None
        time.sleep(0.2)
    time.sleep(1)  # value 4 is patched in and its rollout is being waited for
    os.killpg(sweep.pid, signal.SIGTERM)  # as a terminal's Ctrl-C reaches the whole job
    assert sweep.wait(timeout=60) != 0
    assert json.loads((tmp_path / "deployment.json").read_text(encoding="utf-8")) == base
