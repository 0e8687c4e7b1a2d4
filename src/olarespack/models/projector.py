"""The width of the embeddings a multimodal projector (a `clip` GGUF, mmproj) writes into the text model, read
from its header as llama.cpp reads it.

llama-server refuses a projector made for another model: mtmd_context's constructor (tools/mtmd/mtmd.cpp)
compares `clip_n_mmproj_embd` of the projector with the text model's `llama_model_n_embd_inp` and throws
"mismatch between text model (n_embd = N) and mmproj (n_embd = M)". clip_n_mmproj_embd (tools/mtmd/clip.cpp,
b9101 and b11434) takes the width from one tensor's shape per projector type; the table below is that function for
the types whose tensor has one fixed name. Gemma 4's audio projector (gemma4a) changed between the two: b9101 reads
`clip.audio.projection_dim`, b11434 the embedder's tensor `mm.a.input_projection.weight` (dimension 1); both are
read, and a file where they differ is refused, since one of the builds would refuse it. A projector of another
type has no width here, and nothing is judged. A file with a vision and an audio encoder must give both the same
width (mtmd.cpp: "mismatch between vision and audio mmproj").

Keys: `clip.has_vision_encoder`, `clip.has_audio_encoder`, the projector type in `clip.projector_type`, else
`clip.vision.projector_type` / `clip.audio.projector_type` (clip.cpp load_hparams).

Qwen3-VL's deepstack: llama.cpp compares (1 + n_deepstack_layers) times the main path on both sides; the main
path's width is taken here, which the text model's hidden size must equal just the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from olarespack.core.errors import ModelDataError

MAX_WIDTH = 1 << 24  # the model files' bound on embedding_width
# projector type -> (tensor name, the ggml dimension that is the output width), as clip_n_mmproj_embd reads them
WIDTH_TENSORS: dict[str, tuple[str, int]] = {
    "gemma3": ("mm.input_projection.weight", 0),
    "gemma3nv": ("mm.input_projection.weight", 0),
    "gemma4v": ("mm.input_projection.weight", 1),
    "gemma4a": ("mm.a.input_projection.weight", 1),  # and clip.audio.projection_dim (b9101)
    "mlp": ("mm.2.weight", 1),  # with an mm.3.weight it is llama.cpp's mlp_norm: mm.3.bias, dimension 0
    "phi4": ("mm.2.weight", 1),
    "pixtral": ("mm.2.weight", 1),
    "lightonocr": ("mm.2.weight", 1),
    "dots_ocr": ("mm.2.weight", 1),
    "lfm2": ("mm.2.weight", 1),
    "kimivl": ("mm.2.weight", 1),
    "paddleocr": ("mm.2.weight", 1),
    "kimik25": ("mm.2.weight", 1),
    "yasa2": ("mm.2.weight", 1),
    "qwen2vl_merger": ("mm.2.bias", 0),
    "qwen2.5vl_merger": ("mm.2.bias", 0),
    "qwen3vl_merger": ("mm.2.bias", 0),  # the main path (see the module docstring)
    "youtuvl": ("mm.2.bias", 0),
    "janus_pro": ("mm.1.bias", 0),
    "idefics3": ("mm.model.fc.weight", 1),
    "llama4": ("mm.model.fc.weight", 1),
    "internvl": ("mm.model.mlp.3.weight", 1),
    "nemotron_v2_vl": ("mm.model.mlp.3.weight", 1),
    "ultravox": ("mm.a.mlp.2.weight", 1),
    "voxtral": ("mm.a.mlp.2.weight", 1),
    "musicflamingo": ("mm.a.mlp.2.weight", 1),
    "qwen3a": ("mm.a.mlp.2.weight", 1),
    "glma": ("mm.a.mlp.2.weight", 1),
    "qwen2a": ("mm.a.fc.weight", 1),
}
# clip.cpp's legacy Qwen2.5-Omni type: the vision encoder is qwen2.5vl_merger, the audio one qwen2a
_LEGACY = {("qwen2.5o", "vision"): "qwen2.5vl_merger", ("qwen2.5o", "audio"): "qwen2a"}


def projector_width(tensors: Mapping[str, Sequence[int]], value: Callable[[str], Any]) -> tuple[int | None, str]:
    """The projector's output width and how it was read (`tensors`: name -> ggml dimensions, `value`: a metadata
    key's value or None). None when no encoder's type is in the table. ModelDataError for what llama.cpp refuses
    in the file alone: a vision and an audio width that differ, a width tensor that is missing."""
    found: list[tuple[str, int, str]] = []
    for modality in ("vision", "audio"):
        if value(f"clip.has_{modality}_encoder") is not True:
            continue
        kind = value("clip.projector_type") or value(f"clip.{modality}.projector_type")
        if not isinstance(kind, str):
            continue
        kind = _LEGACY.get((kind, modality), kind)
        width = _width(kind, modality, tensors, value)
        if width is not None:
            found.append((modality, *width))
    if len(found) == 2 and found[0][1] != found[1][1]:
        raise ModelDataError(
            f"its vision encoder writes {found[0][1]}-wide embeddings and its audio encoder "
            f"{found[1][1]}-wide: llama.cpp refuses the file (mismatch between vision and audio "
            "mmproj)"
        )
    if not found:
        return None, ""
    return found[0][1], "; ".join(f"{modality}: {how}" for modality, _, how in found)


def _width(
    kind: str, modality: str, tensors: Mapping[str, Sequence[int]], value: Callable[[str], Any]
) -> tuple[int, str] | None:
    rule = WIDTH_TENSORS.get(kind)
    if rule is None:
        return None
    name, dim = rule
    if kind == "mlp" and "mm.3.weight" in tensors:
        name, dim = "mm.3.bias", 0
    shape = tensors.get(name)
    if shape is None or len(shape) <= dim:
        raise ModelDataError(
            f"tensor {name}: a {kind} projector's output layer is missing (llama.cpp cannot load the projector)"
        )
    width, how = int(shape[dim]), f"{kind}, tensor {name} dimension {dim}"
    if not 0 < width <= MAX_WIDTH:
        raise ModelDataError(f"tensor {name}: an output width of {width}, past any model's (1 to {MAX_WIDTH})")
    if kind == "gemma4a":
        key = f"clip.{modality}.projection_dim"
        given = value(key)
        if isinstance(given, bool) or not isinstance(given, int) or given != width:
            raise ModelDataError(
                f"metadata {key}: {given!r}, and its tensor {name} is {width} wide; llama.cpp "
                "b9101 reads the first, later builds the second: one of them refuses the file"
            )
        how += f" = {key}"
    return width, how


def width_mismatch(model_file: str, model_width: int, projector_file: str, projector_width: int) -> str | None:
    """The problem with a projector whose output width is not the text model's, in llama-server's own numbers;
    None when they fit."""
    if model_width == projector_width:
        return None
    return (
        f"the projector {projector_file} writes {projector_width}-wide embeddings and the model {model_file} "
        f'takes {model_width} (its embedding width): llama-server refuses the pair ("mismatch between text '
        f'model (n_embd = {model_width}) and mmproj (n_embd = {projector_width})")'
    )
