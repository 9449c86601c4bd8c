"""Arrays of strings without FUSE: their metadata, their chunks decoded by our string
decoder equal to numcodecs' own encoding, hostile chunks refused, and the escaping rules
(every line of a random element list, unescaped, is the element)."""

from __future__ import annotations

import json
import os
import zlib
from unittest.mock import patch

import numcodecs
import numpy as np
import pytest
import trio
import zarr
from helpers.text_lines import escape, unescape
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrmount import hierarchy
from zarrmount.array import text as text_module
from zarrmount.array.text import TextArray, TooLong, flat_indices, render, runs
from zarrmount.assemble import assemble
from zarrmount.codecs import ChunkDecodeError, CodecError
from zarrmount.codecs.strings import StringChunks
from zarrmount.format import v2, v3
from zarrmount.format.model import MetadataError
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore


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


class ListLines:
    """The elements of a list, measured ``part`` at a time, rendered ``block`` at a time;
    what the text asks of it is recorded."""

    def __init__(self, items: list, part: int = 2, block: int = 2) -> None:
        self.items = items
        self.shape = (len(items),)
        self.run = part
        self.decoded = part
        self.block = block
        self.asked: list = []

    def parts(self):
        return (
            ((a, min(a + self.run, len(self.items))),) for a in range(0, len(self.items), self.run)
        )

    async def part(self, box) -> np.ndarray:
        self.asked.append(box)
        ((start, stop),) = box
        return _objects(self.items[start:stop])

    async def elements(self, start: int, stop: int) -> np.ndarray:
        self.asked.append((start, stop))
        return _objects(self.items[start:stop])

    def let_go(self) -> None:
        self.asked.append("let go")


def _objects(items: list) -> np.ndarray:
    elements = np.empty(len(items), dtype=object)
    elements[:] = items
    return elements


def test_text_reads_by_offset_and_refuses_past_its_limit():
    items = ["ab", "c", "", "defg"]

    async def main() -> None:
        text = TextArray(ListLines(items), limit=100)
        assert await text.measure() == 11
        assert await text.read(0, 100) == b"ab\nc\n\ndefg\n"
        assert await text.read(4, 3) == b"\n\nd"
        with pytest.raises(TooLong):
            await TextArray(ListLines(items), limit=10).measure()
        # more elements than bytes allowed, or a part decoding more: refused unread
        for count, decoded in ((11, 2), (4, 11)):
            lines = ListLines(items + [""] * (count - 4))
            lines.decoded = decoded
            with pytest.raises(TooLong):
                await TextArray(lines, limit=10).measure()
            assert lines.asked == []
        empty = ListLines([])
        empty.shape = (10**12, 0)  # no element: no part asked for
        text = TextArray(empty, limit=10)
        assert await text.measure() == 0 and await text.read(0, 10) == b""
        assert empty.asked == ["let go"]

    trio.run(main)


def test_measuring_counts_each_part_and_renders_none():
    """Parts of two elements, blocks of three: the size is counted part by part, the
    limit checked after each, and only reads ask for the elements of a block."""
    lines = ListLines(["ab", "é", "c\n", b"\xff"], part=2, block=3)

    async def main() -> None:
        text = TextArray(lines, limit=100)
        assert await text.measure() == 15  # "ab", "é" (2 bytes), "c\\n", "\\xFF": lines
        assert lines.asked == [((0, 2),), ((2, 4),), "let go"]
        lines.asked.clear()
        assert await text.read(0, 100) == "ab\né\nc\\n\n\\xFF\n".encode()
        assert lines.asked == [(0, 3), (3, 4)]
        lines.asked.clear()
        with pytest.raises(TooLong):
            await TextArray(lines, limit=8).measure()
        assert lines.asked == [((0, 2),), ((2, 4),), "let go"]

    trio.run(main)


