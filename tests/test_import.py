"""olarespack import: hand-written charts become specs whose build runs the same server.

The round trip is checked end to end with the real helm: the hand-written chart is rendered, its server's
command line resolved; the imported spec is built, its chart rendered by helm the same way, and the two
command lines compared. The resolver itself (argv.py) and the comparison are checked on their own first."""

from __future__ import annotations

import base64
import re
import shutil
import tarfile
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import shared
from olarespack.check.inputs import classify
from olarespack.cli import main
from olarespack.cli.group import helm_binary
from olarespack.engines.importing import remote_files
from olarespack.importer import server_command_line
from olarespack.importer.argv import ContainerEnv, container_env, resolve
from olarespack.importer.compare import argv_differences
from olarespack.importer.facts import next_release
from olarespack.release.version import is_higher
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import write_chart

FIXTURE = Path(__file__).parent / "fixtures" / "import" / "llamacppwrapped"


# --------------------------------------------------------------------------- the command line a container runs


def shell(script: str, env: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    resolved = resolve({"command": ["/bin/bash", "-c"], "args": [script]}, ContainerEnv(values=env or {}))
    return resolved.argv, resolved.unresolved


def test_kubernetes_expansion_uses_configmaps_then_env_and_keeps_escaped_dollars() -> None:
    container = {
        "command": ["llama-server"],
        "args": ["--ctx-size", "$(CTX)", "--alias", "$(ALIAS)", "--x", "$$(LITERAL)", "--y", "$(UNDEFINED)"],
        "envFrom": [{"configMapRef": {"name": "cm"}}],
        "env": [{"name": "ALIAS", "value": "from-env-$(CTX)"}],
    }
    env = container_env(container, {"cm": {"CTX": "8192", "ALIAS": "from-configmap"}})
    argv = resolve(container, env).argv
    assert argv == [
        "llama-server",
        "--ctx-size",
        "8192",
        "--alias",
        "from-env-8192",
        "--x",
        "$(LITERAL)",
        "--y",
        "$(UNDEFINED)",
    ]


def test_shell_wrapper_defaults_assignments_and_continuations() -> None:
    script = """set -e
DIR=${MODELS_DIR:-/models}
if [ ! -s "$DIR/$FILE" ]; then
  curl -fL "$URL" -o "$DIR/$FILE"
fi
exec /usr/local/bin/llama-server \\
  --model "$DIR/$FILE" \\
  --ctx-size "${CTX:-4096}" --threads ${THREADS:-8} \\
  --alias '$NOT_EXPANDED' --jinja  # a comment
"""
    argv, unresolved = shell(script, {"FILE": "m.gguf", "CTX": "32768"})
    assert argv == [
        "/usr/local/bin/llama-server",
        "--model",
        "/models/m.gguf",
        "--ctx-size",
        "32768",
        "--threads",
        "8",
        "--alias",
        "$NOT_EXPANDED",
        "--jinja",
    ]
    assert unresolved == []


def test_what_only_running_the_script_would_tell_is_named() -> None:
    script = """if [ -x /app/llama-server ]; then BIN=/app/llama-server; fi
ARGS=$(cat /etc/args)
exec "$BIN" --ctx-size "$MISSING" $ARGS "$@"
"""
    _, unresolved = shell(script)
    text = "\n".join(unresolved)
    assert "$BIN (set in a branch" in text
    assert "$ARGS (set in a branch, a loop or by a command" in text
    assert "$MISSING (not set" in text
    assert "$@ (the script's own arguments)" in text


def test_a_script_without_exec_or_too_large_is_reported_not_guessed() -> None:
    assert shell("llama-server --port 8080\n")[1] == ["the wrapper script has no `exec` line starting the server"]
    argv, unresolved = shell("x=1\n" * 200_000)
    assert argv == [] and "over 256 KiB" in unresolved[0]


def test_download_urls_name_the_repository_of_local_files_even_when_saved_under_another_name() -> None:
    found = remote_files(
        {
            "DRAFT_URL": "https://huggingface.co/o/drafts/resolve/v2/draft-Q8_0.gguf",
            "DRAFT_FILE": "draft-v2.gguf",
            "MODEL_URL": "https://hf-mirror.example/o/model/resolve/main/model.gguf",
            "OTHER": "not a url",
        }
    )
    assert found["draft-v2.gguf"].repo == "o/drafts" and found["draft-v2.gguf"].revision == "v2"
    assert found["draft-v2.gguf"].path == "draft-Q8_0.gguf"
    assert found["model.gguf"].repo == "o/model"


def test_comparison_reads_options_by_name_with_every_spelling() -> None:
    chart = ["llama-server", "-ngl", "99", "-c", "4096", "--jinja", "-fa", "on"]
    spec = ["llama-server", "--flash-attn", "on", "--ctx-size", "4096", "--n-gpu-layers", "99", "--jinja"]
    assert argv_differences(chart, spec, "llamacpp") == []
    differences = argv_differences(chart, [*spec[:-1]], "llamacpp")
    assert differences == ["server argument --jinja: in the chart's command line, not in the spec's"]
    assert argv_differences(["/app/llama-server", *chart[1:]], chart, "llamacpp")[0].startswith("server executable")


# --------------------------------------------------------------------------- the round trip, with helm


def built_server_argv(spec_file: Path, tmp: Path) -> tuple[str, list[str]]:
    """The imported spec built into a chart, rendered by helm as Olares installs it: its server's argv."""
    spec = load_spec(spec_file)
    folder = tmp / "built" / spec.name
    write_chart(render_chart(spec, str(spec_file)), folder)
    with ExitStack() as stack:
        _, targets, _ = classify([str(folder)], stack)
        kind, argv, unresolved = server_command_line(targets[0], helm_binary())
    assert unresolved == []
    return kind, argv


def chart_server_argv(chart: Path) -> tuple[str, list[str]]:
    with ExitStack() as stack:
        _, targets, _ = classify([str(chart)], stack)
        kind, argv, _ = server_command_line(targets[0], helm_binary())
    return kind, argv


def run_import(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["import", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.mark.helm
def test_wrapped_chart_round_trips_to_the_same_server(tmp_path: Path) -> None:
    code, out = run_import(str(FIXTURE), "--apps-dir", str(tmp_path / "apps"))
    assert code == 0, out
    assert "same server command line" in out
    spec_file = tmp_path / "apps" / "llamacppwrapped.yaml"
    spec = load_spec(spec_file)
    engine = spec.engine
    assert engine.kind == "llamacpp"
    assert engine.command is None  # the buun fork's family names its executable
    assert engine.port == 8000 and engine.ctx_size == 98304 and engine.threads == 12
    assert engine.speculative.type == "dflash"
    assert engine.speculative.drafter.repo == "example/Qwen3-8B-DFlash-GGUF"
    assert engine.model.saved_as == {"Qwen3-8B-DFlash-Q8_0.gguf": "Qwen3-8B-DFlash-v2-Q8_0.gguf"}
    assert engine.scratch == ["/cache"] and engine.env == {"GGML_CUDA_GRAPH_OPT": "1"}
    assert spec.version == "2.3.2" and spec.changelog[0].version == "2.3.2"  # above the installed 2.3.1
    assert [(e.version, e.note) for e in spec.changelog][1:] == [
        ("2.3.1", "context 64K -> 96K."),
        ("2.3.0", "DFlash drafter v2,\nsaved under a new name."),
        ("2.2.0", "initial release."),
    ]
    chart_kind, chart_argv = chart_server_argv(FIXTURE)
    built_kind, built_argv = built_server_argv(spec_file, tmp_path)
    assert chart_kind == built_kind == "llamacpp"
    assert argv_differences(chart_argv, built_argv, "llamacpp") == []
    assert built_argv[0] == "/usr/local/bin/llama-server"
    # the drafter is fetched from its own repository into the name the old chart saved it under
    deployment = (tmp_path / "built" / "llamacppwrapped" / "templates" / "deployment.yaml").read_text()
    assert (
        "Qwen3-8B-DFlash-Q8_0.gguf /models/Qwen3-8B-DFlash-v2-Q8_0.gguf example/Qwen3-8B-DFlash-GGUF main" in deployment
    )


@pytest.mark.helm
def test_archives_are_read_and_existing_specs_kept(tmp_path: Path) -> None:
    archive = tmp_path / "llamacppwrapped-2.3.1.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(FIXTURE, arcname="llamacppwrapped")
    apps = tmp_path / "apps"
    assert run_import(str(archive), "--apps-dir", str(apps))[0] == 0
    before = (apps / "llamacppwrapped.yaml").read_bytes()
    code, out = run_import(str(archive), "--apps-dir", str(apps))
    assert code == 2 and "--force" in out
    assert (apps / "llamacppwrapped.yaml").read_bytes() == before
    assert run_import(str(archive), "--apps-dir", str(apps), "--force")[0] == 0


@pytest.mark.helm
def test_a_chart_without_a_server_writes_nothing(tmp_path: Path) -> None:
    chart = tmp_path / "in" / "llamacppwrapped"
    shutil.copytree(FIXTURE, chart)
    deployment = chart / "templates" / "deployment.yaml"
    deployment.write_text(
        deployment.read_text()
        .replace("/usr/local/bin/llama-server", "/usr/bin/nginx")
        .replace("docker.io/aamsellem/buun-llama-cpp-dflash:0.2.0", "nginx:1.27")
    )
    code, out = run_import(str(chart), "--apps-dir", str(tmp_path / "apps"))
    assert code == 1 and "no vLLM or llama.cpp server" in out and "no spec written" in out
    assert not (tmp_path / "apps").exists() or not any((tmp_path / "apps").iterdir())


# The seed author's charts: every one imports and builds back to the same server command line. Three of them
# write a chat template into /models from a base64 ConfigMap value: the spec carries it, and its chart mounts
# the same bytes at the same path.
REFERENCE = [
    "seed-market/llamacppgemma4audione",
    "seed-market/vllmgemma426ba4bvisionone",
    "seed-market/vllmgemma4dflashone",
    "author-market/devstralsmallone",
    "author-market/gemma426ba4bone",
    "author-market/gemma4e2bone",
    "author-market/llamacppqwen35a3bone",
    "author-market/llamacppqwen35iq4one",
    "author-market/llamacppqwen36dflashone",
    "author-market/qwen35a3bvisionone",
]
WRITES_A_CHAT_TEMPLATE = {"llamacppqwen35a3bone", "llamacppqwen35iq4one", "qwen35a3bvisionone"}


@pytest.mark.helm
@pytest.mark.parametrize("relative", REFERENCE, ids=lambda r: r.split("/")[1])
def test_reference_charts_round_trip(relative: str, tmp_path: Path) -> None:
    chart = shared(f"reference/{relative}")
    name = chart.name
    code, out = run_import(str(chart), "--apps-dir", str(tmp_path / "apps"))
    assert code == 0 and "not carried" not in out, out
    spec_file = tmp_path / "apps" / f"{name}.yaml"
    chart_kind, chart_argv = chart_server_argv(chart)
    built_kind, built_argv = built_server_argv(spec_file, tmp_path)
    assert chart_kind == built_kind
    assert argv_differences(chart_argv, built_argv, chart_kind) == []
    if name in WRITES_A_CHAT_TEMPLATE:
        built = tmp_path / "built" / name / "files" / "chat-template.jinja"
        encoded = re.search(r'CHAT_TEMPLATE_B64: "([^"]+)"', (chart / "templates" / "deployment.yaml").read_text())
        assert encoded and built.read_bytes() == base64.b64decode(encoded[1])
    data = yaml.safe_load(spec_file.read_text())
    manifest = yaml.safe_load((chart / "OlaresManifest.yaml").read_text())
    # one patch above the installed chart, so a box that has it sees the upgrade however the user goes on
    installed = str(manifest["metadata"]["version"])
    assert is_higher(data["version"], installed) and data["version"] == next_release(installed)
    assert data["changelog"][0]["version"] == data["version"] and installed in data["changelog"][0]["note"]
    assert data["changelog"][1]["version"] == installed
    assert data["metadata"]["icon"] == manifest["metadata"]["icon"]


@pytest.mark.helm
def test_official_charts_are_read_by_their_pinned_model_interface(tmp_path: Path) -> None:
    """The official v3 charts start their server from a wrapper that decides at boot (a tune script rewrites
    ENGINE_ARGS): import reads them as the pinned-model shape runs MODEL_NAME and ENGINE_ARGS, says so, carries the
    Model Console as olares.pinned_model, and names what the spec's chart does not mount (vLLM's compile caches)."""
    chart = shared("reference/official-v3/vllmgemma412bitawqint4v3")
    code, out = run_import(str(chart), "--apps-dir", str(tmp_path / "apps"))
    assert code == 1
    assert "a pinned-model chart: the server runs what its wrapper makes of MODEL_NAME and ENGINE_ARGS" in out
    assert "a second workload" not in out
    assert "volume mount /cache/vllm" in out
    spec = yaml.safe_load((tmp_path / "apps" / "vllmgemma412bitawqint4v3.yaml").read_text(encoding="utf-8"))
    assert spec["olares"]["pinned_model"]["console_image"].startswith("docker.io/beclab/llm-init:")


def test_hostile_scripts_are_bounded() -> None:
    """A variable doubled at each line would reach 2**64 characters; a long line would cost a quadratic scan."""
    doubling = "A=xxxxxxxxxxxxxxxx\n" + "".join("A=$A$A\n" for _ in range(64)) + "exec llama-server --alias $A\n"
    _, unresolved = shell(doubling)
    assert any("grows past" in u for u in unresolved)
    argv, unresolved = shell("exec llama-server " + "--jinja " * 30_000 + "\n")
    assert argv == [] and any("grows past" in u for u in unresolved)


@pytest.mark.parametrize(
    "script, unknown",
    [
        ('[ -n "$BIG" ] && CTX=262144\nexec llama-server --ctx-size "${CTX:-4096}"\n', "$CTX (set in a branch"),
        ('{ THREADS=4; }\nexec llama-server --threads "$THREADS"\n', "$THREADS (set in a branch"),
        ('setup() {\n  CTX=9\n}\nexec llama-server --ctx-size "$CTX"\n', "$CTX (set in a branch"),
        ('read -r CTX < /etc/ctx\nexec llama-server --ctx-size "$CTX"\n', "$CTX (set in a branch"),
        ('A=$UNSET\nB=$A\nexec llama-server --alias "$B"\n', "$UNSET (not set"),
        ('N=$(nproc)\nT=$N\nexec llama-server --threads "$T"\n', "$T (set in a branch"),
        ('eval "CTX=8192"\nexec llama-server --ctx-size "$CTX"\n', "eval (the script builds commands"),
    ],
)
def test_values_only_running_the_script_would_tell_are_named(script: str, unknown: str) -> None:
    assert any(u.startswith(unknown) for u in shell(script)[1]), shell(script)


def test_nested_defaults_and_launchers() -> None:
    argv, unresolved = shell('exec llama-server --alias "${ALIAS:-${MODEL_ALIAS:-qwen}}"\n', {"MODEL_ALIAS": "m"})
    assert argv == ["llama-server", "--alias", "m"] and unresolved == []
    deep = "${A:-" * 20 + "x" + "}" * 20
    assert any("nested over" in u for u in shell(f"exec llama-server --alias {deep}\n")[1])
    argv, unresolved = shell("exec env GGML_CUDA_NO_PINNED=1 llama-server --jinja\n")
    assert argv == ["llama-server", "--jinja"] and unresolved == []
    assert "started through numactl" in " ".join(shell("exec numactl -N0 llama-server --jinja\n")[1])
    resolved = resolve({"command": ["bash", "--norc", "-c", "exec llama-server --jinja"]}, ContainerEnv())
    assert resolved.argv == ["llama-server", "--jinja"]


@pytest.mark.helm
def test_a_chart_kubernetes_would_refuse_is_refused_without_a_traceback(tmp_path: Path) -> None:
    chart = tmp_path / "in" / "llamacppwrapped"
    shutil.copytree(FIXTURE, chart)
    deployment = chart / "templates" / "deployment.yaml"
    deployment.write_text(
        deployment.read_text().replace(
            "          envFrom:\n            - configMapRef:\n                name: wrapped-env\n",
            "          envFrom:\n            - 1\n            - configMapRef:\n                name: wrapped-env\n",
            1,
        )
    )
    code, out = run_import(str(chart), "--apps-dir", str(tmp_path / "apps"))
    assert code == 1 and "Kubernetes would refuse what it renders" in out and "envFrom" in out
    assert "Traceback" not in out and "internal error" not in out


def test_a_positional_llama_server_does_not_know_passes_through_as_itself() -> None:
    from olarespack.engines.llamacpp.importer import import_llamacpp

    imported = import_llamacpp(
        ["llama-server", "stray", "--jinja", "--foo", "1"], "ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101", {}
    )
    assert imported.data["extra_args"] == ["stray", "--foo", "1"]


@pytest.mark.helm
def test_a_downloader_that_builds_its_url_from_configmap_variables_names_its_repository(tmp_path: Path) -> None:
    """A downloader may run `curl "https://huggingface.co/${TARGET_MODEL}/resolve/main/${TARGET_FILE}"` with
    both variables in the chart's ConfigMap (and a `${VAR:-default}` beside them): the script's variables are
    read, so the spec names the same repository file as the chart with the literal URL."""
    original = shared("reference/author-market/llamacppqwen35a3bone")
    chart = tmp_path / "llamacppqwen35a3bone"
    shutil.copytree(original, chart)
    deployment = chart / "templates" / "deployment.yaml"
    text = deployment.read_text()
    literal = '  MODEL_URL: "https://huggingface.co/unsloth/Qwen3.5-35B-A3B-GGUF/resolve/main/Qwen3.5-35B-A3B-UD-Q4_K_XL.gguf"\n'
    assert literal in text
    text = text.replace(literal, '  TARGET_MODEL: "unsloth/Qwen3.5-35B-A3B-GGUF"\n')
    fetch = 'wget -O "$MODEL_PATH.tmp" "$MODEL_URL"'
    assert fetch in text
    text = text.replace(
        fetch,
        'BASE="https://huggingface.co"\n                curl -fL -o "$MODEL_PATH.tmp" '
        '"${BASE}/${TARGET_MODEL}/resolve/${REVISION:-main}/${TARGET_FILE:-$MODEL_FILE}"',
    )
    deployment.write_text(text)
    assert "resolve/main" not in deployment.read_text()

    code, out = run_import(str(chart), "--apps-dir", str(tmp_path / "apps"))
    assert code == 0 and "not carried" not in out, out
    code, expected = run_import(str(original), "--apps-dir", str(tmp_path / "expected"))
    assert code == 0, expected
    got = yaml.safe_load((tmp_path / "apps" / "llamacppqwen35a3bone.yaml").read_text())
    want = yaml.safe_load((tmp_path / "expected" / "llamacppqwen35a3bone.yaml").read_text())
    assert got["engine"] == want["engine"]


def test_a_download_url_with_a_value_known_only_in_the_pod_is_not_guessed() -> None:
    from olarespack.importer.downloads import script_urls

    container = {
        "command": ["sh", "-c"],
        "args": [
            'F=$(ls /models | head -1)\ncurl -o /m/x "https://huggingface.co/${REPO}/resolve/main/$F"\n'
            'curl -o /m/y "https://huggingface.co/${REPO}/resolve/main/${FILE:-y.gguf}"'
        ],
    }
    lines = script_urls(container, ContainerEnv(values={"REPO": "org/model"}), {}, "w")
    files = remote_files(lines)
    assert set(files) == {"y.gguf"}
    assert files["y.gguf"].repo == "org/model"


# The seed author's current charts (manifest 0.12.0 / v3: the envelope in spec.accelerator, no owners file in the
# stored copies, so --owners names him). Every one imports with the same server command line; what a spec changes
# on purpose is pinned (the closing note of issue 34 says what lint finds in them that his validator misses).
AUTHOR_V3 = {
    "vllmgemma4dflashone": None,
    "vllmgemma426ba4bvisionone": None,  # books the 24400 MiB HAMi gave it (CUDA_DEVICE_MEMORY_LIMIT_0)
    "llamacppgemma4audione": None,  # ubatch 2048 over batch 512: a warning now, llama.cpp caps it and boots
    "llamacppgemma412bone": None,  # the box's shared model folder, /olares/share/ai/model at /shared-models
    "llamacppqwen36a3bdflashone": "metadata.title 'Qwen36 35B-A3B DFlash Vision One': over 30 characters, cut",
    "llamacppqwen36beellamaone": None,  # BeeLlama's --spec-draft-model names the DFlash drafter (downloaded)
    "llamacppqwen36a3bone": None,  # no --ctx-size: the spec's ctx_size is null too (the model's trained context)
    "vllmqwen36turbo27bone": None,  # /entrypoint.sh serve: the Genesis-patched vLLM family
}


@pytest.mark.helm
@pytest.mark.parametrize("name", sorted(AUTHOR_V3))
def test_the_authors_v3_charts_import_with_the_same_server(name: str, tmp_path: Path) -> None:
    chart = shared(f"reference/author-market-v3/{name}")
    code, out = run_import(str(chart), "--apps-dir", str(tmp_path / "apps"), "--owners", "aamsellem")
    changed = AUTHOR_V3[name]
    if changed is None:
        assert code == 0 and "same server command line" in out, out
    else:
        assert code == 1 and f"not carried: {changed}" in out and "1 thing(s) not carried" in out, out
    spec_file = tmp_path / "apps" / f"{name}.yaml"
    chart_kind, chart_argv = chart_server_argv(chart)
    built_kind, built_argv = built_server_argv(spec_file, tmp_path)
    assert chart_kind == built_kind and argv_differences(chart_argv, built_argv, chart_kind) == []
    data = yaml.safe_load(spec_file.read_text())
    manifest = yaml.safe_load((chart / "OlaresManifest.yaml").read_text())
    assert data["version"] == next_release(str(manifest["metadata"]["version"]))
    assert data["metadata"]["owners"] == ["aamsellem"]
    envelope = manifest["spec"]["accelerator"][0]
    assert data["resources"]["disk"] == {"request": envelope["requiredDisk"], "limit": envelope["limitedDisk"]}
    if name == "llamacppqwen36beellamaone":  # its drafter is downloaded by the spec's chart, not passed through
        assert data["engine"]["speculative"]["drafter"]["file"] == "dflash-draft-3.6-q8_0.gguf"
        assert "--spec-draft-model" not in data["engine"].get("extra_args", [])
    # lint takes it (its warnings are what his validator misses)
    result = CliRunner().invoke(main, ["lint", str(spec_file)])
    assert result.exit_code == 0, result.output
    code, out = run_import(str(chart), "--apps-dir", str(tmp_path / "other"), "--owners", "not a user")
    assert code == 2 and "--owners" in out
