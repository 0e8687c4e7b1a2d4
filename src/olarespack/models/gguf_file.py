"""A GGUF file's header -> the facts the fit arithmetic needs, in Hugging Face config.json names so the one
config reader (arch.arch_from_hf_config) reads them.

Only the metadata and the tensor index are read, from a memory map, in one bounded walk (models/gguf_header.py:
entry counts, string and array lengths, the header's bytes and the walk's time), so a crafted length cannot
send the reader through gigabytes of data or build gigabytes of objects; no tensor data is touched.

llama.cpp metadata keys used (gguf-py constants.py Keys.LLM / Keys.Attention, read as llama.cpp's loader
reads them in src/llama-model.cpp):
- `general.architecture` (`clip`: a projector, mmproj, with no text layers);
- `{arch}.block_count`, `.embedding_length`, `.context_length`, `.feed_forward_length` (int or per layer),
  `.expert_feed_forward_length`, `.expert_used_count`, `.vocab_size` (else the tokenizer list's length);
- `{arch}.attention.head_count`, `.head_count_kv` (an int or one per layer), `.key_length` /
  `.value_length` (full-attention layers; default embedding_length / head_count), `.key_length_swa` /
  `.value_length_swa` (sliding layers, Gemma 4), `.sliding_window`, `.sliding_window_pattern` (one bool per
  layer, true = sliding; or a period N: layer i slides when i % N < N - 1, N = 0 every layer),
  `.shared_kv_layers` (the last N layers reuse earlier layers' KV), `.embedding_length_per_layer_input`
  (Gemma 3n / 4 E-models: the per-layer input width, HF `hidden_size_per_layer_input`);
- tensors llama.cpp keeps in host memory (its input layer always stays on the CPU): `token_embd.weight` and
  `per_layer_token_embd.weight` (Gemma 3n / 4 E-models); without an `output.weight`, the output is tied and
  llama.cpp puts a copy of `token_embd` on the GPU as well.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from olarespack.core.errors import ModelDataError
from olarespack.models.gguf_header import GgufIndex, HeaderError, read_index
from olarespack.models.projector import projector_width

# Architectures whose llama.cpp loader sets the sliding pattern in code when the file carries none
# (hparams.set_swa_pattern(N) in src/llama-model.cpp): N - 1 sliding layers, then one full.
_LLAMACPP_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4}
HOST_TENSORS = ("token_embd.weight", "per_layer_token_embd.weight")
TIED_INPUT, OUTPUT = "token_embd.weight", "output.weight"
_T = TypeVar("_T")
MAX_HEADS = 4096  # attention heads, query or KV (models have at most a few hundred)
MAX_WIDTH = 1 << 20  # embedding_length
MAX_HEAD_DIM = 1 << 16  # a head's key or value length (models: 64 to 576)


@dataclass(frozen=True)
class GgufHeader:
    """What one GGUF file tells: its size, its header's hash and, unless it is a projector, its architecture."""

    name: str
    bytes: int
    sha256: str  # of the header (metadata and tensor index): what the facts were read from
    architecture: str
    config: dict[str, Any] | None  # Hugging Face field names; None for a projector (clip)
    host_bytes: int = 0
    gpu_copy_bytes: int = 0  # part of host_bytes also on the GPU: token_embd as the tied output
    notes: tuple[str, ...] = ()
    embedding_width: int | None = None  # a projector: the width it writes into the text model (models.projector)

    @property
    def projector(self) -> bool:
        return self.config is None


def read_gguf(path: Path) -> GgufHeader:
    """The header facts of one local GGUF file; ModelDataError naming the file for anything else, a bound
    included (models/gguf_header.py: counts, bytes and time). A file cut after its header (a ranged download
    of its first megabytes) is read as the whole file its tensor index describes: its size and tensor types
    are exact, and no data past the header is needed."""
    return _walked(path, lambda size, index: _facts(path, size, index))


def read_gguf_values(path: Path, keys: tuple[str, ...]) -> dict[str, Any]:
    """Metadata values of one local GGUF file, read with the same bounds as read_gguf (None where absent);
    ModelDataError naming the file and the key for anything else."""

    def values(_: int, index: GgufIndex) -> dict[str, Any]:
        found = {}
        for key in keys:
            try:
                found[key] = index.value(key)
            except (HeaderError, struct.error):
                raise ModelDataError(f"{path}: metadata {key}: cannot be read") from None
        return found

    return _walked(path, values)


