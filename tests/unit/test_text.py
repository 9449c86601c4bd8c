"""Arrays of strings without FUSE: their metadata, their chunks decoded by our string
decoder equal to numcodecs' own encoding, hostile chunks refused, and the escaping rules
(every line of a random element list, unescaped, is the element)."""

from __future__ import annotations

import json
import zlib

import numcodecs
import numpy as np
import pytest
import trio
import zarr
from helpers.text_lines import unescape
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrmount.array.text import TextArray, TooLong, render
from zarrmount.codecs import ChunkDecodeError, CodecError
from zarrmount.codecs.strings import StringChunks
from zarrmount.format import v2, v3
from zarrmount.format.model import MetadataError


def zarray(**fields) -> bytes:
    doc = {
        "zarr_format": 2,
        "shape": [6],
        "chunks": [4],
        "dtype": "|O",
        "fill_value": "",
        "order": "C",
        "filters": [{"id": "vlen-utf8"}],
        "compressor": {"id": "zlib", "level": 1},
    }
    return json.dumps(doc | fields).encode()


def test_v2_object_arrays_need_a_vlen_object_codec():
    assert v2.parse_array(zarray(), {}).strings == "utf8"
    assert v2.parse_array(zarray(filters=[{"id": "vlen-bytes"}]), {}).strings == "bytes"
    for filters in (None, [{"id": "json2"}], [{"id": "pickle"}]):
        with pytest.raises(MetadataError, match="object codec"):
            v2.parse_array(zarray(filters=filters), {})


def test_v3_string_types_and_their_fill_values():
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [3],
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "codecs": [{"name": "vlen-bytes"}],
        "data_type": "variable_length_bytes",
        "fill_value": "AP8=",  # base64 of 00 ff
    }
    meta = v3.parse_array("a", doc)
    assert meta.strings == "bytes" and meta.fill_value[()] == b"\x00\xff"
    meta = v3.parse_array("a", doc | {"data_type": "string", "fill_value": "n/a"})
    assert meta.strings == "utf8" and meta.fill_value[()] == "n/a"


def chunks_for(**fields) -> StringChunks:
    return StringChunks(v2.parse_array(zarray(**fields), {}), limit=1 << 20)


def test_chunks_decode_to_what_numcodecs_encoded():
    items = np.array(["a", "b\nc", "", "漢"], dtype=object)
    raw = zlib.compress(numcodecs.VLenUTF8().encode(items))
    assert list(chunks_for().decode(raw)) == list(items)


NOT_UTF8 = numcodecs.VLenBytes().encode(np.array([b"\xff"] * 4, dtype=object))


@pytest.mark.parametrize(
    "raw, reason",
    [
        (zlib.compress(numcodecs.VLenUTF8().encode(np.array(["a"] * 3, dtype=object))), "4 el"),
        (zlib.compress((2**31).to_bytes(4, "little") + b"\0" * 64), "4 el"),  # a count bomb
        (zlib.compress(b"\0" * (2 << 20)), "at most"),  # inflates past the limit
        (b"not zlib", "cannot decode"),
        (zlib.compress((4).to_bytes(4, "little") + (9).to_bytes(4, "little") + b"ab"), "decode"),
        (
            zlib.compress(numcodecs.VLenBytes().encode(np.array([b"\xff"] * 4, dtype=object))),
            "decode",
        ),
    ],
)
def test_hostile_chunks_are_refused(raw, reason):
    with pytest.raises(ChunkDecodeError, match=reason):
        chunks_for().decode(raw)


def _sharded_strings(tmp_path) -> tuple[dict, np.ndarray, bytes]:
    """zarr-python's v3 metadata, elements and first shard of a sharded array of strings
    (inner chunks of 2 in shards of 6; the third inner chunk never written)."""
    root = tmp_path / "s.zarr"
    array = zarr.create_array(root, shape=(6,), chunks=(2,), shards=(6,), dtype=str)
    array[0:4] = ["a", "bé", "", "two\nlines"]
    doc = json.loads((root / "zarr.json").read_text())
    return doc, array[...], (root / "c" / "0").read_bytes()


