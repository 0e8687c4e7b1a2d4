"""olarespack import carries a chart faithfully, or refuses it by name: a container run by its image's
entrypoint, numbers as numbers, a spec written only when it builds, tokens never copied, command
substitutions never taken for literal words, and nothing added that the chart left to the server's default.

Each chart here is the wrapped fixture with its server container replaced, rendered by the real helm."""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from conftest import shared
from olarespack.check.inputs import classify
from olarespack.cli import main
from olarespack.cli.group import helm_binary
from olarespack.importer import _containers, rendered_documents, server_command_line
from olarespack.importer.compare import argv_differences
from olarespack.project import render_apps
from olarespack.render import render_chart
from olarespack.spec.load import load_spec
from olarespack.write import write_chart

FIXTURE = Path(__file__).parent / "fixtures" / "import" / "llamacppwrapped"
OFFICIAL = "ghcr.io/ggml-org/llama.cpp:server-cuda13-b9101"
VLLM = "vllm/vllm-openai:v0.21.0-cu129"
LLAMA_ARGS = [
    "--host",
    "0.0.0.0",
    "--port",
    "8080",
    "--model",
    "/models/$(TARGET_FILE)",
    "--alias",
    "$(MODEL_ALIAS)",
    "--ctx-size",
    "$(CTX_SIZE)",
    "-ngl",
    "99",
    "-fa",
    "on",
    "--jinja",
]
VLLM_ARGS = [
    "example/Qwen3-8B",
    "--served-model-name",
    "qwen3-8b",
    "--host",
    "0.0.0.0",
    "--port",
    "8000",
    "--max-model-len",
    "$(CTX_SIZE)",
    "--gpu-memory-utilization",
    "0.9",
    "--max-num-seqs",
    "4",
]


def chart(tmp: Path, container: dict[str, Any], env: list[dict[str, Any]] | None = None) -> Path:
    """The fixture with its server container's image, command and args replaced (and env added)."""
    folder = tmp / "in" / "llamacppwrapped"
    shutil.copytree(FIXTURE, folder)
    deployment = folder / "templates" / "deployment.yaml"
    text = deployment.read_text()
    start, end = text.index("          image: "), text.index("          envFrom:")
    body = yaml.safe_dump(container, sort_keys=False, width=1000)
    text = text[:start] + "".join(f"          {line}\n" for line in body.splitlines()) + text[end:]
    if env:
        extra = yaml.safe_dump(env, sort_keys=False, width=1000)
        text = text.replace(
            "          env:\n", "          env:\n" + "".join(f"            {line}\n" for line in extra.splitlines()), 1
        )
    deployment.write_text(text)
    return folder


