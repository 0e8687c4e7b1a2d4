"""A GGUF file's header -> the facts the fit arithmetic needs, in Hugging Face config.json names so the one
config reader (arch.arch_from_hf_config) reads them.

Only the metadata and the tensor index are read (the `gguf` library memory-maps the file; no tensor data is
touched). A stranger's file is first walked with bounds (entry counts, string and array lengths, no nested
arrays), so a crafted length cannot send the reader through gigabytes of tensor data.

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

import contextlib
import hashlib
import mmap
import os
import stat
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from olarespack.core.errors import ModelDataError
from olarespack.models.projector import projector_width

MAX_KV = 10_000
MAX_TENSORS = 200_000
MAX_ARRAY_ITEMS = 8_000_000  # over all arrays: a 262144-token vocabulary has three arrays of that length
MAX_STRING = 16 << 20  # chat templates are tens of KiB
MAX_KEY = 1 << 16
MAX_FILE_BYTES = 1 << 42  # 4 TiB: past any model file, so a crafted index cannot ask for more
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUFValueType -> bytes
_STRING, _ARRAY = 8, 9
# Architectures whose llama.cpp loader sets the sliding pattern in code when the file carries none
# (hparams.set_swa_pattern(N) in src/llama-model.cpp): N - 1 sliding layers, then one full.
_LLAMACPP_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4}
HOST_TENSORS = ("token_embd.weight", "per_layer_token_embd.weight")
TIED_INPUT, OUTPUT = "token_embd.weight", "output.weight"


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


class _Bad(Exception):
    pass


@dataclass(frozen=True)
class _Layout:
    data_offset: int  # where the tensor data starts: the header ends there
    full_bytes: int  # the whole file's size as its tensor index describes it


def _prescan(buf: mmap.mmap) -> _Layout:
    """Walk the metadata and the tensor index with bounds before the gguf library builds anything from them;
    where the tensor data starts and how long the whole file is, by its own index."""
    if buf[:4] != b"GGUF":
        raise _Bad(f"not a GGUF file (it starts with {bytes(buf[:4])!r}, not b'GGUF')")
    order = "<" if struct.unpack_from("<I", buf, 4)[0] & 0xFFFF else ">"
    version, n_tensors, n_kv = struct.unpack_from(order + "IQQ", buf, 4)
    if version not in (2, 3):
        raise _Bad(f"GGUF version {version} is not supported (2 and 3 are)")
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
        raise _Bad(f"{n_tensors} tensors and {n_kv} metadata entries: more than a model has")
    offset, items = 24, 0

    def string(at: int) -> int:
        (length,) = struct.unpack_from(order + "Q", buf, at)
        if length > MAX_STRING:
            raise _Bad(f"a metadata string of {length} bytes")
        return at + 8 + int(length)

    alignment = 32  # GGUF's default, unless general.alignment says otherwise
    for _ in range(n_kv):
        (length,) = struct.unpack_from(order + "Q", buf, offset)
        if length > MAX_KEY:
            raise _Bad(f"a metadata key of {length} bytes")
        name = bytes(buf[offset + 8:offset + 8 + length])
        offset += 8 + length
        (kind,) = struct.unpack_from(order + "I", buf, offset)
        offset += 4
        if name == b"general.alignment" and kind == 4:  # uint32
            (alignment,) = struct.unpack_from(order + "I", buf, offset)
            if not 1 <= alignment <= 1 << 16 or alignment & (alignment - 1):
                raise _Bad(f"general.alignment {alignment} is not a power of two up to 65536")
        if kind == _ARRAY:
            sub, count = struct.unpack_from(order + "IQ", buf, offset)
            offset += 12
            items += count
            if items > MAX_ARRAY_ITEMS:
                raise _Bad(f"more than {MAX_ARRAY_ITEMS} metadata array items")
            if sub == _STRING:
                for _ in range(count):
                    offset = string(offset)
            elif sub in _SCALAR_SIZES:
                offset += count * _SCALAR_SIZES[sub]
            else:
                raise _Bad(f"a metadata array of type {sub} (nested arrays are not read)")
        elif kind == _STRING:
            offset = string(offset)
        elif kind in _SCALAR_SIZES:
            offset += _SCALAR_SIZES[kind]
        else:
            raise _Bad(f"unknown metadata type {kind}")
        if offset > len(buf):
            raise _Bad("the metadata runs past the end of the file")
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    end = 0
    for _ in range(n_tensors):
        offset = string(offset)
        (n_dims,) = struct.unpack_from(order + "I", buf, offset)
        if not 1 <= n_dims <= 4:
            raise _Bad(f"a tensor of {n_dims} dimensions")
        dims = struct.unpack_from(order + "Q" * n_dims, buf, offset + 4)
        kind, at = struct.unpack_from(order + "IQ", buf, offset + 4 + 8 * n_dims)
        offset += 4 + 8 * n_dims + 12
        try:
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        except (ValueError, KeyError):
            raise _Bad(f"a tensor of unknown type {kind}") from None
        values = 1
        for dim in dims:
            values *= dim
        if values % block or values > MAX_FILE_BYTES:
            raise _Bad(f"a tensor of {values} values does not fill whole blocks of its type, or is too large")
        end = max(end, at + values // block * size)
        if offset > len(buf):
            raise _Bad("the tensor index runs past the end of the file: a download of the header alone must "
                       "reach the end of its tensor index")
    data_offset = -(-offset // alignment) * alignment
    # writers pad every tensor's data to the alignment, the last one too (gguf-py, ggml's gguf_write)
    full = data_offset + -(-end // alignment) * alignment
    if full > MAX_FILE_BYTES:
        raise _Bad(f"the tensor index describes a file of {full} bytes, more than any model file")
    return _Layout(data_offset, full)


def read_gguf(path: Path) -> GgufHeader:
    """The header facts of one local GGUF file; ModelDataError naming the file for anything else. A file cut
    after its header (a ranged download of its first megabytes) is read as the whole file its tensor index
    describes: its size and tensor types are exact, and no data past the header is needed."""
    with contextlib.ExitStack() as stack:
        return _read_gguf(path, stack)


def _read_gguf(path: Path, stack: contextlib.ExitStack) -> GgufHeader:
    from gguf import GGUFReader  # imported here: numpy is heavy and only this command needs it

    size, notes = 0, []
    try:
        # opened once without blocking and checked on that descriptor: a named pipe is refused, not waited on,
        # and the file the reader maps is the one that was checked
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        handle = stack.enter_context(os.fdopen(fd, "rb"))
        info = os.fstat(handle.fileno())
        size = info.st_size
        if not stat.S_ISREG(info.st_mode):
            raise ModelDataError(f"{path}: not a regular file (a pipe, a device or a socket); give the path of "
                                 "the .gguf file saved on disk")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            layout = _prescan(buf)
            # a download cut inside the padding before the data: the padding is zeros, as the whole file has it
            header = bytes(buf[:layout.data_offset]).ljust(layout.data_offset, b"\0")
        if size < layout.full_bytes:  # the header alone: its tensors' data read as zeros from a sparse copy
            whole = stack.enter_context(tempfile.TemporaryFile(prefix="olarespack-gguf-"))  # noqa: SIM115 (the stack closes it)
            whole.write(header)
            whole.truncate(layout.full_bytes)
            whole.flush()
            reader = GGUFReader(cast(str, whole))
            notes.append(f"{path.name}: read from its first {size} bytes (the header); its size "
                         f"{layout.full_bytes} is the one its tensor index gives")
            size = layout.full_bytes
        else:
            reader = GGUFReader(cast(str, handle))  # numpy's memmap takes an open file as well as a name
        if reader.data_offset != layout.data_offset:
            raise _Bad(f"the tensor data starts at {reader.data_offset}, not where the index ends "
                       f"({layout.data_offset})")
        header_sha = hashlib.sha256(header).hexdigest()
    except OSError as exc:
        raise ModelDataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # mmap of an empty file, or the reader's own checks
        if size < 24:
            raise ModelDataError(f"{path}: not a GGUF file ({size} bytes)") from None
        raise ModelDataError(f"{path}: cannot read the GGUF header: {str(exc)[:200]}") from None
    except _Bad as exc:
        raise ModelDataError(f"{path}: {exc}") from None
    except (struct.error, IndexError, KeyError, TypeError, OverflowError):
        raise ModelDataError(f"{path}: the GGUF header is truncated or malformed; a download of the header "
                             "alone must reach the end of its tensor index") from None

    def value(key: str) -> Any:
        found = reader.get_field(key)
        try:
            return None if found is None else found.contents()
        except (UnicodeDecodeError, IndexError, ValueError):
            raise ModelDataError(f"{path}: metadata {key}: cannot be read") from None

    arch = value("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelDataError(f"{path}: metadata general.architecture: missing; is this a llama.cpp model file?")
    if arch == "clip":
        try:
            width, how = projector_width({t.name: [int(d) for d in t.shape] for t in reader.tensors}, value)
        except ModelDataError as exc:  # value()'s own errors name the file already
            raise ModelDataError(str(exc) if str(exc).startswith(f"{path}:") else f"{path}: {exc}") from None
        notes += [f"projector output width {width} ({how}; llama.cpp clip_n_mmproj_embd)"] if width else []
        return GgufHeader(path.name, size, header_sha, arch, None, notes=tuple(notes), embedding_width=width)
    tokens = reader.get_field("tokenizer.ggml.tokens")
    try:
        config, config_notes = hf_config(arch, value, len(tokens.data) if tokens is not None else None)
    except ModelDataError as exc:
        raise ModelDataError(f"{path}: {exc}") from None
    sizes = {t.name: int(t.n_bytes) for t in reader.tensors}
    host = sum(sizes.get(name, 0) for name in HOST_TENSORS)
    copy = sizes.get(TIED_INPUT, 0) if OUTPUT not in sizes else 0
    return GgufHeader(path.name, size, header_sha, arch, config, host, copy, tuple(notes + config_notes))


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
            notes.append(f"{arch}.attention.sliding_window is set without a pattern: every layer is taken as full "
                         "attention (an over-estimate of the KV cache)")
            return [False] * n
        notes.append(f"sliding pattern: llama.cpp's built-in period {period} for {arch}")
    return [period == 0 or i % period < period - 1 for i in range(n)]


def hf_config(arch: str, value: Callable[[str], Any], vocab_tokens: int | None = None) -> tuple[dict[str, Any],
                                                                                             list[str]]:
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
    if key("attention.kv_lora_rank") is not None:
        raise ModelDataError(f"metadata {arch}.attention.kv_lora_rank: MLA attention (DeepSeek-style latent KV) "
                             "is not sized by olarespack's fit arithmetic")
    heads = one("attention.head_count")
    hidden = one("embedding_length")
    kv = _count(key("attention.head_count_kv"), f"{arch}.attention.head_count_kv", n)
    kv_heads = kv if isinstance(kv, list) else [kv if kv is not None else heads or 0] * n
    if 0 in kv_heads:
        raise ModelDataError(f"metadata {arch}.attention.head_count_kv: layers without KV heads (recurrent or "
                             "linear attention) are not sized by olarespack's fit arithmetic")
    derived = hidden // heads if hidden and heads else None
    # one head size per kind: the larger of K and V, so an uneven pair is never under-counted
    full_dim = _max(one("attention.key_length"), one("attention.value_length")) or derived
    swa_dim = _max(one("attention.key_length_swa"), one("attention.value_length_swa")) or full_dim
    if not full_dim:  # None, or 0 from an embedding_length smaller than head_count
        raise ModelDataError(f"metadata {arch}.attention.key_length: needed (or embedding_length and head_count)")
    window = one("attention.sliding_window") or 0
    slides = _sliding(arch, n, window, key("attention.sliding_window_pattern"), notes)
    sliding_kv = [h for h, s in zip(kv_heads, slides, strict=True) if s]
    full_kv = [h for h, s in zip(kv_heads, slides, strict=True) if not s]
    if len(set(sliding_kv)) > 1 or len(set(full_kv)) > 1:
        notes.append("head_count_kv differs between layers of one kind: the largest is taken for each")
    config: dict[str, Any] = {"model_type": arch, "num_hidden_layers": n}
    optional = {"hidden_size": hidden, "num_attention_heads": heads,
                "max_position_embeddings": one("context_length"),
                "intermediate_size": one("feed_forward_length"),
                "moe_intermediate_size": one("expert_feed_forward_length"),
                "num_experts_per_tok": one("expert_used_count"),
                "vocab_size": one("vocab_size") or vocab_tokens,
                "hidden_size_per_layer_input": one("embedding_length_per_layer_input")}
    config.update({k: v for k, v in optional.items() if v})
    if sliding_kv:
        config.update(num_key_value_heads=max(sliding_kv), head_dim=swa_dim, sliding_window=window,
                      layer_types=["sliding_attention" if s else "full_attention" for s in slides])
        if full_kv and max(full_kv) != max(sliding_kv):
            config["num_global_key_value_heads"] = max(full_kv)
        if full_kv and full_dim != swa_dim:
            config["global_head_dim"] = full_dim
    else:
        config.update(num_key_value_heads=max(full_kv), head_dim=full_dim)
    shared = one("attention.shared_kv_layers")
    if shared:
        config["num_kv_shared_layers"] = shared
    return config, notes


def _max(*values: int | None) -> int | None:
    present = [v for v in values if v]
    return max(present) if present else None
