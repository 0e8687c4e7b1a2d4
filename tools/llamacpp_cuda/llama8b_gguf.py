"""A GGUF with Llama-3.1-8B's tensors and shapes (32 layers of 4096, 32 heads, 8 KV heads of 128, FFN 14336,
128,256-token vocabulary, untied output), its weights all zero blocks: the dense model class beside Gemma 4 E4B's
shapes (e4b_gguf.py), so a CUDA llama-server allocates what a real Q4_K_M file makes it allocate.

Tensor types follow llama.cpp's Q4_K_M rules (src/llama-quant.cpp): token_embd and the matrices Q4_K, output
Q6_K, attn_v and ffn_down Q6_K on the layers `use_more_bits` picks, Q4_K elsewhere; norms and rope_freqs F32.
The tokenizer is a plain SentencePiece-style list (the shapes, not the text, are what is measured).
Usage: python llama8b_gguf.py OUT.gguf (needs gguf-py, numpy).
"""

from __future__ import annotations

import sys

import gguf
import numpy as np

Q = gguf.GGMLQuantizationType
N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM = 32, 4096, 32, 8, 128
N_FF, N_VOCAB, CTX_TRAIN = 14336, 128256, 131072


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _tokens() -> tuple[list[str], list[int]]:
    special = ["<unk>", "<s>", "</s>"]
    tokens = [*special, *(f"<0x{b:02X}>" for b in range(256)), *(chr(c) for c in range(0x21, 0x7F)), "\u2581"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    tokens += [f"\u2581w{i}" for i in range(N_VOCAB - len(tokens))]
    return tokens, types + [gguf.TokenType.NORMAL] * (N_VOCAB - len(types))


def main(path: str) -> None:
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("llama-3.1-8b-shapes")
    w.add_context_length(CTX_TRAIN)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(500_000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(N_VOCAB)
    w.add_tokenizer_model("llama")
    tokens, types = _tokens()
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * N_VOCAB)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)

    def tensor(name: str, kind: Q, *shape: int) -> None:
        block, size = gguf.GGML_QUANT_SIZES[kind]
        if kind == Q.F32:
            w.add_tensor(name, np.ones(shape[::-1], np.float32))
        else:  # quantized data handed over as bytes: numpy (rows..., bytes per row)
            rows = (*shape[:0:-1], shape[0] // block * size)
            w.add_tensor(name, np.zeros(rows, np.uint8), raw_dtype=kind)

    tensor("token_embd.weight", Q.Q4_K, N_EMBD, N_VOCAB)
    tensor("output_norm.weight", Q.F32, N_EMBD)
    tensor("output.weight", Q.Q6_K, N_EMBD, N_VOCAB)
    tensor("rope_freqs.weight", Q.F32, HEAD_DIM // 2)
    for i in range(N_LAYER):
        blk, more = f"blk.{i}", _use_more_bits(i, N_LAYER)
        tensor(f"{blk}.attn_norm.weight", Q.F32, N_EMBD)
        tensor(f"{blk}.attn_q.weight", Q.Q4_K, N_EMBD, N_HEAD * HEAD_DIM)
        tensor(f"{blk}.attn_k.weight", Q.Q4_K, N_EMBD, N_HEAD_KV * HEAD_DIM)
        tensor(f"{blk}.attn_v.weight", Q.Q6_K if more else Q.Q4_K, N_EMBD, N_HEAD_KV * HEAD_DIM)
        tensor(f"{blk}.attn_output.weight", Q.Q4_K, N_HEAD * HEAD_DIM, N_EMBD)
        tensor(f"{blk}.ffn_norm.weight", Q.F32, N_EMBD)
        tensor(f"{blk}.ffn_gate.weight", Q.Q4_K, N_EMBD, N_FF)
        tensor(f"{blk}.ffn_up.weight", Q.Q4_K, N_EMBD, N_FF)
        tensor(f"{blk}.ffn_down.weight", Q.Q6_K if more else Q.Q4_K, N_FF, N_EMBD)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