def _walked(path: Path, read: Callable[[int, GgufIndex], _T]) -> _T:
    """`read` of the file's size and walked header, while the file is mapped; errors name the file."""
    size = 0
    try:
        # opened once without blocking and checked on that descriptor: a named pipe is refused, not waited on,
        # and the file mapped is the one that was checked
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            size = info.st_size
            if not stat.S_ISREG(info.st_mode):
                raise ModelDataError(
                    f"{path}: not a regular file (a pipe, a device or a socket); give the path "
                    "of the .gguf file saved on disk"
                )
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return read(size, read_index(buf, (*HOST_TENSORS, OUTPUT)))
    except OSError as exc:
        raise ModelDataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # mmap of an empty file
        raise ModelDataError(f"{path}: not a GGUF file ({size} bytes)") from None
    except HeaderError as exc:
        raise ModelDataError(f"{path}: {exc}") from None
    except (struct.error, OverflowError):  # a bound the walk missed: still a message, never a traceback
        raise ModelDataError(f"{path}: the GGUF header is malformed") from None


def _facts(path: Path, size: int, index: GgufIndex) -> GgufHeader:
    """What the walked header says (read while the file is still mapped)."""
    with memoryview(index.buf) as view:  # hashed in place: the header is not copied
        digest = hashlib.sha256(view[: index.data_offset])
    # a download cut inside the padding before the data: the padding is zeros, as the whole file has it
    digest.update(bytes(max(0, index.data_offset - size)))
    notes = []
    if size < index.full_bytes:
        notes.append(
            f"{path.name}: read from its first {size} bytes (the header); its size {index.full_bytes} "
            "is the one its tensor index gives"
        )
        size = index.full_bytes

    def value(key: str) -> Any:
        try:
            return index.value(key)
        except (HeaderError, struct.error):
            raise ModelDataError(f"{path}: metadata {key}: cannot be read") from None

    arch = value("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelDataError(f"{path}: metadata general.architecture: missing; is this a llama.cpp model file?")
    if arch == "clip":
        try:
            width, how = projector_width({name: list(dims) for name, dims in index.shapes.items()}, value)
        except ModelDataError as exc:  # value()'s own errors name the file already
            raise ModelDataError(str(exc) if str(exc).startswith(f"{path}:") else f"{path}: {exc}") from None
        notes += [f"projector output width {width} ({how}; llama.cpp clip_n_mmproj_embd)"] if width else []
        return GgufHeader(path.name, size, digest.hexdigest(), arch, None, notes=tuple(notes), embedding_width=width)
    try:
        config, config_notes = hf_config(arch, value, index.length("tokenizer.ggml.tokens"))
    except ModelDataError as exc:
        raise ModelDataError(f"{path}: {exc}") from None
    sizes = index.tensor_bytes
    host = sum(sizes.get(name, 0) for name in HOST_TENSORS)
    copy = sizes.get(TIED_INPUT, 0) if OUTPUT not in sizes else 0
    return GgufHeader(path.name, size, digest.hexdigest(), arch, config, host, copy, tuple(notes + config_notes))


def _count(raw: Any, key: str, n: int | None = None) -> list[int] | int | None:
    """An int, or a per-layer list of ints (checked against n layers)."""
    if raw is None:
        return None
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 40 for v in values):
        raise ModelDataError(f"metadata {key}: expected a non-negative integer or one per layer")
    if isinstance(raw, list):
        if n is not None and len(values) != n:
            raise ModelDataError(f"metadata {key}: {len(values)} entries for {n} layers")
        return values
    return int(raw)


def _one(raw: Any, key: str) -> int | None:
    found = _count(raw, key)
    return max(found) if isinstance(found, list) else found


def _sliding(arch: str, n: int, window: int, pattern: Any, notes: list[str]) -> list[bool]:
    """Which layers slide, as llama.cpp decides it."""
    if window <= 0:
        return [False] * n
    if isinstance(pattern, list):
        if len(pattern) != n or not all(isinstance(p, bool) for p in pattern):
            raise ModelDataError(f"metadata {arch}.attention.sliding_window_pattern: expected {n} booleans")
        return list(pattern)
    period = _one(pattern, f"{arch}.attention.sliding_window_pattern")
    if period is None:
        period = _LLAMACPP_SWA_PERIOD.get(arch)
        if period is None:
            notes.append(
                f"{arch}.attention.sliding_window is set without a pattern: every layer is taken as full "
                "attention (an over-estimate of the KV cache)"
            )
            return [False] * n
        notes.append(f"sliding pattern: llama.cpp's built-in period {period} for {arch}")
    return [period == 0 or i % period < period - 1 for i in range(n)]


