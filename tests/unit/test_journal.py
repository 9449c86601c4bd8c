"""The crash journal's files: entries framed so that damage is refused whole, segments
sealed and deleted, the lock, and a failed append leaving nothing behind."""

from __future__ import annotations

import errno
import io
import itertools
import os
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrmount import recovery
from zarrmount.journal import Entry, Journal, JournalError, Refused, scan
from zarrmount.journal.records import frame

entries = st.lists(
    st.tuples(
        st.text(max_size=20).filter(lambda s: "\x00" not in s),
        st.binary(min_size=0, max_size=200),
        st.integers(0, 2**40),
    ),
    min_size=1,
    max_size=6,
)


def _framed(items) -> tuple[bytes, list[tuple[str, int, bytes]]]:
    blob = b"".join(_frames(items))
    return blob, [(path, off, data) for path, data, off in items]


def _frames(items) -> list[bytes]:
    return [b"".join(frame(path, "<f4[3]", off, data)) for path, data, off in items]


def _found(blob: bytes) -> tuple[list[tuple[str, int, bytes]], list[Refused]]:
    got, refused = [], []
    for item in scan(io.BytesIO(blob), len(blob)):
        if isinstance(item, Entry):
            got.append((item.path, item.offset, bytes(item.data)))
            assert item.identity == "<f4[3]"
        else:
            refused.append(item)
    return got, refused


@given(entries)
def test_entries_read_back_in_order(items):
    blob, expected = _framed(items)
    assert _found(blob) == (expected, [])


@settings(max_examples=300)
@given(entries, st.data())
def test_a_cut_segment_gives_whole_entries_then_refuses_the_rest(items, data):
    """A daemon killed mid-append leaves a prefix: never part of an entry applied."""
    blob, expected = _framed(items)
    cut = data.draw(st.integers(0, len(blob) - 1))
    got, refused = _found(blob[:cut])
    assert got == expected[: len(got)]
    ends = itertools.accumulate((len(f) for f in _frames(items)), initial=0)
    if cut in set(ends):
        assert not refused
    else:
        assert len(refused) == 1 and refused[0].end == cut


