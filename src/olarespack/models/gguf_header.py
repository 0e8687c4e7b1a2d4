"""A GGUF file's header (metadata and tensor index) read in one bounded walk over its memory map.

A stranger's file is hostile input: every count and length in it is checked before it is used, so the walk
touches at most MAX_HEADER_BYTES, visits at most MAX_STRING_ITEMS array strings and MAX_TENSORS tensor
entries, and stops after MAX_SECONDS; nothing it builds grows with the file (a value is decoded only when
asked for, an array only up to MAX_LIST_ITEMS). The bounds sit well above real models: Gemma 4's
262,144-token vocabulary (tokens, scores, types and merges) is 777,050 strings and 1,301,398 array items
in a 15.8 MB header (llama.cpp's models/ggml-vocab-gemma-4.gguf); the gguf library's own reader builds
Python objects for every string, which on such a file takes minutes and gigabytes, so it is not used.

The layout is GGUF v2/v3 as gguf-py (gguf_reader.py) and ggml (gguf.cpp) read it: magic, version, tensor
count, metadata count; `key (string), type (uint32), value` entries; then per tensor `name, n_dims, dims,
type, offset`; the tensor data starts at the next multiple of general.alignment (32 by default).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Any, Final

MAX_KV: Final = 10_000
MAX_TENSORS: Final = 200_000
MAX_ARRAY_ITEMS: Final = 8_000_000  # over all arrays; skipping a number array costs nothing per item
MAX_STRING_ITEMS: Final = 2_000_000  # over all string arrays: each is walked item by item
MAX_LIST_ITEMS: Final = 65_536  # the longest array decoded into a value (per-layer lists: at most 4096)
MAX_STRING: Final = 16 << 20  # chat templates are tens of KiB
MAX_KEY: Final = 1 << 16
MAX_HEADER_BYTES: Final = 128 << 20  # where the tensor data may start at the latest
MAX_SECONDS: Final = 30.0  # the whole walk; a real header takes well under a second
MAX_FILE_BYTES: Final = 1 << 42  # 4 TiB: past any model file, so a crafted index cannot describe more
_SCALARS: Final = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}
_BOOL, _STRING, _ARRAY = 7, 8, 9
_MIB: Final = 1 << 20


class HeaderError(Exception):
    """The header breaks the format or a bound; the text names the key (or tensor) and the bound."""


@dataclass(frozen=True)
class _Entry:
    kind: int  # GGUF value type
    at: int  # where the value starts (an array: its first item)
    sub: int = 0  # an array's item type
    count: int = 0  # an array's length


@dataclass
class GgufIndex:
    """The header as walked: where each metadata value lies, the sizes of the tensors asked for, and where the
    tensor data starts and ends by the index."""

    buf: Any  # the file's memory map (bytes-like); valid while the caller keeps it open
    order: str
    entries: dict[str, _Entry]
    tensor_bytes: dict[str, int]  # of the tensors named in `keep`
    index_end: int  # the tensor index's last byte + 1
    data_offset: int
    full_bytes: int  # the whole file's size as its tensor index describes it
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # of projector tensors (mm.*): their dims

    def value(self, key: str) -> Any:
        """A metadata value as gguf-py's contents() gives it (int, float, bool, str or a list), None if absent.
        Raises HeaderError for a text that is not UTF-8 or an array longer than MAX_LIST_ITEMS."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.kind != _ARRAY:
            return self._scalar(entry.kind, entry.at)[0]
        if entry.count > MAX_LIST_ITEMS:
            raise HeaderError(
                f"metadata {key}: an array of {entry.count} items; at most {MAX_LIST_ITEMS} are read as a value"
            )
        values, at = [], entry.at
        for _ in range(entry.count):
            value, at = self._scalar(entry.sub, at)
            values.append(value)
        return values

    def length(self, key: str) -> int | None:
        """An array's item count without reading it (a vocabulary's size), None when absent or no array."""
        entry = self.entries.get(key)
        return entry.count if entry is not None and entry.kind == _ARRAY else None

    def _scalar(self, kind: int, at: int) -> tuple[Any, int]:
        if kind == _STRING:
            (length,) = struct.unpack_from(self.order + "Q", self.buf, at)
            try:
                return bytes(self.buf[at + 8 : at + 8 + length]).decode("utf-8"), at + 8 + length
            except UnicodeDecodeError:
                raise HeaderError("a metadata text is not UTF-8") from None
        (value,) = struct.unpack_from(self.order + _SCALARS[kind], self.buf, at)
        return (bool(value) if kind == _BOOL else value), at + struct.calcsize(_SCALARS[kind])


