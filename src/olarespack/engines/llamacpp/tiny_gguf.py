"""Tiny GGUF files of the architectures the apps serve, written with the `gguf` package: random weights, real
layout, so that a real llama-server loads them, builds its graphs and answers in a fraction of a second.

`write_gemma4(path)` mirrors Gemma 4 E4B's shape in miniature: per-layer token embeddings, a sliding-window
(iSWA) pattern of two SWA layers then one full-attention layer, full-attention heads twice as wide as the SWA
ones, and a KV-shared tail. llama.cpp maps each shared layer to the last KV layer of the same kind before the
tail, so the tail must start right after a full-attention layer (else `map_layer_ids.find(il_reuse)` asserts).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import gguf
import numpy as np

ARCH = "gemma4"
SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]  # ids 0-3, as Gemma's tokenizers number them
N_BYTES = 0x80


def _vocab() -> list[str]:
    """Special tokens, the ASCII bytes as <0xXX> (the fallback of Gemma 4's non-byte-encoded BPE), then the
    printable ASCII characters and SentencePiece's word marker, so any ASCII prompt tokenizes. No byte above
    0x7F: random weights would string such bytes into invalid UTF-8, which some builds' output parser refuses."""
    tokens = [*SPECIAL, *(f"<0x{b:02X}>" for b in range(N_BYTES))]
    tokens += [chr(c) for c in range(0x21, 0x7F)]
    tokens.append("\u2581")
    return tokens


def _add_tokenizer(writer: gguf.GGUFWriter, tokens: list[str]) -> None:
    """Gemma 4's BPE tokenizer over `tokens`: every tiny model here uses it, whatever its architecture, since
    llama.cpp takes the tokenizer from its own keys, not from the architecture's."""
    n_vocab = len(tokens)
    writer.add_tokenizer_model("gemma4")
    writer.add_tokenizer_pre("gemma4")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * n_vocab)
    types = [gguf.TokenType.CONTROL] * len(SPECIAL) + [gguf.TokenType.BYTE] * N_BYTES
    writer.add_token_types(types + [gguf.TokenType.NORMAL] * (n_vocab - len(types)))
    writer.add_token_merges(["\u2581 a"])  # one merge: the BPE reader needs the list, not its size
    writer.add_pad_token_id(0)
    writer.add_eos_token_id(1)
    writer.add_bos_token_id(2)
    writer.add_unk_token_id(3)
    writer.add_add_bos_token(True)


def _gemma4_layout(n_layer: int, swa_period: int, n_kv_shared: int) -> list[bool]:
    """Which layers use the sliding window: `swa_period - 1` SWA layers then one full-attention layer."""
    pattern = [(i + 1) % swa_period != 0 for i in range(n_layer)]
    tail = n_layer - n_kv_shared
    if not 0 < n_kv_shared < n_layer or pattern[tail - 1]:
        raise ValueError("the KV-shared tail must start right after a full-attention layer")
    if all(pattern[:tail]) or not any(pattern[:tail]):
        raise ValueError("the KV layers before the tail need both a SWA and a full-attention layer")
    return pattern