def test_strings_in_shards_are_zarr_pythons(tmp_path):
    doc, expected, shard = _sharded_strings(tmp_path)
    chunks = StringChunks(v3.parse_array("s", doc), 1 << 20)
    assert list(chunks.decode(chunks.inner(shard, (0,)))) == list(expected[0:2])
    assert list(chunks.decode(chunks.inner(shard, (1,)))) == list(expected[2:4])
    assert chunks.inner(shard, (2,)) is None  # never written: the fill value


def test_a_damaged_shard_of_strings_is_refused(tmp_path):
    doc, _, shard = _sharded_strings(tmp_path)
    chunks = StringChunks(v3.parse_array("s", doc), 1 << 20)
    for damaged in (shard[:-1] + bytes([shard[-1] ^ 1]), shard[:10]):
        with pytest.raises(ChunkDecodeError):
            chunks.inner(damaged, (0,))
    doc["codecs"] = [*doc["codecs"], {"name": "crc32c"}]  # sharding, then another codec
    with pytest.raises(CodecError, match="do not start with vlen"):
        StringChunks(v3.parse_array("s", doc), 1 << 20)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(), st.binary()), max_size=20))
def test_every_line_unescaped_is_its_element(items):
    elements = np.empty(len(items), dtype=object)
    elements[:] = items
    text = render(elements)
    lines = text.split(b"\n")
    assert lines[-1] == b"" and len(lines) == len(items) + 1
    for line, item in zip(lines, items, strict=False):
        expected = item if isinstance(item, bytes) else item.encode("utf-8", "surrogatepass")
        assert unescape(line) == expected


def test_text_reads_by_offset_and_refuses_past_its_limit():
    slabs = [np.array(["ab", "c"], dtype=object), np.array(["", "defg"], dtype=object)]
    asked = []

    async def elements(i: int) -> np.ndarray:
        asked.append(i)
        return slabs[i]

    async def main() -> None:
        text = TextArray(2, elements, limit=100, count=4, decoded=2)
        assert await text.measure() == 11
        assert await text.read(0, 100) == b"ab\nc\n\ndefg\n"
        assert await text.read(4, 3) == b"\n\nd"
        with pytest.raises(TooLong):
            await TextArray(2, elements, limit=10, count=4, decoded=2).measure()
        asked.clear()
        # more elements than bytes allowed, or a slab decoding more: refused unread
        for count, decoded in ((11, 2), (4, 11)):
            with pytest.raises(TooLong):
                await TextArray(2, elements, limit=10, count=count, decoded=decoded).measure()
        assert asked == []
        assert await TextArray(10**12, elements, limit=10, count=0, decoded=0).measure() == 0

    trio.run(main)


def test_measuring_counts_each_part_of_a_slab_and_renders_none():
    """Slabs of two parts (chunks of a row): the size is counted part by part, the limit
    checked after each, and only reads ask for a whole slab."""
    parts = {(0, 0): ["ab", "é"], (0, 1): ["c\n"], (1, 0): [b"\xff"], (1, 1): []}
    slabs = [["ab", "é", "c\n"], [b"\xff"]]
    asked = []

    async def part(i: int, j: int) -> np.ndarray:
        asked.append((i, j))
        return np.array(parts[i, j], dtype=object)

    async def elements(i: int) -> np.ndarray:
        asked.append(i)
        return np.array(slabs[i], dtype=object)

    async def main() -> None:
        text = TextArray(2, elements, limit=100, count=4, decoded=3, parts=(2, part))
        assert await text.measure() == 15  # "ab", "é" (2 bytes), "c\\n", "\\xFF": lines
        assert asked == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert await text.read(0, 100) == "ab\né\nc\\n\n\\xFF\n".encode()
        asked.clear()
        with pytest.raises(TooLong):
            await TextArray(2, elements, limit=8, count=4, decoded=3, parts=(2, part)).measure()
        assert asked == [(0, 0), (0, 1)]

    trio.run(main)
