"""A JSON trace read in pieces: its ``traceEvents`` array cut between events, so a file of any
size is decoded a few MB at a time, never held whole.

The file is read ahead in a thread (and inflated there when gzip'd); reading overlaps the
decode, inflating only in part: zlib takes the GIL back for each block of its output. A cut
is made after a ``}`` that a ``,`` and a ``{`` follow, and the piece decoded; a cut that fell
inside a string or a nested value cannot decode (its quotes or brackets do not close), so
the piece is cut again earlier. A file not laid out as ``{..., "traceEvents": [...], ...}``
raises NotStreamable.
"""

from __future__ import annotations

import io
import queue
import threading
import zlib
from collections.abc import Callable, Generator, Iterator
from itertools import chain
from pathlib import Path
from typing import Generic, TypeVar

import msgspec

__all__ = [
    "CHUNK_BYTES",
    "EventPieces",
    "NotStreamable",
    "Progress",
    "array_start",
    "file_chunks",
    "skip_space",
    "top_level",
]

T = TypeVar("T")
#: Bytes of JSON decoded at a time.
CHUNK_BYTES = 8 << 20
#: Free bytes before each chunk's data, where the last piece's unfinished event is put.
SLACK = 1 << 20
#: How far into the file the ``traceEvents`` key may start.
_HEAD_LIMIT = 64 << 20
_CUT_TRIES = 8
_CANDIDATES = 256
#: msgspec's messages for what a cut in the wrong place gives: input that ends inside a value
#: (a cut in a string or a nested value), or more after the array (a cut past its end).
_MISPLACED = ("Input data was truncated", "JSON is malformed: trailing characters")
#: Bytes gathered without finding a cut before the file is read whole instead.
_REST_LIMIT = 64 << 20
#: The first two bytes of every gzip stream.
GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 31
_GZIP_READ = 1 << 20
_SPACE = b" \t\r\n"
_OPEN, _CLOSE, _COMMA, _COLON, _BRACE = b"[],:{"
_KEY = b'"traceEvents"'
_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])

#: Called with (bytes of the file read so far, the file's size).
Progress = Callable[[int, int], None]


class Chunk:
    """Bytes ``buffer[start:end]`` of a file, with room before ``start`` to prepend to."""

    __slots__ = ("buffer", "end", "start")

    def __init__(self, buffer: bytearray, start: int, end: int) -> None:
        self.buffer = buffer
        self.start = start
        self.end = end

    @classmethod
    def of(cls, data: bytes) -> Chunk:
        """A chunk of bytes in memory (one copy, with the room)."""
        buffer = bytearray(SLACK) + data
        return cls(buffer, SLACK, len(buffer))

    def bytes(self) -> bytes:
        """A copy of the chunk's bytes."""
        return bytes(self.buffer[self.start : self.end])


class NotStreamable(Exception):
    """The bytes are not one object with a ``traceEvents`` array of objects (or a cut could
    not be placed): read the file whole instead."""


def is_gzip(path: Path) -> bool:
    """True when the file starts with gzip's magic bytes."""
    with path.open("rb") as f:
        return f.read(2) == GZIP_MAGIC


