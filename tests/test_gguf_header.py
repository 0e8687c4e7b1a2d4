"""The GGUF header reader on a real tiny Gemma 4 file (engines/llamacpp/tiny_gguf.py): the per-layer input width and the
tensors llama.cpp keeps in host memory."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from olarespack.core.errors import ModelDataError
from olarespack.engines.llamacpp import tiny_gguf
from olarespack.models import hf_config
from olarespack.models.gguf_file import read_gguf

F32 = 4


def write_llama(path: Path, tensors: dict[str, np.ndarray], tokens: int = 100) -> Path:
    """A one-layer llama GGUF holding these tensors (and a vocabulary of `tokens` names, none when 0)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_embedding_length(32)
    writer.add_head_count(2)
    if tokens:
        writer.add_token_list([f"t{i}" for i in range(tokens)])
    for name, data in tensors.items():
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gemma4_header_gives_the_per_layer_width_and_the_host_tensors(tmp_path: Path) -> None:
    path = tiny_gguf.write_gemma4(tmp_path / "tiny-gemma4.gguf", n_layer=6, n_embd=64, n_embd_per_layer=16)
    header = read_gguf(path)
    config = header.config or {}
    assert config["hidden_size_per_layer_input"] == 16
    model = hf_config.arch_from_hf_config(config)
    assert model.per_layer_input_size == 16 and model.hidden_size == 64 and model.num_hidden_layers == 6
    n_vocab = len(tiny_gguf._vocab())
    token_embd, per_layer = n_vocab * 64 * F32, n_vocab * 16 * 6 * F32
    # both input tables stay in the host mapping; with no output.weight the output is tied to token_embd,
    # which llama.cpp therefore also copies to the GPU
    assert header.host_bytes == token_embd + per_layer
    assert header.gpu_copy_bytes == token_embd


def test_a_file_without_per_layer_inputs_keeps_only_token_embd_on_the_host(tmp_path: Path) -> None:
    header = read_gguf(tiny_gguf.write_dense(tmp_path / "tiny-llama.gguf", n_embd=256))
    assert "hidden_size_per_layer_input" not in (header.config or {})
    assert hf_config.arch_from_hf_config(header.config or {}).per_layer_input_size is None
    token_embd = len(tiny_gguf._vocab()) * 256 * F32
    assert header.host_bytes == header.gpu_copy_bytes == token_embd  # tied: no output.weight


def test_an_untied_output_leaves_token_embd_on_the_host_alone(tmp_path: Path) -> None:
    path = write_llama(
        tmp_path / "untied.gguf",
        {
            "token_embd.weight": np.zeros((100, 32), dtype=np.float16),
            "output.weight": np.zeros((100, 32), dtype=np.float16),
        },
    )
    header = read_gguf(path)
    assert header.host_bytes == 100 * 32 * 2 and header.gpu_copy_bytes == 0


def test_the_header_alone_gives_the_whole_files_facts(tmp_path: Path) -> None:
    """A ranged download of a file's start (`curl -r 0-33554431`): the tensor types and sizes are in its header,
    so the facts, the host part and the file's size are the whole file's, exactly."""
    whole = tiny_gguf.write_gemma4(tmp_path / "tiny-gemma4.gguf", n_layer=6, n_embd=64, n_embd_per_layer=16)
    data = whole.read_bytes()
    full = read_gguf(whole)
    reader = gguf.GGUFReader(str(whole))
    for cut in (reader.data_offset, reader.data_offset + 1000, len(data) - 1):
        part = tmp_path / "head.gguf"
        part.write_bytes(data[:cut])
        header = read_gguf(part)
        assert (header.bytes, header.sha256, header.config, header.host_bytes, header.gpu_copy_bytes) == (
            len(data),
            full.sha256,
            full.config,
            full.host_bytes,
            full.gpu_copy_bytes,
        )
        assert (
            header.notes[0] == f"head.gguf: read from its first {cut} bytes (the header); its size {len(data)} "
            "is the one its tensor index gives"
        )
    assert full.notes == ()


def test_the_header_alone_counts_the_padding_after_the_last_tensor(tmp_path: Path) -> None:
    """Writers pad every tensor's data to the alignment, the last one too: a last tensor of 12 bytes still
    ends the file on a 32-byte boundary, and a download cut inside the padding before the data hashes the same
    header."""
    whole = write_llama(
        tmp_path / "odd.gguf",
        {
            "token_embd.weight": np.zeros((100, 32), dtype=np.float16),
            "output_norm.weight": np.zeros(3, dtype=np.float32),
        },
    )  # 12 bytes
    data = whole.read_bytes()
    full = read_gguf(whole)
    reader = gguf.GGUFReader(str(whole))
    last = reader.tensors[-1].field  # the tensor index ends with the last tensor's entry, then zero padding
    index_end = last.offset + sum(part.nbytes for part in last.parts)
    assert index_end < reader.data_offset  # there is padding to cut inside
    for cut in (reader.data_offset, index_end):
        part = tmp_path / "head.gguf"
        part.write_bytes(data[:cut])
        header = read_gguf(part)
        assert (header.bytes, header.sha256) == (len(data), full.sha256), cut


def test_a_download_that_stops_inside_the_tensor_index_is_refused(tmp_path: Path) -> None:
    whole = tiny_gguf.write_dense(tmp_path / "tiny-llama.gguf", n_embd=256)
    offset = gguf.GGUFReader(str(whole)).data_offset
    part = tmp_path / "short.gguf"
    part.write_bytes(whole.read_bytes()[: offset - 40])
    with pytest.raises(ModelDataError, match="must reach the end of its tensor index"):
        read_gguf(part)


def test_an_index_that_describes_an_impossible_file_is_refused(tmp_path: Path) -> None:
    """A crafted tensor offset cannot make olarespack create or map a file of that size."""
    path = write_llama(
        tmp_path / "crafted.gguf", {"token_embd.weight": np.zeros((100, 32), dtype=np.float16)}, tokens=0
    )
    data = bytearray(path.read_bytes())
    reader = gguf.GGUFReader(str(path))
    (tensor,) = reader.tensors
    # the tensor's data offset (the index's last 8 bytes before the alignment padding) pushed past 4 TiB
    at = bytes(data).index(b"token_embd.weight") + len(b"token_embd.weight") + 4 + 2 * 8 + 4
    data[at : at + 8] = (1 << 43).to_bytes(8, "little")
    path.write_bytes(bytes(data[: reader.data_offset]))
    with pytest.raises(ModelDataError, match="more than any model file"):
        read_gguf(path)
    assert tensor.n_elements == 3200