def read_index(buf: Any, keep: tuple[str, ...]) -> GgufIndex:
    """Walk the header in `buf` (the whole file or a download of its first bytes); HeaderError on anything
    past a bound or the format. `keep`: the tensors whose data sizes are wanted."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType  # numpy is heavy and only this command needs it

    walk = _Walk(buf)
    if bytes(buf[:4]) != b"GGUF":
        raise HeaderError(f"not a GGUF file (it starts with {bytes(buf[:4])!r}, not b'GGUF')")
    walk.order = "<" if walk.unpack("I", 4, "the version")[0] & 0xFFFF else ">"  # a version fits 16 bits
    version, n_tensors, n_kv = walk.unpack("IQQ", 4, "the header counts")
    if version not in (2, 3):
        raise HeaderError(f"GGUF version {version} is not supported (2 and 3 are)")
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
        raise HeaderError(
            f"{n_tensors} tensors and {n_kv} metadata entries: more than a model has (at most "
            f"{MAX_TENSORS} and {MAX_KV} are read)"
        )
    walk.at = 24
    entries: dict[str, _Entry] = {}
    for _ in range(n_kv):
        key = walk.text(MAX_KEY, "a metadata key").decode("utf-8", "replace")
        if key in entries:
            raise HeaderError(f"metadata {key}: appears twice (llama.cpp refuses such a file)")
        (kind,) = walk.unpack("I", walk.at, key)
        walk.at += 4
        entries[key] = walk.value(key, kind)
    alignment = 32  # GGUF's default, unless general.alignment says otherwise
    found = entries.get("general.alignment")
    if found is not None and found.kind != 4:  # ggml's gguf reader refuses the file: the key must be a uint32
        raise HeaderError(
            f"general.alignment is of GGUF type {found.kind}, not uint32 (4): llama.cpp does not load the file"
        )
    if found is not None:
        (alignment,) = walk.unpack("I", found.at, "general.alignment")
        if not 1 <= alignment <= 1 << 16 or alignment & (alignment - 1):
            raise HeaderError(f"general.alignment {alignment} is not a power of two up to 65536")
    end, sizes = 0, {}
    shapes: dict[str, tuple[int, ...]] = {}
    for number in range(n_tensors):
        walk.tick()
        name = walk.text(MAX_KEY, f"the name of tensor {number}").decode("utf-8", "replace")
        (n_dims,) = walk.unpack("I", walk.at, f"tensor {name}")
        if not 1 <= n_dims <= 4:
            raise HeaderError(f"tensor {name}: {n_dims} dimensions (1 to 4)")
        dims = walk.unpack("Q" * n_dims, walk.at + 4, f"tensor {name}")
        kind, at = walk.unpack("IQ", walk.at + 4 + 8 * n_dims, f"tensor {name}")
        walk.at += 4 + 8 * n_dims + 12
        try:
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        except (ValueError, KeyError):
            raise HeaderError(f"tensor {name}: unknown type {kind}") from None
        values = 1
        for dim in dims:
            values *= dim
        if values % block or values > MAX_FILE_BYTES:
            raise HeaderError(
                f"tensor {name}: {values} values do not fill whole blocks of its type, or are more than any model holds"
            )
        end = max(end, at + values // block * size)
        if name in keep:
            sizes[name] = values // block * size
        if name.startswith("mm."):  # a projector's layers: their widths are what it feeds the model
            shapes[name] = tuple(dims)
    index_end = walk.at
    data_offset = -(-index_end // alignment) * alignment
    if data_offset > MAX_HEADER_BYTES:
        raise HeaderError(
            f"the tensor data starts at byte {data_offset}; a GGUF header is read up to {MAX_HEADER_BYTES // _MIB} MiB"
        )
    # writers pad every tensor's data to the alignment, the last one too (gguf-py, ggml's gguf_write)
    full = data_offset + -(-end // alignment) * alignment
    if full > MAX_FILE_BYTES:
        raise HeaderError(f"the tensor index describes a file of {full} bytes, more than any model file")
    return GgufIndex(buf, walk.order, entries, sizes, index_end, data_offset, full, shapes)


class _Walk:
    """A cursor over the header that refuses to step past the file, the header bound or the time bound."""

    def __init__(self, buf: Any) -> None:
        self.buf, self.order, self.at = buf, "<", 0
        self.limit = min(len(buf), MAX_HEADER_BYTES)
        self.deadline = time.monotonic() + MAX_SECONDS
        self.items = self.strings = 0

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise HeaderError(f"reading the header took over {MAX_SECONDS:g} s (a real one takes under a second)")

    def reach(self, end: int, what: str) -> None:
        if end > MAX_HEADER_BYTES:
            raise HeaderError(f"{what}: runs past {MAX_HEADER_BYTES // _MIB} MiB, the most a GGUF header is read")
        if end > self.limit:
            raise HeaderError(
                f"{what}: runs past the end of the file; a download of the header alone must reach "
                "the end of its tensor index"
            )

    def unpack(self, fmt: str, at: int, what: str) -> tuple[Any, ...]:
        self.reach(at + struct.calcsize(self.order + fmt), what)
        return struct.unpack_from(self.order + fmt, self.buf, at)

    def text(self, bound: int, what: str, keep: bool = True) -> bytes:
        """Step over a string; its bytes when `keep` (names), else nothing is copied (values)."""
        (length,) = self.unpack("Q", self.at, what)
        if length > bound:
            raise HeaderError(f"{what}: {length} bytes long (at most {bound})")
        start = self.at + 8
        self.reach(start + length, what)
        self.at = start + length
        return bytes(self.buf[start : self.at]) if keep else b""

    def value(self, key: str, kind: int) -> _Entry:
        """Step over one metadata value, checking its lengths; where it lies."""
        at = self.at
        if kind == _STRING:
            self.text(MAX_STRING, f"metadata {key}", keep=False)
        elif kind in _SCALARS:
            self.at += struct.calcsize(_SCALARS[kind])
            self.reach(self.at, f"metadata {key}")
        elif kind == _ARRAY:
            sub, count = self.unpack("IQ", at, f"metadata {key}")
            self.items += count
            if self.items > MAX_ARRAY_ITEMS:
                raise HeaderError(
                    f"metadata {key}: an array of {count} items; at most {MAX_ARRAY_ITEMS} array "
                    "items are read over the whole header (a 262,144-token vocabulary has about "
                    "1.3 million)"
                )
            self.at = at + 12
            if sub == _STRING:
                self.strings += count
                if self.strings > MAX_STRING_ITEMS:
                    raise HeaderError(
                        f"metadata {key}: an array of {count} strings; at most {MAX_STRING_ITEMS} "
                        "array strings are read over the whole header (a 262,144-token vocabulary "
                        "and its merges are under 800,000)"
                    )
                self._strings(key, count)
            elif sub in _SCALARS:
                self.at += count * struct.calcsize(_SCALARS[sub])
                self.reach(self.at, f"metadata {key}")
            else:
                raise HeaderError(f"metadata {key}: an array of type {sub} (nested arrays are not read)")
            return _Entry(kind, at + 12, sub, count)
        else:
            raise HeaderError(f"metadata {key}: unknown type {kind}")
        return _Entry(kind, at)

    def _strings(self, key: str, count: int) -> None:
        length_of = struct.Struct(self.order + "Q").unpack_from
        buf, at, limit = self.buf, self.at, self.limit - 8
        for number in range(count):
            if at > limit:
                self.reach(at + 8, f"metadata {key}")
            (length,) = length_of(buf, at)
            if length > MAX_STRING:
                raise HeaderError(f"metadata {key}: item {number} is {length} bytes long (at most {MAX_STRING})")
            at += 8 + length
            if not number & 0xFFFF:
                self.tick()
        self.at = at
        self.reach(at, f"metadata {key}")
