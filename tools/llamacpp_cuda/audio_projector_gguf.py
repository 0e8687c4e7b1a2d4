"""Gemma 4 projectors for the CUDA boots, so a llama-server allocates a projector's weights and compute buffers
without the download.

Default: the audio encoder alone (llama.cpp's `gemma4a` USM Conformer) at an estimate of E4B's encoder shapes
(12 Conformer blocks of width 1024, 8 heads, FFN 4096, 128 mel bins; f32 weights), the first session's row.

`--transformers`: the vision and the audio encoder in one file, as llama.cpp's converter writes the BF16
projector (conversion/gemma.py, Gemma4VisionAudioModel), at the shapes transformers 5.24 gives by default:
Gemma4VisionConfig hidden 768, intermediate 3072, 16 layers, 12 heads (head 64), patch 16, pooling kernel 3,
10240 position embeddings; Gemma4AudioConfig hidden 1024, 12 layers, 8 heads, FFN 4 x hidden, subsampling
channels (128, 32), output projection 1536, 128 mel bins. Matrices BF16; norms, convolutions, the patch
embedding and the position table F32 (the converter's forced types); zero weights, ones for norms. Both
encoders project into the text model's width (2560 for E4B). `--tiny` writes the same layout in miniature
(for a CPU check of the names: width 64 text model, as tests/tiny_gguf.write_gemma4).
Usage: python audio_projector_gguf.py OUT.gguf [--transformers [--tiny]] (from the repository root)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np

Q = gguf.GGMLQuantizationType

VISION = {"hidden": 768, "ff": 3072, "layers": 16, "heads": 12, "patch": 16, "pool": 3, "positions": 10240}
AUDIO = {"hidden": 1024, "layers": 12, "heads": 8, "channels": (128, 32), "out": 1536, "mel": 128}
TINY_VISION = {"hidden": 32, "ff": 64, "layers": 2, "heads": 2, "patch": 16, "pool": 3, "positions": 256}
TINY_AUDIO = {"hidden": 32, "layers": 2, "heads": 2, "channels": (8, 4), "out": 48, "mel": 128}


def write_vision_audio(path: Path, *, n_embd_text: int, vision: dict[str, Any], audio: dict[str, Any]) -> Path:
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name("gemma-4-projector-transformers-5.24-shapes")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)

    def tensor(name: str, kind: Q, *shape: int) -> None:  # ggml order: shape[0] is the row length
        if kind == Q.F32:
            w.add_tensor(name, np.ones(shape[::-1], np.float32))
        else:
            w.add_tensor(name, np.zeros((*shape[:0:-1], shape[0] * 2), np.uint8), raw_dtype=kind)

    v, a = vision, audio
    w.add_clip_has_vision_encoder(True)
    w.add_clip_vision_projector_type("gemma4v")
    w.add_vision_projection_dim(n_embd_text)
    w.add_vision_image_size(224)  # unused: the converter sets it "to avoid error"
    w.add_vision_patch_size(v["patch"])
    w.add_vision_embedding_length(v["hidden"])
    w.add_vision_feed_forward_length(v["ff"])
    w.add_vision_block_count(v["layers"])
    w.add_vision_head_count(v["heads"])
    w.add_vision_attention_layernorm_eps(1e-6)
    w.add_vision_image_mean([0.0, 0.0, 0.0])
    w.add_vision_image_std([1.0, 1.0, 1.0])
    w.add_clip_has_audio_encoder(True)
    w.add_clip_audio_projector_type("gemma4a")
    w.add_audio_projection_dim(n_embd_text)
    w.add_audio_embedding_length(a["hidden"])
    w.add_audio_feed_forward_length(4 * a["hidden"])
    w.add_audio_block_count(a["layers"])
    w.add_audio_head_count(a["heads"])
    w.add_audio_num_mel_bins(a["mel"])
    w.add_audio_attention_layernorm_eps(1e-6)

    hv, head_v = v["hidden"], v["hidden"] // v["heads"]
    tensor("v.patch_embd.weight", Q.F32, v["patch"], v["patch"], 3, hv)  # conv2d kernel: KW, KH, Cin, Cout
    tensor("v.position_embd.weight", Q.F32, hv, v["positions"], 2)  # an x and a y table
    for il in range(v["layers"]):
        blk = f"v.blk.{il}"
        for norm in ("ln1", "attn_post_norm", "ln2", "ffn_post_norm"):
            tensor(f"{blk}.{norm}.weight", Q.F32, hv)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensor(f"{blk}.{proj}.weight", Q.BF16, hv, hv)
        for norm in ("attn_q_norm", "attn_k_norm"):
            tensor(f"{blk}.{norm}.weight", Q.F32, head_v)
        tensor(f"{blk}.ffn_gate.weight", Q.BF16, hv, v["ff"])
        tensor(f"{blk}.ffn_up.weight", Q.BF16, hv, v["ff"])
        tensor(f"{blk}.ffn_down.weight", Q.BF16, v["ff"], hv)
        tensor(f"{blk}.out_scale.weight", Q.F32, 1)
    tensor("mm.input_projection.weight", Q.BF16, hv, n_embd_text)

    ha, c0, c1 = a["hidden"], *a["channels"]
    freq = a["mel"]
    for i, (c_in, c_out) in enumerate(((1, c0), (c0, c1))):
        tensor(f"a.conv1d.{i}.weight", Q.F32, 3, 3, c_in, c_out)
        tensor(f"a.conv1d.{i}.norm.weight", Q.F32, c_out)
        freq = (freq - 1) // 2 + 1
    tensor("a.input_projection.weight", Q.BF16, c1 * freq, ha)
    for il in range(a["layers"]):
        blk = f"a.blk.{il}"
        for norm in ("ffn_norm", "ffn_norm_1", "ffn_post_norm", "ffn_post_norm_1", "attn_pre_norm",
                     "attn_post_norm", "norm_conv", "conv_norm", "ln2"):  # fmt: skip
            tensor(f"{blk}.{norm}.weight", Q.F32, ha)
        for up, down in (("ffn_up", "ffn_down"), ("ffn_up_1", "ffn_down_1")):
            tensor(f"{blk}.{up}.weight", Q.BF16, ha, 4 * ha)
            tensor(f"{blk}.{down}.weight", Q.BF16, 4 * ha, ha)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out", "attn_k_rel", "conv_pw2"):
            tensor(f"{blk}.{proj}.weight", Q.BF16, ha, ha)
        tensor(f"{blk}.per_dim_scale.weight", Q.F32, ha // a["heads"])
        tensor(f"{blk}.conv_pw1.weight", Q.BF16, ha, 2 * ha)
        tensor(f"{blk}.conv_dw.weight", Q.F32, 5, ha)  # the causal depthwise kernel
    tensor("a.pre_encode.out.weight", Q.BF16, ha, a["out"])
    tensor("a.pre_encode.out.bias", Q.F32, a["out"])
    tensor("mm.a.input_projection.weight", Q.BF16, a["out"], n_embd_text)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


if __name__ == "__main__":
    out = Path(sys.argv[1])
    if "--transformers" in sys.argv[2:]:
        tiny = "--tiny" in sys.argv[2:]
        write_vision_audio(
            out,
            n_embd_text=64 if tiny else 2560,
            vision=TINY_VISION if tiny else VISION,
            audio=TINY_AUDIO if tiny else AUDIO,
        )
    else:
        from olarespack.engines.llamacpp import tiny_gguf  # smoke's (and the tests') generator of the architecture

        tiny_gguf.write_gemma4_audio_projector(
            out, n_embd_text=2560, n_embd=1024, n_head=8, n_ff=4096, n_layer=12, n_mel=128, channels=32
        )
