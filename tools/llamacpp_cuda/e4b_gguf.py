"""A GGUF with Gemma 4 E4B's exact tensors, shapes and vocabulary size, its weights all zero blocks, so a
CUDA llama-server allocates what the real Q4_K_M file makes it allocate without the 5 GB download.

Tensor types follow a Q4_K_M file: token_embd Q6_K, per_layer_token_embd Q4_K (an assumption), matrices Q4_K
with attn_v / ffn_down Q6_K, norms and scales F32. Usage: python e4b_gguf.py OUT.gguf (needs gguf-py, numpy).
"""

from __future__ import annotations

import sys

import gguf
import numpy as np

Q = gguf.GGMLQuantizationType
N_LAYER, N_KV_SHARED, SWA_PERIOD = 42, 18, 6
N_EMBD, N_HEAD, N_HEAD_KV, HEAD_SWA, HEAD_FULL = 2560, 8, 2, 256, 512
N_FF, N_EMBD_PER_LAYER, N_VOCAB, CTX_TRAIN = 10240, 256, 262144, 131072


def _tokens() -> tuple[list[str], list[int]]:
    special = ["<pad>", "<eos>", "<bos>", "<unk>"]
    tokens = [*special, *(f"<0x{b:02X}>" for b in range(0x80)), *(chr(c) for c in range(0x21, 0x7F)), "\u2581"]
    types = [gguf.TokenType.CONTROL] * 4 + [gguf.TokenType.BYTE] * 0x80
    tokens += [f"\u2581w{i}" for i in range(N_VOCAB - len(tokens))]
    return tokens, types + [gguf.TokenType.NORMAL] * (N_VOCAB - len(types))


def main(path: str) -> None:
    pattern = [(i + 1) % SWA_PERIOD != 0 for i in range(N_LAYER)]
    w = gguf.GGUFWriter(path, "gemma4")
    w.add_name("gemma-4-e4b-shapes")
    w.add_context_length(CTX_TRAIN)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_FULL)
    w.add_value_length(HEAD_FULL)
    w.add_key_length_swa(HEAD_SWA)
    w.add_value_length_swa(HEAD_SWA)
    w.add_rope_dimension_count(HEAD_FULL)
    w.add_rope_dimension_count_swa(HEAD_SWA)
    w.add_rope_freq_base(1_000_000.0)
    w.add_rope_freq_base_swa(10_000.0)
    w.add_sliding_window(512)
    w.add_sliding_window_pattern(pattern)
    w.add_shared_kv_layers(N_KV_SHARED)
    w.add_embedding_length_per_layer_input(N_EMBD_PER_LAYER)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_final_logit_softcapping(30.0)
    w.add_tokenizer_model("gemma4")
    w.add_tokenizer_pre("gemma4")
    tokens, types = _tokens()
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * N_VOCAB)
    w.add_token_types(types)
    w.add_token_merges(["\u2581 a"])
    w.add_pad_token_id(0)
    w.add_eos_token_id(1)
    w.add_bos_token_id(2)
    w.add_unk_token_id(3)
    w.add_add_bos_token(True)

    def tensor(name: str, kind: Q, *shape: int) -> None:
        block, size = gguf.GGML_QUANT_SIZES[kind]
        # ggml shape {ne0, ne1}: rows of ne0 values; raw_shape is numpy order
        if kind == Q.F32:
            w.add_tensor(name, np.ones(shape[::-1], np.float32))
        else:  # quantized data is handed over as bytes: numpy (rows..., bytes per row)
            rows = (*shape[:0:-1], shape[0] // block * size)
            w.add_tensor(name, np.zeros(rows, np.uint8), raw_dtype=kind)

    tensor("token_embd.weight", Q.Q6_K, N_EMBD, N_VOCAB)
    tensor("per_layer_token_embd.weight", Q.Q4_K, N_EMBD_PER_LAYER * N_LAYER, N_VOCAB)
    tensor("per_layer_model_proj.weight", Q.BF16, N_EMBD, N_EMBD_PER_LAYER * N_LAYER)
    tensor("per_layer_proj_norm.weight", Q.F32, N_EMBD_PER_LAYER)
    tensor("output_norm.weight", Q.F32, N_EMBD)
    tensor("rope_freqs.weight", Q.F32, HEAD_FULL // 2)
    for i, swa in enumerate(pattern):
        head = HEAD_SWA if swa else HEAD_FULL
        blk = f"blk.{i}"
        tensor(f"{blk}.attn_norm.weight", Q.F32, N_EMBD)
        tensor(f"{blk}.attn_q.weight", Q.Q4_K, N_EMBD, head * N_HEAD)
        if i < N_LAYER - N_KV_SHARED:
            tensor(f"{blk}.attn_k.weight", Q.Q4_K, N_EMBD, head * N_HEAD_KV)
            tensor(f"{blk}.attn_v.weight", Q.Q6_K, N_EMBD, head * N_HEAD_KV)
            tensor(f"{blk}.attn_k_norm.weight", Q.F32, head)
        tensor(f"{blk}.attn_output.weight", Q.Q4_K, head * N_HEAD, N_EMBD)
        tensor(f"{blk}.attn_q_norm.weight", Q.F32, head)
        tensor(f"{blk}.post_attention_norm.weight", Q.F32, N_EMBD)
        tensor(f"{blk}.layer_output_scale.weight", Q.F32, 1)
        tensor(f"{blk}.ffn_norm.weight", Q.F32, N_EMBD)
        tensor(f"{blk}.ffn_gate.weight", Q.Q4_K, N_EMBD, N_FF)
        tensor(f"{blk}.ffn_up.weight", Q.Q4_K, N_EMBD, N_FF)
        tensor(f"{blk}.ffn_down.weight", Q.Q6_K, N_FF, N_EMBD)
        tensor(f"{blk}.post_ffw_norm.weight", Q.F32, N_EMBD)
        tensor(f"{blk}.inp_gate.weight", Q.Q4_K, N_EMBD, N_EMBD_PER_LAYER)
        tensor(f"{blk}.proj.weight", Q.Q4_K, N_EMBD_PER_LAYER, N_EMBD)
        tensor(f"{blk}.post_norm.weight", Q.F32, N_EMBD)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