def test_a_read_renders_the_blocks_it_falls_in_alone():
    """1,000 elements of 1 to 30 characters in blocks of 10: a read in the middle asks for
    the elements of its blocks, none before."""
    items = ["x" * (i * 7 % 30) + "\n" for i in range(1000)]
    expected = b"".join(map(escape, items))
    lines = ListLines(items, part=64, block=10)

    async def main() -> None:
        text = TextArray(lines, limit=1 << 20)
        assert await text.measure() == len(expected)
        lines.asked.clear()
        at = expected.index(b"\n", len(expected) // 2) + 1  # the line of element 500 or so
        assert await text.read(at - 5, 40) == expected[at - 5 : at + 35]
        line = expected[:at].count(b"\n")
        assert lines.asked == sorted(
            {(b * 10, b * 10 + 10) for b in {(line - 1) // 10, line // 10}}
        )

    trio.run(main)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(max_size=8), max_size=40),
    st.integers(1, 7),
    st.integers(1, 7),
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=5),
)
def test_reads_at_any_offset_are_the_text_s_bytes(items, part, block, reads):
    expected = b"".join(map(escape, items))

    async def main() -> None:
        text = TextArray(ListLines(items, part, block), limit=1 << 20)
        assert await text.measure() == len(expected)
        for offset, size in reads:
            assert await text.read(offset, size) == expected[offset : offset + size]

    trio.run(main)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 5), max_size=4), st.data())
def test_runs_are_the_c_order_elements_in_contiguous_boxes(shape, data):
    """Against NumPy's C order: the boxes of a run hold its elements in order, at most two
    an axis, and each element's index is where NumPy's ravel puts it."""
    index = np.arange(np.prod(shape, dtype=int)).reshape(shape)
    start = data.draw(st.integers(0, index.size))
    stop = data.draw(st.integers(start, index.size))
    boxes = list(runs(tuple(shape), start, stop))
    parts = [index[tuple(slice(a, b) for a, b in box)] for box in boxes]
    assert [int(i) for part in parts for i in part.ravel()] == list(range(start, stop))
    assert len(boxes) <= max(1, 2 * len(shape))
    for box, part in zip(boxes, parts, strict=True):
        assert np.array_equal(flat_indices(box, tuple(shape)), part)


@pytest.fixture(scope="module")
def chunked(tmp_path_factory) -> str:
    """Arrays of strings chunked every way: 3-d in F order with chunks never written, in
    shards with inner chunks absent, 0-d, and wider than a chunk in both axes."""
    root = str(tmp_path_factory.mktemp("chunked") / "s.zarr")
    v2 = zarr.open_group(root + "/v2", mode="w", zarr_format=2)
    cube = v2.create_array("cube", shape=(5, 6, 7), chunks=(2, 4, 3), dtype=str, order="F")
    cube[1:4, 2:6, :5] = np.array([f"c{i}\\{i % 3}" for i in range(4 * 5 * 3)]).reshape(3, 4, 5)
    v2.create_array("scalar", shape=(), dtype=str)[...] = "one\nelement"
    v3 = zarr.open_group(root + "/v3", mode="w", zarr_format=3)
    shards = v3.create_array("shards", shape=(7, 9), chunks=(2, 2), shards=(4, 4), dtype=str)
    shards[:5, 1:] = np.array([f"s{i}\r" for i in range(5 * 8)]).reshape(5, 8)
    wide = v3.create_array("wide", shape=(3, 40), chunks=(2, 6), dtype=str)
    wide[...] = np.array([f"w{i}é" for i in range(120)]).reshape(3, 40)
    return root


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["v2/cube", "v2/scalar", "v3/shards", "v3/wide"]),
    st.integers(1, 9),
    st.lists(st.tuples(st.integers(0, 1500), st.integers(1, 400)), min_size=1, max_size=4),
)
def test_text_of_chunks_read_in_blocks_is_zarr_pythons_elements(chunked, path, block, reads):
    """Blocks of a few lines across chunks, shards and edges: every read is the text of
    zarr-python's elements, written by the README's rules."""
    group, name = path.split("/")
    values = zarr.open_array(f"{chunked}/{group}", path=name, mode="r")[...]
    expected = b"".join(map(escape, np.asarray(values).ravel()))
    options = MountOptions()
    options.apply("sidecars=text")
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(f"{chunked}/{group}"))
    fs = assemble(dialect, node, pipeline, options).fs

    async def main() -> None:
        ino = (await fs.lookup(1, name + ".txt")).ino  # listed: its text made and measured
        assert fs.getattr(ino).size == len(expected)
        fh = fs.open(ino, os.O_RDONLY)
        for offset, size in reads:
            assert bytes(await fs.read(fh, offset, size)) == expected[offset : offset + size]
        await fs.release(fh)

    with patch.object(text_module, "BLOCK", block):
        trio.run(main)