def file_chunks(
    path: Path,
    progress: Progress | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    gzipped: bool | None = None,
) -> Generator[Chunk]:
    """The file's bytes, inflated when it is gzip (``gzipped``, when the caller has looked
    already), in chunks of ``chunk_bytes``; ``progress`` is told after each chunk. Raises
    what reading raised: OSError, EOFError or zlib.error for a bad gzip, MemoryError."""
    size = path.stat().st_size
    if gzipped is None:
        gzipped = is_gzip(path)
    ahead: queue.Queue[tuple[Chunk, int] | BaseException | None] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def read() -> None:
        try:
            with path.open("rb") as raw:
                chunks = _gunzip(raw, chunk_bytes) if gzipped else _plain(raw, size, chunk_bytes)
                for chunk in chunks:
                    if stop.is_set():
                        return
                    ahead.put((chunk, raw.tell()))
        except BaseException as exc:  # the reader's end, whatever it is, reaches the consumer
            ahead.put(exc)
            return
        ahead.put(None)

    reader = threading.Thread(target=read, name="ks-trace-reader", daemon=True)
    reader.start()
    try:
        while (item := ahead.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            chunk, done = item
            yield chunk
            if progress is not None:
                progress(done, size)
    finally:
        stop.set()
        while reader.is_alive():  # unblock a reader waiting to put its next chunk
            try:
                ahead.get_nowait()
            except queue.Empty:
                reader.join(0.01)


def _plain(raw: io.BufferedReader, size: int, chunk_bytes: int) -> Iterator[Chunk]:
    while True:
        buffer = bytearray(SLACK + min(chunk_bytes, size - raw.tell() + 1))
        n = raw.readinto(memoryview(buffer)[SLACK:])
        if not n:
            return
        yield Chunk(buffer, SLACK, SLACK + n)


def _gunzip(raw: io.BufferedReader, chunk_bytes: int) -> Iterator[Chunk]:
    """Inflates a gzip stream of one or more members, a chunk per ``decompress`` where it
    can (150 MB of JSON in 0.31 s here, ``gzip.decompress`` 0.46 s). zlib takes the GIL back
    for each block of output, so this overlaps the decode only in part."""
    inflate = zlib.decompressobj(_GZIP_WBITS)
    data = b""
    in_member = False  # input fed to this member, its end not reached yet
    while True:
        buffer = bytearray(SLACK)
        while len(buffer) - SLACK < chunk_bytes:
            if not data:
                data = raw.read(_GZIP_READ)
                if not in_member:  # zeros may pad the end, across reads too
                    data = data.lstrip(b"\0")
                    if not data and raw.peek(1):
                        continue
                if not data:  # the end of the input: what the inflater still holds
                    buffer += inflate.flush()
                    in_member = in_member and not inflate.eof
                    break
            in_member = True
            buffer += inflate.decompress(data, chunk_bytes - (len(buffer) - SLACK))
            data = inflate.unconsumed_tail
            if inflate.eof:  # the next member, if any (zeros may pad the end)
                data = inflate.unused_data.lstrip(b"\0")
                inflate = zlib.decompressobj(_GZIP_WBITS)
                in_member = False
        if len(buffer) > SLACK:
            yield Chunk(buffer, SLACK, len(buffer))
        elif in_member:
            raise EOFError("the gzip stream ends inside a member (truncated)")
        else:
            return


class EventPieces(Generic[T]):
    """Iterates ``decode(piece)`` over the pieces of the events array, each piece a JSON array
    of whole events (a memoryview, valid during the call). ``decode`` raises
    msgspec.DecodeError (or RecursionError) on bad syntax. After the iteration, ``top_level``
    holds the rest of the document with the array empty."""

    def __init__(self, chunks: Iterator[Chunk], decode: Callable[[memoryview], T]) -> None:
        self._chunks = chunks
        self._decode = decode
        self._head = b""
        self._tail = b""

    @property
    def top_level(self) -> dict[str, msgspec.Raw]:
        """The document's other fields (``deviceProperties`` ...), undecoded; NotStreamable
        when they are not valid JSON."""
        return top_level(self._head, self._tail)

    def __iter__(self) -> Iterator[T]:
        rest = b""  # the unfinished event at the end of the last chunk
        for read in chain([self._read_head()], self._chunks):
            if len(rest) >= read.start:  # an event longer than the room: copy, once
                chunk = Chunk.of(rest + read.bytes())
            else:
                chunk = read
                chunk.start -= len(rest)
                chunk.buffer[chunk.start : chunk.start + len(rest)] = rest
            decoded, rest = self._cut(chunk)
            if decoded is not None:
                yield decoded
        yield self._last(rest)

    def _read_head(self) -> Chunk:
        """Reads up to the array's ``[``; returns the chunk of what follows it."""
        head = b""
        for chunk in self._chunks:
            first = bytes(chunk.buffer[chunk.start : chunk.start + 64]).lstrip(_SPACE)[:1]
            if not head and first != b"{":
                raise NotStreamable("not a JSON object")
            data = head + chunk.bytes() if head else chunk.buffer
            lo, hi = (0, len(data)) if head else (chunk.start, chunk.end)
            start = array_start(data, lo, hi)
            if start >= 0:
                self._head = bytes(data[lo : start - 1])
                return Chunk.of(bytes(data[start:hi])) if head else Chunk(chunk.buffer, start, hi)
            head = bytes(data[lo:hi])
            if len(head) > _HEAD_LIMIT:
                break
        raise NotStreamable("no traceEvents array near the start")

    def _cut(self, chunk: Chunk) -> tuple[T | None, bytes]:
        """Decodes the chunk up to its last cut that decodes (``[`` put before it, the cut's
        comma made a ``]``); returns what was decoded (None when there was no cut) and the
        bytes after the cut."""
        buffer, begin, end = chunk.buffer, chunk.start - 1, chunk.end
        buffer[begin] = _OPEN
        view = memoryview(buffer)
        tried = 0
        for comma in _cuts(buffer, chunk.start, end):
            if tried == _CUT_TRIES:
                break
            if tried and not _outside_strings(buffer, begin, comma):  # the first is tried as is
                continue
            tried += 1
            buffer[comma] = _CLOSE
            try:
                decoded = self._decode(view[begin : comma + 1])
            except msgspec.DecodeError as exc:
                buffer[comma] = _COMMA
                if not str(exc).startswith(_MISPLACED):  # bad JSON before the cut, not the cut
                    raise NotStreamable(f"the events are not valid JSON: {exc}") from None
                continue
            except RecursionError:
                raise NotStreamable("the events are nested too deeply") from None
            return decoded, bytes(buffer[comma + 1 : end])
        if end - chunk.start > _REST_LIMIT:
            raise NotStreamable("no place to cut the events in 64 MiB")
        return None, bytes(buffer[chunk.start : end])

    def _last(self, rest: bytes) -> T:
        """Decodes the last events, up to the ``]`` that closes the array."""
        end = len(rest)
        for _ in range(_CUT_TRIES):
            end = rest.rfind(b"]", 0, end)
            if end < 0:
                break
            tail = rest[end + 1 :]
            after = tail.strip(_SPACE)
            if after != b"}" and not after.startswith(b","):
                continue
            try:
                _TOP_LEVEL.decode(b'{"":0' + tail)
                decoded = self._decode(memoryview(b"[" + rest[: end + 1]))
            except msgspec.DecodeError:
                continue
            except RecursionError:
                raise NotStreamable("the events are nested too deeply") from None
            self._tail = tail
            return decoded
        raise NotStreamable("the traceEvents array does not end where expected")


def top_level(head: bytes, tail: bytes) -> dict[str, msgspec.Raw]:
    """The document around its events array (``head`` before ``[``, ``tail`` after ``]``),
    its fields undecoded; NotStreamable when they are not valid JSON."""
    try:
        return _TOP_LEVEL.decode(head + b"[]" + tail)
    except (msgspec.MsgspecError, RecursionError):
        raise NotStreamable("the fields around traceEvents are not valid JSON") from None


def skip_space(data: bytes | bytearray, i: int, end: int) -> int:
    """The index of the first byte at or after ``i`` (before ``end``) that is no space."""
    while i < end and data[i] in _SPACE:
        i += 1
    return i


def array_start(data: bytes | bytearray, lo: int, hi: int) -> int:
    """The index after the ``[`` of ``"traceEvents": [``, -1 if not (yet) there."""
    key = data.find(_KEY, lo, hi)
    if key < 0:
        return -1
    i = skip_space(data, key + len(_KEY), hi)
    if i >= hi:
        return -1
    if data[i] != _COLON:
        raise NotStreamable("traceEvents is not a key")
    i = skip_space(data, i + 1, hi)
    if i >= hi:
        return -1
    if data[i] != _OPEN:
        raise NotStreamable("traceEvents is not an array")
    return i + 1


def _outside_strings(data: bytearray, lo: int, i: int) -> bool:
    """Whether an even number of quotes precedes ``i`` (escaped ones not counted; an escaped
    backslash before a closing quote fools it, and then the decode finds out)."""
    return (data.count(b'"', lo, i) - data.count(b'\\"', lo, i)) % 2 == 0


def _cuts(data: bytearray, lo: int, hi: int) -> Iterator[int]:
    """Indexes of commas between two objects (``}`` ``,`` ``{``), last first, a bounded
    number of them."""
    end = hi
    for _ in range(_CANDIDATES):
        close = data.rfind(b"}", lo, end)
        if close < 0:
            return
        end = close
        comma = skip_space(data, close + 1, hi)
        if comma >= hi or data[comma] != _COMMA:
            continue
        after = skip_space(data, comma + 1, hi)
        if after < hi and data[after] == _BRACE:
            yield comma