def hf_config(
    arch: str, value: Callable[[str], Any], vocab_tokens: int | None = None
) -> tuple[dict[str, Any], list[str]]:
    """A GGUF architecture's metadata (`value(key)`) -> a Hugging Face style config, and notes on what was
    assumed. Refuses what the fit arithmetic cannot size: MLA caches and layers without KV heads."""

    def key(name: str) -> Any:
        return value(f"{arch}.{name}")

    def one(name: str) -> int | None:
        return _one(key(name), f"{arch}.{name}")

    notes: list[str] = []
    n = one("block_count")
    if n is None or not 1 <= n <= 4096:
        raise ModelDataError(f"metadata {arch}.block_count: required (1 to 4096 layers)")
    # block_count counts the MTP layers a GGUF carries after the trunk (GLM-4.5, DeepSeek V3); Hugging Face's
    # num_hidden_layers does not, and llama.cpp keeps no KV for them in the trunk's cache (b9101 and b11434)
    nextn = one("nextn_predict_layers") or 0
    if not 0 <= nextn < n:
        raise ModelDataError(f"metadata {arch}.nextn_predict_layers: {nextn} is not below block_count {n}")
    n -= nextn
    if key("attention.kv_lora_rank") is not None:
        raise ModelDataError(
            f"metadata {arch}.attention.kv_lora_rank: MLA attention (DeepSeek-style latent KV) "
            "is not sized by olarespack's fit arithmetic"
        )
    heads = one("attention.head_count")
    hidden = one("embedding_length")
    kv = _count(key("attention.head_count_kv"), f"{arch}.attention.head_count_kv", n + nextn)
    kv_heads = kv[:n] if isinstance(kv, list) else [kv if kv is not None else heads or 0] * n
    if 0 in kv_heads:
        raise ModelDataError(
            f"metadata {arch}.attention.head_count_kv: layers without KV heads (recurrent or "
            "linear attention) are not sized by olarespack's fit arithmetic"
        )
    # counts past any model (2^39 heads) would size a KV cache of exabytes: refused, naming the key
    for name, count, high in (
        ("attention.head_count", heads, MAX_HEADS),
        ("embedding_length", hidden, MAX_WIDTH),
        ("attention.head_count_kv", max(kv_heads), MAX_HEADS),
    ):
        if count is not None and not 0 <= count <= high:
            raise ModelDataError(f"metadata {arch}.{name}: {count} is past any model (at most {high})")
    derived = hidden // heads if hidden and heads else None
    # one head size per kind: the larger of K and V, so an uneven pair is never under-counted
    full_dim = _max(one("attention.key_length"), one("attention.value_length")) or derived
    swa_dim = _max(one("attention.key_length_swa"), one("attention.value_length_swa")) or full_dim
    if not full_dim:  # None, or 0 from an embedding_length smaller than head_count
        raise ModelDataError(f"metadata {arch}.attention.key_length: needed (or embedding_length and head_count)")
    for name, dim in (("attention.key_length", full_dim), ("attention.key_length_swa", swa_dim)):
        if dim is None or not 0 < dim <= MAX_HEAD_DIM:
            raise ModelDataError(f"metadata {arch}.{name}: {dim} is past any model (at most {MAX_HEAD_DIM})")
    window = one("attention.sliding_window") or 0
    slides = _sliding(arch, n + nextn, window, key("attention.sliding_window_pattern"), notes)[:n]
    sliding_kv = [h for h, s in zip(kv_heads, slides, strict=True) if s]
    full_kv = [h for h, s in zip(kv_heads, slides, strict=True) if not s]
    if len(set(sliding_kv)) > 1 or len(set(full_kv)) > 1:
        notes.append("head_count_kv differs between layers of one kind: the largest is taken for each")
    config: dict[str, Any] = {"model_type": arch, "num_hidden_layers": n}
    optional = {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "max_position_embeddings": one("context_length"),
        "intermediate_size": one("feed_forward_length"),
        "moe_intermediate_size": one("expert_feed_forward_length"),
        "num_experts_per_tok": one("expert_used_count"),
        "num_experts": one("expert_count"),
        "vocab_size": one("vocab_size") or vocab_tokens,
        "hidden_size_per_layer_input": one("embedding_length_per_layer_input"),
    }
    config.update({k: v for k, v in optional.items() if v})
    if sliding_kv:
        config.update(
            num_key_value_heads=max(sliding_kv),
            head_dim=swa_dim,
            sliding_window=window,
            layer_types=["sliding_attention" if s else "full_attention" for s in slides],
        )
        if full_kv and max(full_kv) != max(sliding_kv):
            config["num_global_key_value_heads"] = max(full_kv)
        if full_kv and full_dim != swa_dim:
            config["global_head_dim"] = full_dim
    else:
        config.update(num_key_value_heads=max(full_kv), head_dim=full_dim)
    shared = one("attention.shared_kv_layers")
    if shared:
        config["num_kv_shared_layers"] = shared
    if nextn:
        config["num_nextn_predict_layers"] = nextn
    return config, notes


def _max(*values: int | None) -> int | None:
    present = [v for v in values if v]
    return max(present) if present else None
