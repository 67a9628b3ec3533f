"""A GGUF file's header and tensor table, read once and without its tokenizer arrays.

`gguf.GGUFReader` turns every array element into numpy objects: a real vocabulary (Qwen's 151,936 tokens
and as many merges, Llama 3's 128,256) costs seconds before the first figure. The estimate needs the
scalar keys, a few short arrays (per-layer KV heads, a sliding-window pattern) and the tensor table, so
this reader walks the key/value section itself (with the gguf package's type constants), keeps each long
array as its element type and count only, and reads the tensor infos. Headers are memoized by path,
modification time and size: each file is read once however many estimates ask.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramtui.core.errors import VramtuiError

# Arrays longer than this are kept as their type and count (the tokenizer's tokens, merges, scores,
# token types): no estimate reads their elements.
LONG_ARRAY = 4096
_SUPPORTED_VERSIONS = (2, 3)
_ALIGNMENT_KEY = "general.alignment"


@dataclass(frozen=True)
class LongArray:
    """An array whose elements were skipped: its element type (gguf.GGUFValueType) and length."""

    item_type: int
    count: int

    def __len__(self) -> int:
        return self.count


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type_name: str  # ggml type, lower case (q4_k, f16 ...)
    n_elements: int
    n_bytes: int  # as stored: whole blocks of its type
    data_offset: int  # from the start of the file


@dataclass(frozen=True)
class GgufHeader:
    path: str
    version: int
    fields: dict[str, Any]  # scalars as Python values, short arrays as lists, long ones as LongArray
    tensors: tuple[TensorInfo, ...]
    data_start: int

    def get(self, key: str) -> Any:
        return self.fields.get(key)


def read_header(path: str | Path) -> GgufHeader:
    """The header of a GGUF file (memoized by path, modification time and size)."""
    file = Path(path).expanduser()
    try:
        stat = file.stat()
    except OSError as error:
        raise VramtuiError(f"{path}: cannot read ({error.strerror or error})") from None
    resolved = str(file.resolve())
    try:
        return _read_header(resolved, stat.st_mtime_ns, stat.st_size)
    except VramtuiError as error:  # said with the path as the user gave it (QA 19 F13), as cut_short says it
        said = str(error)
        if str(path) == resolved or not said.startswith(f"{resolved}: "):
            raise
        raise VramtuiError(f"{path}{said[len(resolved) :]}") from None


def cut_short(path: str | Path) -> str | None:
    """Why a GGUF cannot load when it was cut short: its tensor data ends past the file (a download that
    stopped: one line with both sizes), or its header itself does not read though the file starts with
    the GGUF magic (QA: `estimate` refused such a file, `check` launched it). None for a whole file, and
    for one that is no GGUF at all (the caller says so, or the engine's own refusal says more)."""
    try:
        size = Path(path).expanduser().stat().st_size
        header = read_header(path)
    except OSError:
        return None
    except VramtuiError as error:
        with contextlib.suppress(OSError), open(Path(path).expanduser(), "rb") as handle:
            if handle.read(4) == b"GGUF":
                said = str(error)
                return said if said.endswith("download it again") else f"{said}: download it again"
        return None
    need = max((t.data_offset + t.n_bytes for t in header.tensors), default=0)
    if need <= size:
        return None
    return (
        f"{path}: truncated GGUF file ({size:,} of the {need:,} bytes its tensor table needs): "
        "the download stopped; download it again"
    )


@functools.lru_cache(maxsize=64)
def _read_header(path: str, _mtime_ns: int, size: int) -> GgufHeader:
    try:
        with open(path, "rb") as handle:
            if size == 0:
                raise VramtuiError(f"{path}: the file is empty (0 bytes): download it again")
            if size < 24:
                magic = handle.read(4)
                if magic != b"GGUF":
                    raise VramtuiError(f"{path}: not a GGUF file (it does not start with the GGUF magic)")
                raise VramtuiError(
                    f"{path}: truncated GGUF file (it stops at byte {size}, inside its header): the download "
                    "stopped; download it again"
                )
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _Parser(path, data).header()
    except OSError as error:
        raise VramtuiError(f"{path}: cannot read ({error.strerror or error})") from None


class _Newer(ValueError):
    def __init__(self, version: int) -> None:
        super().__init__(version)
        self.version = version


class _Parser:
    """One pass over the header: magic, version, counts, the key/value pairs, the tensor infos."""

    def __init__(self, path: str, data: mmap.mmap) -> None:
        self.path, self.data, self.pos, self.order = path, data, 0, "<"
        self.part = "counts"  # what is being read: said where the file stops

    def header(self) -> GgufHeader:
        if self.data[:4] != b"GGUF":
            raise VramtuiError(f"{self.path}: not a GGUF file (it does not start with the GGUF magic)")
        try:
            return self._header()
        except _Newer as error:  # not damage: a format this reader does not know (QA 23 D7)
            raise VramtuiError(
                f"{self.path}: GGUF version {error.version}, which vramtui does not read (it reads versions "
                f"{' and '.join(map(str, _SUPPORTED_VERSIONS))}): a newer format, or a damaged file"
            ) from None
        except struct.error:  # the file ends inside the header: said in words, not struct's (QA 23 D7)
            raise VramtuiError(
                f"{self.path}: truncated GGUF file (it stops at byte {len(self.data):,}, inside its {self.part}): "
                "the download stopped; download it again"
            ) from None
        except (
            IndexError,
            ValueError,
            UnicodeDecodeError,
            OverflowError,
            MemoryError,
        ) as error:
            reason = " ".join(str(error).split())[:160] or type(error).__name__
            raise VramtuiError(
                f"{self.path}: truncated or damaged GGUF file (inside its {self.part}: {reason})"
            ) from None

    def _header(self) -> GgufHeader:
        self.pos = 4
        version = self._u32()
        if version & 0xFFFF == 0:  # written on a big-endian machine
            self.order, self.pos = ">", 4
            version = self._u32()
        if version not in _SUPPORTED_VERSIONS:
            raise _Newer(version)
        n_tensors, n_kv = self._u64(), self._u64()
        self._plausible(n_tensors, 8, "tensor count")
        self._plausible(n_kv, 12, "key/value count")
        fields: dict[str, Any] = {}
        self.part = "key/value metadata"
        for _ in range(n_kv):
            key = self._string()
            fields[key] = self._value(self._u32())
        self.part = "tensor table"
        infos = [self._tensor_info() for _ in range(n_tensors)]
        alignment = fields.get(_ALIGNMENT_KEY)
        align = alignment if isinstance(alignment, int) and alignment > 0 else 32
        start = -(-self.pos // align) * align
        tensors = tuple(
            TensorInfo(name, type_name, n, size, start + offset) for name, type_name, n, size, offset in infos
        )
        return GgufHeader(self.path, version, fields, tensors, start)

    # -- the pieces ---------------------------------------------------------------------------------

    def _unpack(self, fmt: str, size: int) -> Any:
        value = struct.unpack_from(self.order + fmt, self.data, self.pos)[0]
        self.pos += size
        return value

    def _u32(self) -> int:
        return int(self._unpack("I", 4))

    def _u64(self) -> int:
        return int(self._unpack("Q", 8))

    def _plausible(self, count: int, least_bytes: int, what: str) -> None:
        """A count the rest of the file cannot hold is damage (not a reason to loop for ever)."""
        if count * least_bytes > len(self.data) - self.pos:
            raise ValueError(f"the {what} {count} does not fit in the file")

    def _string(self) -> str:
        length = self._u64()
        self._plausible(length, 1, "string length")
        text = bytes(self.data[self.pos : self.pos + length]).decode("utf-8", "replace")
        self.pos += length
        return text

    def _value(self, value_type: int) -> Any:
        scalar = _SCALARS.get(value_type)
        if scalar is not None:
            fmt, size = scalar
            value = self._unpack(fmt, size)
            return bool(value) if value_type == _BOOL else value
        if value_type == _STRING:
            return self._string()
        if value_type == _ARRAY:
            return self._array()
        raise ValueError(f"unknown value type {value_type}")

    def _array(self) -> Any:
        item_type, count = self._u32(), self._u64()
        scalar = _SCALARS.get(item_type)
        if scalar is not None:
            fmt, size = scalar
            self._plausible(count, size, "array length")
            if count > LONG_ARRAY:
                self.pos += count * size  # fixed-size elements: skipped in one step
                return LongArray(item_type, count)
            values = list(struct.unpack_from(f"{self.order}{count}{fmt}", self.data, self.pos))
            self.pos += count * size
            return [bool(v) for v in values] if item_type == _BOOL else values
        if item_type == _STRING:
            self._plausible(count, 8, "array length")
            if count > LONG_ARRAY:
                self._skip_strings(count)
                return LongArray(item_type, count)
            return [self._string() for _ in range(count)]
        if item_type == _ARRAY:
            return [self._array() for _ in range(count)]
        raise ValueError(f"unknown array element type {item_type}")

    def _skip_strings(self, count: int) -> None:
        """Past `count` strings without making one (the token list: only its length is needed)."""
        unpack, data, pos = struct.Struct(self.order + "Q").unpack_from, self.data, self.pos
        for _ in range(count):
            pos += 8 + unpack(data, pos)[0]
        if pos > len(data):
            raise ValueError("a string array runs past the end of the file")
        self.pos = pos

    def _tensor_info(self) -> tuple[str, str, int, int, int]:
        name = self._string()
        n_dims = self._u32()
        if n_dims > 8:
            raise ValueError(f"tensor {name} has {n_dims} dimensions")
        dims = [self._u64() for _ in range(n_dims)]
        n_elements = 1
        for dim in dims:
            n_elements *= dim
        type_id, offset = self._u32(), self._u64()
        type_name, (block, type_size, row_meta) = _ggml_type(type_id, name)
        rows = n_elements // dims[0] if dims and dims[0] else 0
        return name, type_name, n_elements, n_elements * type_size // block + rows * row_meta, offset


def _ggml_type(type_id: int, tensor: str) -> tuple[str, tuple[int, int, int]]:
    """A type id's name, elements per block, bytes per block and per-row metadata: mainline's (the
    gguf package's), else an engine's own (ik_llama.cpp's, from the registry)."""
    import gguf

    try:
        qtype = gguf.GGMLQuantizationType(type_id)
        return qtype.name.lower(), (*gguf.GGML_QUANT_SIZES[qtype], 0)
    except (ValueError, KeyError):
        pass
    found = _engine_types().get(type_id)
    if found is None:
        raise ValueError(f"tensor {tensor} has ggml type {type_id}, which no engine vramtui knows uses")
    return found


@functools.cache
def _engine_types() -> dict[int, tuple[str, tuple[int, int, int]]]:
    from vramtui.core.backends import engine_ggml_types

    return {
        type_id: (name, (block, size, row_meta))
        for name, type_id, block, size, row_meta in engine_ggml_types()
    }


def _value_types() -> tuple[dict[int, tuple[str, int]], int, int, int]:
    from gguf import GGUFValueType as T

    scalars = {
        T.UINT8: ("B", 1),
        T.INT8: ("b", 1),
        T.UINT16: ("H", 2),
        T.INT16: ("h", 2),
        T.UINT32: ("I", 4),
        T.INT32: ("i", 4),
        T.FLOAT32: ("f", 4),
        T.BOOL: ("?", 1),
        T.UINT64: ("Q", 8),
        T.INT64: ("q", 8),
        T.FLOAT64: ("d", 8),
    }
    return {int(k): v for k, v in scalars.items()}, int(T.BOOL), int(T.STRING), int(T.ARRAY)


_SCALARS, _BOOL, _STRING, _ARRAY = _value_types()
