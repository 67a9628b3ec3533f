"""Logs as users hand them over, read as a stream of UTF-8 bytes like any other log.

- Compressed: a rotated log (`server.log.1.gz`), a journal or a CI artifact export (gzip, xz, bzip2), read
  through the standard library's decompressors, in the same bounded memory as a plain file.
- UTF-16: Windows PowerShell 5's `>` and `Out-File` write UTF-16LE with a byte-order mark; every other byte
  is a NUL, which read as bytes is "binary data" or one line too many. Decoded by an incremental decoder.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import zlib
from typing import BinaryIO

from vramtui.core.errors import VramtuiError

_CHUNK = 1 << 20
_COMPRESSED = (  # magic, name, the command that prints it, the module whose open() reads it
    (b"\x1f\x8b", "gzip", "zcat", gzip),
    (b"\xfd7zXZ\x00", "xz", "xzcat", lzma),
    (b"BZh", "bzip2", "bzcat", bz2),
)
# what each decompressor raises on a file cut short or damaged (gzip's BadGzipFile is an OSError; zlib.error
# is a gzip stream whose data does not inflate)
DAMAGED = (EOFError, lzma.LZMAError, gzip.BadGzipFile, zlib.error)


def peek(stream: BinaryIO, size: int = 8192) -> bytes:
    """The first bytes of a stream, left in it (a pipe cannot be read twice); b"" when it cannot say."""
    peek = getattr(stream, "peek", None)
    try:
        return bytes(peek(size)[:size]) if peek is not None else b""
    except (OSError, ValueError, *DAMAGED):  # a file cut short says so when it is read
        return b""


def compression_of(head: bytes) -> tuple[str, str] | None:
    """(format, the command that prints it) when these first bytes start a compressed file."""
    for magic, name, reader, _module in _COMPRESSED:
        if head.startswith(magic) and (name != "bzip2" or head[3:4] in b"123456789"):
            return name, reader
    return None


def utf16_of(head: bytes) -> str | None:
    """The codec when these first bytes are UTF-16 text: NULs in every other byte of mostly-ASCII text
    (the odd ones: little-endian), after a byte-order mark or without one. A mark before bytes that are
    not such text (a binary file) is not taken for one."""
    marked = head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    sample = head[2:] if marked else head
    sample = sample[: len(sample) // 2 * 2]
    if len(sample) < (2 if marked else 16):
        return "utf-16" if marked and sample else None
    odd, even = sample[1::2].count(0), sample[0::2].count(0)
    half, share = len(sample) // 2, 0.5 if marked else 0.9
    if odd >= share * half and even <= half - odd:
        return "utf-16" if marked else "utf-16-le"
    if even >= share * half and odd <= half - even:
        return "utf-16" if marked else "utf-16-be"
    return None


class _Over(io.RawIOBase):
    """A readable stream over another one, whose bytes it changes as they are read."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._source.fileno()


class _Recoded(_Over):
    """A text stream in another encoding, read as UTF-8 bytes (undecodable bytes become U+FFFD)."""

    def __init__(self, source: BinaryIO, encoding: str) -> None:
        super().__init__(source)
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._pending = b""
        self._offset = 0
        self._done = False

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while self._offset >= len(self._pending) and not self._done:
            raw = self._source.read(_CHUNK)
            self._done = not raw
            self._pending = self._decoder.decode(raw, final=self._done).encode("utf-8", "replace")
            self._offset = 0
        count = min(len(buffer), len(self._pending) - self._offset)
        buffer[:count] = self._pending[self._offset : self._offset + count]
        self._offset += count
        return count


class _CarriageReturns(_Over):
    """A log whose lines end in a bare CR (old Mac tools, a terminal capture), read with LF endings."""

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._source.read(len(buffer)).replace(b"\r", b"\n")
        buffer[: len(data)] = data
        return len(data)


def decoded(stream: BinaryIO) -> tuple[BinaryIO, str | None]:
    """The stream as plain UTF-8 log bytes, and the compression it was in (None: none)."""
    packed = compression_of(peek(stream, 8))
    if packed is not None:
        module = next(module for _, name, _, module in _COMPRESSED if name == packed[0])
        stream = module.open(stream)  # each reads an open binary file, in "rb"
    codec = utf16_of(peek(stream, 4096))
    if codec is not None:
        stream = io.BufferedReader(_Recoded(stream, codec), buffer_size=_CHUNK)  # type: ignore[assignment]
    head = peek(stream, 65536)
    if b"\r" in head and b"\n" not in head:  # QA: a CR-only log read as one line
        stream = io.BufferedReader(_CarriageReturns(stream), buffer_size=_CHUNK)  # type: ignore[assignment]
    return stream, packed[0] if packed else None


def damaged(path: object, packed: str, error: BaseException) -> VramtuiError:
    """The one line for a compressed log that ends early or does not decompress."""
    reader = next(reader for _, name, reader, _ in _COMPRESSED if name == packed)
    rescue = (
        f"`{reader} FILE | vramtui diagnose -`"
        if path == STDIN
        else f"`{reader} {path} | vramtui diagnose -`"
    )
    return VramtuiError(
        f"{path}: the {packed} file is cut short or damaged ({error}); {rescue} reads the part that is there"
    )


STDIN = "standard input"