def write_gemma4(
    path: Path,
    *,
    n_layer: int = 6,
    swa_period: int = 3,
    n_kv_shared: int = 3,
    n_embd: int = 64,
    n_head: int = 2,
    n_head_kv: int = 1,
    head_swa: int = 32,
    head_full: int = 64,
    n_ff: int = 128,
    n_embd_per_layer: int = 16,
    ctx_train: int = 131072,
    seed: int = 0,
) -> Path:
    """A Gemma 4 text model in miniature (about 0.3 MB of F32 weights) at `path`."""
    pattern = _gemma4_layout(n_layer, swa_period, n_kv_shared)
    rng = np.random.default_rng(seed)
    tokens = _vocab()
    n_vocab = len(tokens)
    writer = gguf.GGUFWriter(str(path), ARCH)
    writer.add_name("tiny-gemma4")
    writer.add_context_length(ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head_full)
    writer.add_value_length(head_full)
    writer.add_key_length_swa(head_swa)
    writer.add_value_length_swa(head_swa)
    writer.add_rope_dimension_count(head_full)
    writer.add_rope_dimension_count_swa(head_swa)  # else the SWA layers rotate as many dims as the full ones
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_rope_freq_base_swa(10_000.0)
    writer.add_sliding_window(512)
    writer.add_sliding_window_pattern(pattern)
    writer.add_shared_kv_layers(n_kv_shared)
    writer.add_embedding_length_per_layer_input(n_embd_per_layer)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_final_logit_softcapping(30.0)
    _add_tokenizer(writer, tokens)

    def tensor(name: str, *shape: int, ones: bool = False) -> None:
        # numpy shapes are ggml's reversed: a ggml {n_embd, n_vocab} matrix is numpy (n_vocab, n_embd)
        data = np.ones(shape[::-1], np.float32) if ones else rng.normal(0, 0.02, shape[::-1]).astype(np.float32)
        writer.add_tensor(name, data)

    tensor("token_embd.weight", n_embd, n_vocab)
    tensor("per_layer_token_embd.weight", n_embd_per_layer * n_layer, n_vocab)
    tensor("per_layer_model_proj.weight", n_embd, n_embd_per_layer * n_layer)
    tensor("per_layer_proj_norm.weight", n_embd_per_layer, ones=True)
    tensor("output_norm.weight", n_embd, ones=True)
    tensor("rope_freqs.weight", head_full // 2, ones=True)
    for i, swa in enumerate(pattern):
        head = head_swa if swa else head_full
        has_kv = i < n_layer - n_kv_shared
        blk = f"blk.{i}"
        tensor(f"{blk}.attn_norm.weight", n_embd, ones=True)
        tensor(f"{blk}.attn_q.weight", n_embd, head * n_head)
        if has_kv:
            tensor(f"{blk}.attn_k.weight", n_embd, head * n_head_kv)
            tensor(f"{blk}.attn_v.weight", n_embd, head * n_head_kv)
            tensor(f"{blk}.attn_k_norm.weight", head, ones=True)
        tensor(f"{blk}.attn_output.weight", head * n_head, n_embd)
        tensor(f"{blk}.attn_q_norm.weight", head, ones=True)
        tensor(f"{blk}.post_attention_norm.weight", n_embd, ones=True)
        tensor(f"{blk}.layer_output_scale.weight", 1, ones=True)
        tensor(f"{blk}.ffn_norm.weight", n_embd, ones=True)
        tensor(f"{blk}.ffn_gate.weight", n_embd, n_ff)
        tensor(f"{blk}.ffn_up.weight", n_embd, n_ff)
        tensor(f"{blk}.ffn_down.weight", n_ff, n_embd)
        tensor(f"{blk}.post_ffw_norm.weight", n_embd, ones=True)
        tensor(f"{blk}.inp_gate.weight", n_embd, n_embd_per_layer)
        tensor(f"{blk}.proj.weight", n_embd_per_layer, n_embd)
        tensor(f"{blk}.post_norm.weight", n_embd, ones=True)
    _finish(writer)
    return path


def write_dense(
    path: Path,
    *,
    arch: str = "llama",
    n_layer: int = 4,
    n_embd: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 512,
    ctx_train: int = 32768,
    seed: int = 2,
) -> Path:
    """A dense Llama-style decoder in miniature (`arch` llama or qwen3; qwen3 adds Q and K norms): every layer
    full attention with grouped KV heads, head size n_embd / n_head; about 9 MB of F32 weights by default."""
    return _write_decoder(
        path,
        arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        ctx_train=ctx_train,
        seed=seed,
    )


def write_moe(
    path: Path,
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_expert: int = 8,
    n_expert_used: int = 2,
    n_ff_exp: int = 128,
    ctx_train: int = 32768,
    seed: int = 3,
) -> Path:
    """A Qwen3 MoE (`qwen3moe`) in miniature: full attention with Q and K norms, a router and `n_expert`
    gate/up/down experts per layer, `n_expert_used` of them per token; about 8 MB of F32 weights by default."""
    return _write_decoder(
        path,
        "qwen3moe",
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff_exp,
        ctx_train=ctx_train,
        seed=seed,
        experts=(n_expert, n_expert_used),
    )


def _write_decoder(
    path: Path,
    arch: str,
    *,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
    ctx_train: int,
    seed: int,
    experts: tuple[int, int] | None = None,
) -> Path:
    rng = np.random.default_rng(seed)
    tokens = _vocab()
    head = n_embd // n_head
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}")
    writer.add_context_length(ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_feed_forward_length(n_ff)
    if experts:
        writer.add_expert_count(experts[0])
        writer.add_expert_used_count(experts[1])
        writer.add_expert_feed_forward_length(n_ff)
    _add_tokenizer(writer, tokens)

    def tensor(name: str, *shape: int, ones: bool = False) -> None:
        data = np.ones(shape[::-1], np.float32) if ones else rng.normal(0, 0.02, shape[::-1]).astype(np.float32)
        writer.add_tensor(name, data)

    norms = arch != "llama"  # Qwen3's per-head Q and K RMS norms
    tensor("token_embd.weight", n_embd, len(tokens))
    tensor("output_norm.weight", n_embd, ones=True)
    for i in range(n_layer):
        blk = f"blk.{i}"
        tensor(f"{blk}.attn_norm.weight", n_embd, ones=True)
        tensor(f"{blk}.attn_q.weight", n_embd, head * n_head)
        tensor(f"{blk}.attn_k.weight", n_embd, head * n_head_kv)
        tensor(f"{blk}.attn_v.weight", n_embd, head * n_head_kv)
        tensor(f"{blk}.attn_output.weight", head * n_head, n_embd)
        if norms:
            tensor(f"{blk}.attn_q_norm.weight", head, ones=True)
            tensor(f"{blk}.attn_k_norm.weight", head, ones=True)
        tensor(f"{blk}.ffn_norm.weight", n_embd, ones=True)
        if experts:
            tensor(f"{blk}.ffn_gate_inp.weight", n_embd, experts[0])
            tensor(f"{blk}.ffn_gate_exps.weight", n_embd, n_ff, experts[0])
            tensor(f"{blk}.ffn_up_exps.weight", n_embd, n_ff, experts[0])
            tensor(f"{blk}.ffn_down_exps.weight", n_ff, n_embd, experts[0])
        else:
            tensor(f"{blk}.ffn_gate.weight", n_embd, n_ff)
            tensor(f"{blk}.ffn_up.weight", n_embd, n_ff)
            tensor(f"{blk}.ffn_down.weight", n_ff, n_embd)
    _finish(writer)
    return path


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def gguf_keys(path: Path) -> dict[str, object]:
    """The scalar metadata of a GGUF file (arrays by length), for tests that check what was written."""
    reader = gguf.GGUFReader(str(path))
    found: dict[str, object] = {}
    for field in reader.fields.values():
        value: object = field.contents()
        found[field.name] = len(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
    return found


def write_gemma4_audio_projector(
    path: Path,
    *,
    n_embd_text: int = 64,
    n_embd: int = 32,
    n_head: int = 2,
    n_ff: int = 64,
    n_layer: int = 2,
    n_mel: int = 128,
    channels: int = 4,
    seed: int = 1,
) -> Path:
    """A Gemma 4 audio projector (`gemma4a`: llama.cpp's USM Conformer encoder) in miniature: two stride-2
    Conv2D subsampling layers, Conformer blocks (half-step FFNs, chunked self-attention with relative positions,
    depthwise light conv) and the multimodal embedder into the text model's width `n_embd_text`."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name("tiny-gemma4-audio")
    writer.add_bool("clip.has_vision_encoder", False)
    writer.add_bool("clip.has_audio_encoder", True)
    writer.add_string("clip.audio.projector_type", "gemma4a")
    writer.add_uint32("clip.audio.embedding_length", n_embd)
    writer.add_uint32("clip.audio.feed_forward_length", n_ff)
    writer.add_uint32("clip.audio.block_count", n_layer)
    writer.add_uint32("clip.audio.attention.head_count", n_head)
    writer.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-6)
    writer.add_uint32("clip.audio.projection_dim", n_embd_text)
    writer.add_uint32("clip.audio.num_mel_bins", n_mel)

    def tensor(name: str, *shape: int, ones: bool = False) -> None:
        data = np.ones(shape[::-1], np.float32) if ones else rng.normal(0, 0.05, shape[::-1]).astype(np.float32)
        writer.add_tensor(name, data)

    d_head = n_embd // n_head
    freq = n_mel
    for i, c_in in enumerate((1, channels)):
        tensor(f"a.conv1d.{i}.weight", 3, 3, c_in, channels)  # ggml conv2d kernel: KW, KH, Cin, Cout
        tensor(f"a.conv1d.{i}.norm.weight", channels, ones=True)
        freq = (freq - 1) // 2 + 1
    tensor("a.input_projection.weight", channels * freq, n_embd)
    for il in range(n_layer):
        blk = f"a.blk.{il}"
        for ffn in ("ffn_norm", "ffn_norm_1", "ffn_post_norm", "ffn_post_norm_1", "attn_pre_norm",
                    "attn_post_norm", "norm_conv", "conv_norm", "ln2"):  # fmt: skip
            tensor(f"{blk}.{ffn}.weight", n_embd, ones=True)
        for up, down in (("ffn_up", "ffn_down"), ("ffn_up_1", "ffn_down_1")):
            tensor(f"{blk}.{up}.weight", n_embd, n_ff)
            tensor(f"{blk}.{down}.weight", n_ff, n_embd)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out", "attn_k_rel", "conv_pw2"):
            tensor(f"{blk}.{proj}.weight", n_embd, n_embd)
        tensor(f"{blk}.per_dim_scale.weight", d_head, ones=True)
        tensor(f"{blk}.conv_pw1.weight", n_embd, 2 * n_embd)
        tensor(f"{blk}.conv_dw.weight", 5, n_embd)  # the causal depthwise kernel: 4 past frames and this one
    tensor("mm.a.soft_emb_norm.weight", n_embd, ones=True)
    tensor("mm.a.input_projection.weight", n_embd, n_embd_text)
    _finish(writer)
    return path
