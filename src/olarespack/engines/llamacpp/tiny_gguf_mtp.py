"""A tiny GLM-4.5 GGUF with its MTP layer, for the tests that boot llama-server's built-in MTP drafting
(tiny_gguf.py's helpers: the vocabulary, the tokenizer, the file's end)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from olarespack.engines.llamacpp.tiny_gguf import _add_tokenizer, _finish, _vocab


def write_glm4moe(
    path: Path,
    *,
    n_trunk: int = 3,
    n_nextn: int = 1,
    n_embd: int = 128,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_expert: int = 4,
    n_expert_used: int = 2,
    n_ff: int = 256,
    n_ff_exp: int = 64,
    seed: int = 5,
) -> Path:
    """GLM-4.5 (`glm4moe`) in miniature with its MTP layer: a dense first layer, then MoE layers (a router with
    its bias, `n_expert` experts and one shared), Q/K/V biases, and `n_nextn` MTP layers after the trunk
    (`nextn.*` tensors, `glm4moe.nextn_predict_layers`), which llama-server drafts with (`--spec-type
    draft-mtp`, from b9180); about 3 MB of F32 weights by default."""
    rng = np.random.default_rng(seed)
    tokens = _vocab()
    head = n_embd // n_head
    writer = gguf.GGUFWriter(str(path), "glm4moe")
    writer.add_name("tiny-glm4moe")
    writer.add_context_length(32768)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_trunk + n_nextn)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head)
    writer.add_value_length(head)
    writer.add_rope_dimension_count(head // 2)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_feed_forward_length(n_ff)
    writer.add_expert_count(n_expert)
    writer.add_expert_used_count(n_expert_used)
    writer.add_expert_feed_forward_length(n_ff_exp)
    writer.add_expert_shared_count(1)
    writer.add_leading_dense_block_count(1)
    writer.add_uint32("glm4moe.nextn_predict_layers", n_nextn)
    _add_tokenizer(writer, tokens)

    def tensor(name: str, *shape: int, ones: bool = False) -> None:
        data = np.ones(shape[::-1], np.float32) if ones else rng.normal(0, 0.02, shape[::-1]).astype(np.float32)
        writer.add_tensor(name, data)

    tensor("token_embd.weight", n_embd, len(tokens))
    tensor("output_norm.weight", n_embd, ones=True)
    for i in range(n_trunk + n_nextn):
        blk = f"blk.{i}"
        tensor(f"{blk}.attn_norm.weight", n_embd, ones=True)
        for name, width in (("q", head * n_head), ("k", head * n_head_kv), ("v", head * n_head_kv)):
            tensor(f"{blk}.attn_{name}.weight", n_embd, width)
            tensor(f"{blk}.attn_{name}.bias", width)
        tensor(f"{blk}.attn_output.weight", head * n_head, n_embd)
        tensor(f"{blk}.post_attention_norm.weight", n_embd, ones=True)
        if i == 0:
            tensor(f"{blk}.ffn_gate.weight", n_embd, n_ff)
            tensor(f"{blk}.ffn_up.weight", n_embd, n_ff)
            tensor(f"{blk}.ffn_down.weight", n_ff, n_embd)
        else:
            tensor(f"{blk}.ffn_gate_inp.weight", n_embd, n_expert)
            tensor(f"{blk}.exp_probs_b.bias", n_expert)
            for part in ("gate", "up"):
                tensor(f"{blk}.ffn_{part}_exps.weight", n_embd, n_ff_exp, n_expert)
                tensor(f"{blk}.ffn_{part}_shexp.weight", n_embd, n_ff_exp)
            tensor(f"{blk}.ffn_down_exps.weight", n_ff_exp, n_embd, n_expert)
            tensor(f"{blk}.ffn_down_shexp.weight", n_ff_exp, n_embd)
        if i >= n_trunk:
            tensor(f"{blk}.nextn.eh_proj.weight", 2 * n_embd, n_embd)
            for norm in ("enorm", "hnorm", "shared_head_norm"):
                tensor(f"{blk}.nextn.{norm}.weight", n_embd, ones=True)
    _finish(writer)
    return path