def run_import(folder: Path, apps: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["import", str(folder), "--apps-dir", str(apps)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def argv_of(folder: Path) -> list[str]:
    with ExitStack() as stack:
        _, targets, _ = classify([str(folder)], stack)
        _, argv, unresolved = server_command_line(targets[0], helm_binary())
    assert unresolved == []
    return argv


def image_of(folder: Path) -> str:
    """The server container's image, as helm renders the chart for Olares."""
    with ExitStack() as stack:
        _, targets, _ = classify([str(folder)], stack)
        containers, _ = _containers(rendered_documents(targets[0], helm_binary()))
    return next(str(c.spec.get("image")) for c in containers if c.kind)


def round_trip(folder: Path, tmp: Path) -> tuple[str, Path, list[str], list[str]]:
    """Import the chart (it must import whole), build the spec, and both servers' command lines."""
    code, out = run_import(folder, tmp / "apps")
    assert code == 0 and "same server command line" in out, out
    spec_file = tmp / "apps" / "llamacppwrapped.yaml"
    built = tmp / "built" / "llamacppwrapped"
    write_chart(render_chart(load_spec(spec_file), str(spec_file)), built)
    return out, spec_file, argv_of(folder), argv_of(built)


# --------------------------------------------------------------------------- the image's entrypoint


@pytest.mark.helm
def test_args_without_a_command_are_all_arguments_of_the_image_entrypoint(tmp_path: Path) -> None:
    folder = chart(tmp_path, {"image": OFFICIAL, "args": LLAMA_ARGS})
    _, spec_file, chart_argv, built_argv = round_trip(folder, tmp_path)
    engine = load_spec(spec_file).engine
    assert engine.command is None and "--host" not in engine.extra_args and "0.0.0.0" not in engine.extra_args
    assert chart_argv[:2] == ["/app/llama-server", "--host"]
    assert built_argv[0] == "/app/llama-server"
    assert argv_differences(chart_argv, built_argv, "llamacpp") == []


@pytest.mark.helm
def test_an_image_whose_entrypoint_is_unknown_is_refused_by_name(tmp_path: Path) -> None:
    folder = chart(tmp_path, {"image": "docker.io/aamsellem/llamacpp-atomic-mtp:0.1.0", "args": LLAMA_ARGS})
    code, out = run_import(folder, tmp_path / "apps")
    assert code == 1 and "no spec written" in out
    assert "gives args but no command" in out and "give the container its command" in out
    assert not (tmp_path / "apps" / "llamacppwrapped.yaml").exists()


# --------------------------------------------------------------------------- typed, and written only if it builds


@pytest.mark.helm
def test_numbers_are_written_as_numbers(tmp_path: Path) -> None:
    folder = chart(
        tmp_path,
        {"image": OFFICIAL, "command": ["/app/llama-server"], "args": [*LLAMA_ARGS[:3], "8000", *LLAMA_ARGS[4:]]},
    )
    round_trip(folder, tmp_path)
    engine = yaml.safe_load((tmp_path / "apps" / "llamacppwrapped.yaml").read_text())["engine"]
    assert engine["port"] == 8000 and engine["ctx_size"] == 98304


@pytest.mark.helm
def test_a_spec_the_model_refuses_is_not_written_with_its_numbers_as_text(tmp_path: Path) -> None:
    """No --alias: the spec model refuses it (the spec must name the model for clients); nothing is written,
    rather than a spec of quoted numbers the build would then refuse for reasons import never gave."""
    args = [a for a in LLAMA_ARGS if a not in ("--alias", "$(MODEL_ALIAS)")]
    folder = chart(tmp_path, {"image": OFFICIAL, "command": ["/app/llama-server"], "args": args})
    code, out = run_import(folder, tmp_path / "apps")
    assert code == 1 and "no spec written" in out
    assert "--alias: the chart leaves it to the server's default; the spec must give engine.alias" in out
    assert "engine.alias" in out and not (tmp_path / "apps" / "llamacppwrapped.yaml").exists()


@pytest.mark.helm
def test_a_spec_that_would_not_build_is_not_written_and_every_problem_is_named(tmp_path: Path) -> None:
    """The chart template written into the pod from nothing readable stays in extra_args, which the build
    refuses (a typed field's flag): import names that build problem too, and writes nothing."""
    folder = chart(
        tmp_path,
        {
            "image": OFFICIAL,
            "command": ["/app/llama-server"],
            "args": [*LLAMA_ARGS, "--chat-template-file", "/models/t.jinja"],
        },
    )
    code, out = run_import(folder, tmp_path / "apps")
    assert code == 1 and "its spec would not build, so none is written" in out and "no spec written" in out
    assert "--chat-template-file /models/t.jinja: the chart writes it into the pod from nothing" in out
    assert "[extra-arg-duplicate]" in out and "apps/llamacppwrapped.yaml: engine.extra_args" in out
    assert not (tmp_path / "apps").exists() or not any((tmp_path / "apps").iterdir())


@pytest.mark.helm
def test_what_the_spec_cannot_say_is_named_and_a_spec_that_builds_still_written(tmp_path: Path) -> None:
    folder = chart(tmp_path, {"image": OFFICIAL, "command": ["/app/llama-server"], "args": LLAMA_ARGS})
    deployment = folder / "templates" / "deployment.yaml"
    deployment.write_text(
        deployment.read_text().replace(
            "name: cache\n          emptyDir: {}", "name: cache\n          hostPath:\n            path: /var/cache/x"
        )
    )
    code, out = run_import(folder, tmp_path / "apps")
    assert code == 1 and "not carried: volume mount /cache (cache, hostPath)" in out
    load_spec(tmp_path / "apps" / "llamacppwrapped.yaml")  # written, and it loads


# --------------------------------------------------------------------------- tokens


@pytest.mark.helm
def test_the_hugging_face_token_becomes_the_secret_never_the_value(tmp_path: Path) -> None:
    pasted = "hf_" + "Ab1" * 12
    folder = chart(
        tmp_path,
        {
            "image": OFFICIAL,
            "command": ["/app/llama-server"],
            "args": [*LLAMA_ARGS, "--hf-token", "$(HF_TOKEN)", "--alias-extra", pasted],
        },
        env=[{"name": "PASTED", "value": pasted}],
    )
    code, out = run_import(folder, tmp_path / "apps")
    assert code == 0, out
    text = (tmp_path / "apps" / "llamacppwrapped.yaml").read_text()
    assert pasted not in text and "hf_olarespack" not in text and "--hf-token" not in text
    assert "note: server argument --hf-token: the token is not copied" in out
    assert "note: server argument --alias-extra: the token is not copied" in out
    assert "note: env PASTED: a token is never copied" in out


@pytest.mark.helm
@pytest.mark.parametrize(
    "container, named",
    [
        (
            {"image": OFFICIAL, "command": ["/app/llama-server"], "args": [*LLAMA_ARGS, "--api-key", "s3cret"]},
            "server argument --api-key: its value is a secret",
        ),
        (
            {
                "image": "ghcr.io/ggml-org/llama.cpp:hf_" + "Ab1" * 12,
                "command": ["/app/llama-server"],
                "args": LLAMA_ARGS,
            },
            "engine.image: holds a token",
        ),
    ],
)
def test_other_secrets_are_refused_and_nothing_written(tmp_path: Path, container: dict[str, Any], named: str) -> None:
    code, out = run_import(chart(tmp_path, container), tmp_path / "apps")
    assert code == 1 and named in out
    assert "s3cret" not in out or "--api-key" in out
    written = tmp_path / "apps" / "llamacppwrapped.yaml"
    assert not written.exists() or "s3cret" not in written.read_text()


# --------------------------------------------------------------------------- what only the pod knows


@pytest.mark.helm
@pytest.mark.parametrize(
    "container, env, named",
    [
        (
            {
                "image": OFFICIAL,
                "command": ["/bin/sh", "-c"],
                "args": ["exec /app/llama-server " + " ".join(LLAMA_ARGS) + " --threads $(nproc)"],
            },
            None,
            "$(nproc) (a command substitution",
        ),
        (
            {
                "image": OFFICIAL,
                "command": ["/bin/sh", "-c"],
                "args": ["exec /app/llama-server " + " ".join(LLAMA_ARGS) + " --threads `nproc`"],
            },
            None,
            "`nproc` (a command substitution",
        ),
        (
            {"image": OFFICIAL, "command": ["/app/llama-server"], "args": [*LLAMA_ARGS, "--alias", "$(SECRET_ALIAS)"]},
            [{"name": "SECRET_ALIAS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "alias"}}}],
            "$(SECRET_ALIAS) (from a Secret",
        ),
    ],
)
def test_values_known_only_in_the_pod_are_never_taken_for_literal_words(
    tmp_path: Path, container: dict[str, Any], env: list[dict[str, Any]] | None, named: str
) -> None:
    code, out = run_import(chart(tmp_path, container, env), tmp_path / "apps")
    assert code == 1 and "same server command line" not in out
    assert named in out


# --------------------------------------------------------------------------- nothing added


@pytest.mark.helm
def test_a_draft_k_cache_type_alone_comes_back_alone(tmp_path: Path) -> None:
    folder = chart(
        tmp_path,
        {
            "image": "docker.io/aamsellem/llamacpp-atomic-mtp:0.1.0",
            "command": ["llama-server"],
            "args": [*LLAMA_ARGS, "-ctkd", "turbo3"],
        },
    )
    _, _, chart_argv, built_argv = round_trip(folder, tmp_path)
    assert "--cache-type-v-draft" not in built_argv and "-ctvd" not in built_argv
    assert argv_differences(chart_argv, built_argv, "llamacpp") == []


@pytest.mark.helm
@pytest.mark.parametrize(
    "image, command, args, kind",
    [
        (VLLM, ["vllm", "serve"], VLLM_ARGS, "vllm"),
        (OFFICIAL, ["/app/llama-server"], [a for a in LLAMA_ARGS if a not in ("-ngl", "99", "-fa", "on")], "llamacpp"),
    ],
)
def test_defaults_the_chart_left_to_the_server_are_not_written(
    tmp_path: Path, image: str, command: list[str], args: list[str], kind: str
) -> None:
    """vLLM's --kv-cache-dtype, --dtype and --download-dir, llama.cpp's -ngl and -fa: the spec says null."""
    _, spec_file, chart_argv, built_argv = round_trip(
        chart(tmp_path, {"image": image, "command": command, "args": args}), tmp_path
    )
    assert argv_differences(chart_argv, built_argv, kind) == []
    assert len(built_argv) == len(chart_argv)
    engine = yaml.safe_load(spec_file.read_text())["engine"]
    unset = ["kv_cache_dtype", "dtype", "download_dir"] if kind == "vllm" else ["n_gpu_layers", "flash_attn"]
    assert all(engine[name] is None for name in unset), engine


def test_a_flag_the_spec_adds_is_a_difference() -> None:
    chart_argv = ["vllm", "serve", "m", "--max-model-len", "4096"]
    assert argv_differences(chart_argv, [*chart_argv, "--kv-cache-dtype", "auto"], "vllm") == [
        "server argument --kv-cache-dtype auto: added by the spec's chart"
    ]


# --------------------------------------------------------------------------- the seed author's charts


REFERENCE_FOLDERS = ("reference/author-market", "reference/seed-market")


@pytest.mark.helm
def test_reference_charts_round_trip_exactly_or_are_refused_never_written_broken(tmp_path: Path) -> None:
    """Every chart: imported whole (exit 0) and built back to the same image and server command line, or
    refused (exit 1) by name; a written spec always builds. Measured: all 10 round-trip exactly."""
    charts = sorted(p for folder in REFERENCE_FOLDERS for p in shared(folder).iterdir() if (p / "Chart.yaml").is_file())
    counts = {"exact": 0, "refused": 0}
    for folder in charts:
        apps = tmp_path / folder.name / "apps"
        code, out = run_import(folder, apps)
        spec_file = apps / f"{folder.name}.yaml"
        if code:
            assert "not carried" in out or "no spec written" in out, out
            counts["refused"] += 1
            continue
        app = render_apps([spec_file])[0]  # a written spec builds, checks and all
        built = tmp_path / folder.name / "built"
        write_chart(app.chart, built)
        assert argv_differences(argv_of(folder), argv_of(built), app.spec.engine.kind) == [], folder.name
        assert image_of(built) == image_of(folder), folder.name
        counts["exact"] += 1
    assert counts == {"exact": len(charts), "refused": 0}
    assert len(charts) >= 10


def test_numbers_compare_as_the_server_reads_them_and_a_flag_never_takes_the_next_flag() -> None:
    chart_argv = ["vllm", "serve", "m", "--gpu-memory-utilization", "0.90"]
    assert argv_differences(chart_argv, [*chart_argv[:-1], "0.9"], "vllm") == []
    assert argv_differences(chart_argv, [*chart_argv[:-1], "0.95"], "vllm") != []
    # `-fa --jinja`: -fa without its value, never -fa set to --jinja and --jinja lost
    assert argv_differences(["llama-server", "-fa", "--jinja"], ["llama-server", "--jinja"], "llamacpp") == [
        "server argument --flash-attn: in the chart's command line, not in the spec's"
    ]


@pytest.mark.helm
def test_another_hugging_face_home_is_said(tmp_path: Path) -> None:
    folder = chart(
        tmp_path,
        {"image": VLLM, "command": ["vllm", "serve"], "args": VLLM_ARGS},
        env=[{"name": "HF_HOME", "value": "/models/hf"}],
    )
    out = round_trip(folder, tmp_path)[0]
    assert "note: env HF_HOME /models/hf: the spec's chart sets /models/huggingface" in out
