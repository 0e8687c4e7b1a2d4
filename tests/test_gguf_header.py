"""The GGUF header reader on a real tiny Gemma 4 file (tests/tiny_gguf.py): the per-layer input width and the
tensors llama.cpp keeps in host memory."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

import tiny_gguf
from olarespack.models import arch
from olarespack.models.gguf_file import read_gguf

F32 = 4


def test_gemma4_header_gives_the_per_layer_width_and_the_host_tensors(tmp_path: Path) -> None:
    path = tiny_gguf.write_gemma4(tmp_path / "tiny-gemma4.gguf", n_layer=6, n_embd=64, n_embd_per_layer=16)
    header = read_gguf(path)
    config = header.config or {}
    assert config["hidden_size_per_layer_input"] == 16
    model = arch.arch_from_hf_config(config)
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
    assert arch.arch_from_hf_config(header.config or {}).per_layer_input_size is None
    token_embd = len(tiny_gguf._vocab()) * 256 * F32
    assert header.host_bytes == header.gpu_copy_bytes == token_embd  # tied: no output.weight


def test_an_untied_output_leaves_token_embd_on_the_host_alone(tmp_path: Path) -> None:
    path = tmp_path / "untied.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_embedding_length(32)
    writer.add_head_count(2)
    writer.add_token_list([f"t{i}" for i in range(100)])
    writer.add_tensor("token_embd.weight", np.zeros((100, 32), dtype=np.float16))
    writer.add_tensor("output.weight", np.zeros((100, 32), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    header = read_gguf(path)
    assert header.host_bytes == 100 * 32 * 2 and header.gpu_copy_bytes == 0
