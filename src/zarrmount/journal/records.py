"""Journal entries: one acknowledged write each, framed so that a torn or damaged entry is
recognised and refused whole, never applied in part.

An entry is a 16-byte header (magic, payload length, payload CRC-32C, header CRC-32C) and a
payload: the write's offset, the array's path, the array's identity (dtype and shape: an
entry is applied only to the array it was written to) and the bytes. A header whose CRC
fails leaves its length unknown, so the rest of the segment is refused; a payload whose
CRC fails is refused alone.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from google_crc32c import extend, value

MAGIC = b"ZMJ1"
HEADER = struct.Struct("<4sIII")  # magic, payload length, payload crc, header crc
# A segment begins with its own header: the bytes of entries that follow are its own, and
# what lies past them is an earlier use of the file (segments are written again once
# emptied: overwriting a file's cached pages costs a sixth of appending new ones).
SEGMENT_MAGIC = b"ZMS1"
SEGMENT = struct.Struct("<4sQQI")  # magic, segment number, bytes of entries, crc
FIXED = struct.Struct("<QHH")  # offset, path length, identity length
MAX_PAYLOAD = (64 << 20) + FIXED.size + 2 * 0xFFFF  # no write is longer than 64 MiB


@dataclass(frozen=True)
class Entry:
    path: str  # the array's path in the hierarchy ("" for a root array)
    identity: str  # the array's dtype and shape when written (see ``identity``)
    offset: int  # where in the array's file
    data: bytes | memoryview
    start: int = 0  # bytes [start, end) of the segment hold it
    end: int = 0


@dataclass(frozen=True)
class Refused:
    """Bytes ``[start, end)`` of a segment that are no entry, and why."""

    start: int
    end: int
    reason: str


def identity(dtype_str: str, shape: tuple[int, ...]) -> str:
    return f"{dtype_str}{list(shape)}"


def _crc(data: bytes | memoryview, crc: int = 0) -> int:
    """CRC-32C (in hardware: a tenth of zlib's CRC-32's cost) of bytes or a view."""
    return extend(crc, data if isinstance(data, bytes) else bytes(data))


def frame(path: str, ident: str, offset: int, data: bytes | memoryview) -> list[bytes]:
    """The parts of one entry, to be written in order (``os.pwritev``): bytes are not
    copied."""
    name, what = path.encode(), ident.encode()
    head = FIXED.pack(offset, len(name), len(what)) + name + what
    length = len(head) + len(data)
    if length > MAX_PAYLOAD:
        raise ValueError(f"a journal entry of {length} bytes is too long")
    header = struct.pack("<4sII", MAGIC, length, _crc(data, value(head)))
    return [header + struct.pack("<I", value(header)), head, data]


def segment_header(number: int, entries: int) -> bytes:
    """The header of segment ``number`` holding ``entries`` bytes of entries after it."""
    head = SEGMENT.pack(SEGMENT_MAGIC, number, entries, 0)[:-4]
    return head + struct.pack("<I", value(head))


def entries_span(head: bytes, size: int, number: int) -> tuple[int, int] | None:
    """Where the entries of segment ``number`` lie, of its ``size`` bytes beginning with
    ``head``: as many as its header says (fewer if the file was cut); a segment without a
    header (written before headers) is entries throughout. None: a damaged header, or one
    of another segment."""
    if not head.startswith(SEGMENT_MAGIC):
        return 0, size
    if len(head) < SEGMENT.size:
        return None
    _magic, found, entries, crc = SEGMENT.unpack_from(head)
    if value(head[: SEGMENT.size - 4]) != crc or found != number:
        return None
    return SEGMENT.size, min(size, SEGMENT.size + entries)


def _payload(payload: bytes, start: int, end: int) -> Entry | None:
    """The entry a checked payload holds (its data a view of it: not copied); None when
    its lengths disagree."""
    if len(payload) < FIXED.size:
        return None
    offset, name_len, what_len = FIXED.unpack_from(payload)
    begin = FIXED.size + name_len + what_len
    if begin > len(payload):
        return None
    try:
        path = payload[FIXED.size : FIXED.size + name_len].decode()
        what = payload[FIXED.size + name_len : begin].decode()
    except UnicodeDecodeError:
        return None
    return Entry(path, what, offset, memoryview(payload)[begin:], start, end)


def _read_item(f: BinaryIO, pos: int, end: int) -> Entry | Refused:
    """The entry at ``pos`` (where ``f`` is), or the bytes refused from there: a payload is
    read only once its checked header says its length is one an entry can have."""
    if end - pos < HEADER.size:
        return Refused(pos, end, f"a truncated entry header ({end - pos} bytes)")
    header = f.read(HEADER.size)
    magic, length, crc, header_crc = HEADER.unpack(header)
    if magic != MAGIC or _crc(header[: HEADER.size - 4]) != header_crc:
        return Refused(pos, end, "a damaged entry header: the rest of the segment")
    stop = pos + HEADER.size + length
    if length > MAX_PAYLOAD or stop > end:
        return Refused(pos, end, f"a truncated entry ({end - pos} of {stop - pos} bytes)")
    payload = f.read(length)
    entry = _payload(payload, pos, stop) if _crc(payload) == crc else None
    if entry is None:
        return Refused(pos, stop, "an entry whose checksum or lengths do not match")
    return entry


def scan(f: BinaryIO, end: int) -> Iterator[Entry | Refused]:
    """The entries of a segment from ``f``'s position to ``end``, in order, and what is
    refused between them (positions are ``f``'s). Each is read when asked for and not held
    once yielded, so a replay holds one entry, never its segment."""
    pos = f.tell()
    while pos < end:
        item = _read_item(f, pos, end)
        pos = item.end
        yield item
        del item  # the caller's now: not kept while the next one is read
