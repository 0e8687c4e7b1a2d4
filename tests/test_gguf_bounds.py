"""A GGUF header is hostile input: its counts and lengths are checked before they cost anything, and a refusal
names the file, the key and the bound (exit 1, nothing written). The reproducers are written here byte by byte
as sparse files (an empty string is 8 zero bytes, a long value a hole), so the 64 MB array of the report costs
no disk and no memory to make; the CLI runs in its own process under a memory limit and a timeout, so a read
that allocates or walks its way through them fails the test instead of the machine."""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from olarespack.core.errors import ModelDataError
from olarespack.models import gguf_header
from olarespack.models.gguf_file import read_gguf

REPO = "someone/tiny-GGUF"
U8, U32, STRING, ARRAY, F32_TENSOR = 0, 4, 8, 9, 0
DATA_LIMIT = 512 << 20  # the CLI reads a tiny model in well under this; the report's file took 12 GB
Chunk = bytes | int  # bytes, or a run of that many zero bytes left as a hole


def text(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, kind: int, *value: Chunk) -> list[Chunk]:
    return [text(key), struct.pack("<I", kind), *value]


def llama(*extra: list[Chunk], tensor: bool = True) -> list[Chunk]:
    """A one-layer llama header (valid for `model add`) with `extra` metadata entries, then its tensor data."""
    entries = [
        kv("general.architecture", STRING, text("llama")),
        kv("llama.block_count", U32, struct.pack("<I", 1)),
        kv("llama.embedding_length", U32, struct.pack("<I", 32)),
        kv("llama.attention.head_count", U32, struct.pack("<I", 2)),
        *extra,
    ]
    tensors = (
        [
            text("token_embd.weight"),
            struct.pack("<I", 2),
            struct.pack("<QQ", 32, 100),
            struct.pack("<IQ", F32_TENSOR, 0),
        ]
        if tensor
        else []
    )
    chunks: list[Chunk] = [b"GGUF", struct.pack("<IQQ", 3, 1 if tensor else 0, len(entries))]
    for entry in entries:
        chunks += entry
    chunks += tensors
    size = sum(c if isinstance(c, int) else len(c) for c in chunks)
    return [*chunks, -size % 32, 32 * 100 * 4 if tensor else 0]


def write(path: Path, chunks: list[Chunk]) -> Path:
    with path.open("wb") as out:
        for chunk in chunks:
            if isinstance(chunk, int):
                out.seek(chunk, os.SEEK_CUR)
            else:
                out.write(chunk)
        out.truncate()
    return path


def strings(count: int) -> list[Chunk]:
    """A string array of `count` empty strings: its items are all zero bytes."""
    return [struct.pack("<IQ", STRING, count), 8 * count]