@settings(max_examples=300)
@given(entries, st.data())
def test_a_flipped_bit_is_refused_never_applied(items, data):
    """Any one damaged bit: every entry read is one that was written, unchanged, and at
    least one is refused."""
    blob, expected = _framed(items)
    bit = data.draw(st.integers(0, len(blob) * 8 - 1))
    damaged = bytearray(blob)
    damaged[bit // 8] ^= 1 << (bit % 8)
    got, refused = _found(bytes(damaged))
    assert all(entry in expected for entry in got)
    assert refused and len(got) < len(expected)


def test_segments_seal_at_their_size_and_go_once_discarded(tmp_path):
    journal = Journal.open(tmp_path, "/some/store.zarr", segment_bytes=1000)
    full = []
    journal.on_full = lambda: full.append(True)
    for i in range(5):
        journal.append("a/b", "<f4[3]", i * 500, b"x" * 500)  # 537 bytes an entry
    assert len(journal.sealed) == 2 and full == [True, True]
    assert journal.entries == 5 and journal.written == 2500
    journal.discard(list(journal.sealed))
    left = sorted(p.name for p in journal.directory.iterdir())
    assert left == ["00000003.zj", "spare-1", "spare-2", "store"]  # emptied, to write again
    journal.close(stored=False)
    again = Journal.open(tmp_path, "/some/store.zarr")
    assert [p.name for p in again.pending] == ["00000003.zj"]  # spares are never replayed
    got, refused = _found(_entries(again, again.pending[0]))
    assert [off for _, off, _ in got] == [2000] and not refused
    again.append("a/b", "<f4[3]", 0, b"y")
    assert [p.name for p in again.directory.glob("*.zj")] == ["00000003.zj", "00000004.zj"]
    again.close(stored=True)
    assert not again.directory.exists()


def test_one_mount_at_a_time_uses_a_journal(tmp_path):
    first = Journal.open(tmp_path, "s3://bucket/x")
    with pytest.raises(JournalError, match="in use by another mount"):
        Journal.open(tmp_path, "s3://bucket/x")
    other = Journal.open(tmp_path, "s3://bucket/y")  # another store: another journal
    assert other.directory != first.directory
    first.close(stored=True)
    Journal.open(tmp_path, "s3://bucket/x").close(stored=True)
    other.close(stored=True)


def test_a_failed_append_leaves_no_part_of_its_entry(tmp_path, monkeypatch):
    journal = Journal.open(tmp_path, "/store")
    journal.append("a", "<f4[3]", 0, b"kept")
    real = os.pwritev

    def short(fd, parts, offset):
        real(fd, [parts[0][:7]], offset)  # a disk that filled up mid-entry
        return 7

    monkeypatch.setattr(os, "pwritev", short)
    with pytest.raises(OSError) as e:
        journal.append("a", "<f4[3]", 4, b"lost")
    assert e.value.errno == errno.ENOSPC
    monkeypatch.setattr(os, "pwritev", real)
    journal.close(stored=False)
    again = Journal.open(tmp_path, "/store")
    (segment,) = again.pending
    assert _found(_entries(again, segment)) == ([("a", 0, b"kept")], [])


def test_a_segment_that_cannot_be_emptied_keeps_those_after_it(tmp_path, monkeypatch):
    """Its disk read-only, a sealed segment stays with every later one (a replay applies
    them all, in order), and the next discard tries it again first."""
    journal = Journal.open(tmp_path, "/store", segment_bytes=100)
    for i in range(3):
        journal.append("a", "<f4[3]", i, b"x" * 100)  # each fills a segment
    first, second, third = journal.sealed
    real = Path.rename

    def read_only(self, target):
        if self == second:
            raise OSError(errno.EROFS, "Read-only file system")
        return real(self, target)

    monkeypatch.setattr(Path, "rename", read_only)
    assert not journal.discard([first, second, third])
    assert journal.sealed == [second, third] and second.exists() and third.exists()
    monkeypatch.setattr(Path, "rename", real)
    assert journal.discard(list(journal.sealed))
    assert not journal.sealed and not second.exists()
    journal.close(stored=True)


def test_a_spare_that_cannot_be_renewed_stays_a_spare(tmp_path, monkeypatch):
    """A full disk refuses the new segment's header: the append fails, no file is left
    open, and the spare is used by the next append."""
    journal = Journal.open(tmp_path, "/store", segment_bytes=100)
    journal.append("a", "<f4[3]", 0, b"x" * 100)
    journal.discard(list(journal.sealed))
    (spare,) = journal._spares
    real = os.pwrite

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(OSError):
        journal.append("a", "<f4[3]", 4, b"lost")
    assert journal._spares == [spare] and journal._fd is None
    monkeypatch.setattr(os, "pwrite", real)
    journal.append("a", "<f4[3]", 8, b"kept")
    assert not journal._spares and not spare.exists()
    journal.close(stored=False)
    again = Journal.open(tmp_path, "/store")
    (segment,) = again.pending
    assert _found(_entries(again, segment)) == ([("a", 8, b"kept")], [])
    again.close(stored=True)


def _entries(journal: Journal, segment) -> bytes:
    with open(segment, "rb") as f:
        end = journal.entries_in(segment, f)
        assert end is not None
        return f.read(end - f.tell())


def test_an_emptied_segment_written_again_shows_only_its_new_entries(tmp_path):
    """A spare's file still holds its earlier entries past the new ones: never replayed,
    nor is a spare whose renewal a kill cut short."""
    journal = Journal.open(tmp_path, "/store", segment_bytes=1 << 20)
    for i in range(20):
        journal.append("old", "<f4[3]", i, b"o" * 1000)
    journal.seal()
    journal.discard(list(journal.sealed))
    (spare,) = journal._spares
    size = spare.stat().st_size
    journal.append("new", "<f4[3]", 7, b"n" * 10)
    (segment,) = journal.directory.glob("*.zj")
    assert segment.stat().st_size == size  # the same file, written again from its start
    journal.close(stored=False)
    again = Journal.open(tmp_path, "/store")
    assert again.pending == [segment]
    assert _found(_entries(again, segment)) == ([("new", 7, b"n" * 10)], [])
    again.close(stored=True)
    assert not again.directory.exists()


def test_a_segment_of_the_first_format_is_entries_throughout(tmp_path):
    """A journal an earlier daemon left, before segments had headers, is replayed whole."""
    journal = Journal.open(tmp_path, "/store")
    old = journal.directory / "00000001.zj"
    old.write_bytes(b"".join(_frames([("a", b"old", 3)])))
    journal.close(stored=False)
    again = Journal.open(tmp_path, "/store")
    assert again.pending == [old]
    assert _found(_entries(again, old)) == ([("a", 3, b"old")], [])
    again.close(stored=True)


def _one_sealed(tmp_path):
    """A journal with one sealed segment holding one entry, and that segment."""
    journal = Journal.open(tmp_path, "/store")
    journal.append("a", "<f4[3]", 0, b"abc")
    journal.seal()
    (segment,) = journal.sealed
    return journal, segment


def test_a_damaged_segment_header_refuses_the_segment_whole(tmp_path):
    journal, segment = _one_sealed(tmp_path)
    content = bytearray(segment.read_bytes())
    content[10] ^= 1  # inside the header's count of entry bytes
    segment.write_bytes(bytes(content))
    with open(segment, "rb") as f:
        assert journal.entries_in(segment, f) is None
    assert trio.run(recovery._apply, journal, segment, None) == (0, 1)
    assert (journal.directory / f"refused-{segment.name}").exists()
    journal.close(stored=True)


def test_refused_bytes_are_kept_beside_the_segment(tmp_path):
    journal, segment = _one_sealed(tmp_path)
    size = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(b"torn")
    kept = journal.refuse(segment, [Refused(size, size + 4, "cut")])
    assert kept.read_bytes() == b"torn"
    journal.close(stored=True)
    assert kept.exists()  # refused entries keep the directory for a person to look at


def test_a_segment_larger_than_any_of_ours_is_set_aside_unread(tmp_path):
    """A hostile or foreign file of any size costs no memory: refused whole, kept."""
    journal = Journal.open(tmp_path, "/store", segment_bytes=1000)
    big = journal.directory / "00000001.zj"
    with open(big, "wb") as f:
        f.truncate(journal.largest + 1)  # sparse: no disk used
    assert trio.run(recovery._apply, journal, big, None) == (0, 1)
    assert not big.exists() and (journal.directory / "refused-00000001.zj").exists()
    journal.close(stored=True)
