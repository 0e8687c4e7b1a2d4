"""What `olarespack smoke --models` and `model add` read of a stranger's files is read bounded: the projector's
header through the bounded GGUF walker (not gguf-py's reader, which built every string: 55 s and 1.67 GB for a
million), a draft's config.json and a model's config.json through the bounded JSON reader (size, nesting, the
length of a number), and only the end of the server's log. The hostile files are written sparse, and the reads
that could allocate run in their own process under a memory cap."""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from olarespack.engines.llamacpp.smoke import projector_takes
from olarespack.engines.smoke import SmokeError
from olarespack.engines.vllm.smoke_files import layer_kinds, mixes_layer_kinds
from olarespack.smoke.run import log_tail
from test_gguf_bounds import ARRAY, STRING, kv, strings, text, write

DATA_LIMIT = 512 << 20
BOOL = 7


def projector(path: Path, *extra: list[bytes | int]) -> Path:
    """A projector header (clip) that says it encodes audio, with `extra` metadata entries."""
    entries = [kv("general.architecture", STRING, text("clip")), kv("clip.has_audio_encoder", BOOL, b"\x01"), *extra]
    chunks: list[bytes | int] = [b"GGUF", struct.pack("<IQQ", 3, 0, len(entries))]
    for entry in entries:
        chunks += entry
    return write(path, chunks)


def capped(code: str) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=cap,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )


def test_a_projector_with_a_million_strings_is_read_within_a_memory_cap(tmp_path: Path) -> None:
    path = projector(tmp_path / "mmproj.gguf", kv("junk", ARRAY, *strings(1_000_000)))
    done = capped(
        f"from olarespack.engines.llamacpp.smoke import projector_takes as p; print(sorted(p({str(path)!r})))"
    )
    assert done.returncode == 0 and done.stdout.strip() == "['audio']", done.stderr[-2000:]


@pytest.mark.parametrize(
    "entry", [kv("junk", ARRAY, *strings(1 << 40)), kv("junk", STRING, struct.pack("<Q", 1 << 50))]
)
def test_a_projector_past_a_bound_is_refused_naming_the_file(tmp_path: Path, entry: list[bytes | int]) -> None:
    path = projector(tmp_path / "mmproj.gguf", entry)
    with pytest.raises(SmokeError, match=f"projector {path}: "):
        projector_takes(path)


def test_a_projector_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mmproj.gguf"
    path.write_bytes(b"not a gguf file at all")
    with pytest.raises(SmokeError, match="not a GGUF file"):
        projector_takes(path)


@pytest.mark.parametrize(
    "config",
    [
        "[" * 100_000 + "]" * 100_000,  # nesting that exhausts the decoder's stack
        '{"layer_types": ["sliding_attention", "full_attention"], "n": ' + "9" * 5000 + "}",  # int() refuses it
        None,  # 240 MB (sparse): read no further than the bound
    ],
)
def test_a_drafts_hostile_config_is_read_bounded(tmp_path: Path, config: str | None) -> None:
    draft = tmp_path / "draft"
    draft.mkdir()
    if config is None:
        with (draft / "config.json").open("wb") as out:
            out.write(b'{"layer_types": [')
            out.truncate(240 << 20)
    else:
        (draft / "config.json").write_text(config, encoding="utf-8")
    assert layer_kinds(draft) == [] and mixes_layer_kinds(draft) is False


def test_a_drafts_config_still_says_its_layers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"text_config": {"layer_types": ["sliding_attention", "full_attention"]}}', encoding="utf-8"
    )
    assert layer_kinds(tmp_path) == ["sliding_attention", "full_attention"] and mixes_layer_kinds(tmp_path)


def test_model_add_refuses_a_5000_digit_integer_with_a_message(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": ' + "9" * 5000 + "}", encoding="utf-8")
    code, out = run_cli(tmp_path, "model", "add", "someone/model", "--config", str(config), "--weights-bytes", "1")
    assert code == 1 and f"{config}: invalid JSON" in out and "Traceback" not in out, out
    assert not (tmp_path / "models").exists()


def test_only_the_end_of_the_servers_log_is_read(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        out.truncate(1 << 30)  # a gigabyte of nothing (sparse), then the engine's last words
        out.seek(0, os.SEEK_END)
        out.write(b"\nValueError: the reason\n")
    tail = log_tail(log, 1 << 20)
    assert len(tail) == 1 << 20 and tail.endswith("ValueError: the reason\n")


# --- what smoke prints of the engine's answers and log, and what it leaves behind ---------------------------------


def test_an_answers_tool_call_is_shown_short_and_escaped() -> None:
    from olarespack.engines.client import Reply
    from olarespack.engines.smoke import tool_request
    from olarespack.smoke.run import _checked

    body = {
        "choices": [
            {
                "message": {
                    "tool_calls": [
                        {"function": {"name": "\x1b]0;owned\x07" + "n" * 5000, "arguments": "\r\nok: forged line"}}
                    ]
                }
            }
        ]
    }
    said = _checked(tool_request(), Reply(2, 20, 0.1, body=body), real=False, chat_prompt=None).said
    assert "\x1b" not in said and "\r" not in said and "\n" not in said and len(said) < 300
    odd = {"choices": [{"message": {"tool_calls": [{"function": "not an object"}, 7]}}]}
    assert not _checked(tool_request(), Reply(2, 20, 0.1, body=odd), real=True, chat_prompt=None).ok


def test_smoke_prints_strangers_text_escaped_and_cleans_up_after_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from olarespack.engines.smoke import Booting, Change, ModelFiles, Runtime
    from olarespack.smoke import run
    from olarespack.smoke.run import Answer, SmokeReport

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spec = Path(__file__).resolve().parents[1] / "apps" / "gemma4-audio.yaml"

    def answered(spec_file: Path, work: Path, **_: object) -> SmokeReport:
        booting = Booting([], {}, 1, [Change("env X", "\x1b[2J", "(refused)", "why")])
        report = SmokeReport(
            str(spec_file), Runtime(Path("/x"), "b1", "x"), ModelFiles({}, False), booting, work / "server.log"
        )
        report.answers.append(Answer("chat", False, "said '\x1b]8;;http://x\x07'\nok: forged"))
        return report

    monkeypatch.setattr(run, "smoke", answered)
    code, out = run_cli(None, "smoke", "--tiny", str(spec))
    assert code == 1 and "\x1b" not in out and "\nok: forged" not in out and "\\x1b[2J" in out, out

    def broken(spec_file: Path, work: Path, **_: object) -> SmokeReport:
        (work / "server.log").write_text("partial", encoding="utf-8")
        raise RuntimeError("an internal error")

    monkeypatch.setattr(run, "smoke", broken)
    kept = set(tmp_path.glob("olarespack-smoke-*"))  # the refused smoke's folder, which its report names
    assert len(kept) == 1
    code, out = run_cli(None, "smoke", "--tiny", str(spec))
    assert code == 4 and "Traceback" not in out, out
    assert set(tmp_path.glob("olarespack-smoke-*")) == kept, "a smoke that ended in an error left its folder"