def model_add(cwd: Path, path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """`olarespack model add --gguf path` in its own process, its data capped at DATA_LIMIT."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))

    code = "import sys; from olarespack.cli import main; sys.exit(main())"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, "model", "add", REPO, "--gguf", str(path)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=cap,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )
    return done, time.monotonic() - started


def assert_refused(tmp_path: Path, path: Path, *names: str) -> None:
    done, elapsed = model_add(tmp_path, path)
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert done.stderr.startswith(f"error: {path}: ") and all(name in done.stderr for name in names), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "models").exists()
    assert elapsed < 20  # refused at the count, before any walk or allocation: about a second


def test_the_reported_array_of_8_million_empty_strings_is_refused_at_its_count(tmp_path: Path) -> None:
    """The report's file: one string array of 8,000,000 empty strings (64 MB). main walked it and then built
    Python objects for every item: killed at 400 s with 12 GB in use."""
    path = write(tmp_path / "strings.gguf", llama(kv("tokenizer.ggml.tokens", ARRAY, *strings(8_000_000))))
    assert path.stat().st_size > 64_000_000
    assert_refused(
        tmp_path, path, "metadata tokenizer.ggml.tokens", "8000000 strings", f"at most {gguf_header.MAX_STRING_ITEMS}"
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # a string array, a number array and a string value declaring 2^39 of their items or bytes
        (
            kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, 1 << 39)),
            rf"tokenizer\.ggml\.tokens: an array of {1 << 39} items; at most {gguf_header.MAX_ARRAY_ITEMS} ",
        ),
        (
            kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", U8, 1 << 39)),
            rf"tokenizer\.ggml\.scores: an array of {1 << 39} items; at most {gguf_header.MAX_ARRAY_ITEMS} ",
        ),
        (
            kv("tokenizer.chat_template", STRING, struct.pack("<Q", 1 << 39)),
            rf"tokenizer\.chat_template: {1 << 39} bytes long \(at most {gguf_header.MAX_STRING}\)",
        ),
    ],
    ids=["string-array", "number-array", "string"],
)
def test_absurd_declared_sizes_are_refused_naming_the_key(tmp_path: Path, entry: list[Chunk], message: str) -> None:
    path = write(tmp_path / "absurd.gguf", llama(entry))
    with pytest.raises(ModelDataError, match=rf"^{path}: metadata {message}"):
        read_gguf(path)


def test_a_header_past_its_bound_is_refused(tmp_path: Path) -> None:
    """Nine 16 MiB texts (each within the text bound): a 144 MiB header, where a real one is under 16 MiB.
    main read and copied all of it, and `model add` wrote the model file."""
    pads = [kv(f"pad.{n}", STRING, struct.pack("<Q", gguf_header.MAX_STRING), gguf_header.MAX_STRING) for n in range(9)]
    path = write(tmp_path / "big-head.gguf", llama(*pads))
    with pytest.raises(ModelDataError, match=rf"^{path}: metadata pad\.7: runs past 128 MiB, the most a GGUF "):
        read_gguf(path)


def test_the_string_bound_counts_every_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gguf_header, "MAX_STRING_ITEMS", 1000)
    path = write(
        tmp_path / "two.gguf",
        llama(kv("tokenizer.ggml.tokens", ARRAY, *strings(600)), kv("tokenizer.ggml.merges", ARRAY, *strings(600))),
    )
    with pytest.raises(ModelDataError, match=rf"^{path}: metadata tokenizer\.ggml\.merges: .*at most 1000 "):
        read_gguf(path)


def test_the_walk_is_timed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gguf_header, "MAX_SECONDS", 0.0)
    path = write(tmp_path / "slow.gguf", llama(kv("tokenizer.ggml.tokens", ARRAY, *strings(10))))
    with pytest.raises(ModelDataError, match=rf"^{path}: reading the header took over 0 s"):
        read_gguf(path)


def test_a_real_size_vocabulary_reads_quickly(tmp_path: Path) -> None:
    """Gemma 4's 262,144 tokens and 514,906 merges (as strings), its scores and types: read in about a second
    with little memory (main: minutes and gigabytes, through the gguf library's reader)."""
    tokens = [text(f"t{i}") for i in range(262_144)]
    path = write(
        tmp_path / "vocab.gguf",
        llama(
            kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, len(tokens)), b"".join(tokens)),
            kv("tokenizer.ggml.merges", ARRAY, *strings(514_906)),
            kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", 6, 262_144), 4 * 262_144),
            kv("tokenizer.ggml.token_type", ARRAY, struct.pack("<IQ", 5, 262_144), 4 * 262_144),
        ),
    )
    done, elapsed = model_add(tmp_path, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "vocab_size: 262144" in (tmp_path / "models" / "tiny-gguf.yaml").read_text()
    assert elapsed < 30  # a second or two, loosely: main took minutes


U64 = 10


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            kv("llama.attention.head_count_kv", U64, struct.pack("<Q", 1 << 39)),
            rf"llama\.attention\.head_count_kv: {1 << 39} is past any model",
        ),
        (
            kv("llama.attention.key_length", U64, struct.pack("<Q", 1 << 39)),
            rf"llama\.attention\.key_length: {1 << 39} is past any model",
        ),
    ],
    ids=["kv-heads", "head-dim"],
)
def test_counts_past_any_model_are_refused_naming_the_key(tmp_path: Path, entry: list[Chunk], message: str) -> None:
    """2^39 KV heads were accepted and sized a KV cache of exabytes."""
    path = write(tmp_path / "heads.gguf", llama(entry))
    with pytest.raises(ModelDataError, match=rf"^{path}: metadata {message}"):
        read_gguf(path)


def test_an_alignment_that_is_not_a_uint32_is_refused(tmp_path: Path) -> None:
    """ggml's reader refuses the file; the default of 32 was used instead and the file was read as a model."""
    path = write(tmp_path / "aligned.gguf", llama(kv("general.alignment", U64, struct.pack("<Q", 64))))
    with pytest.raises(ModelDataError, match=rf"^{path}: general\.alignment is of GGUF type 10, not uint32"):
        read_gguf(path)
