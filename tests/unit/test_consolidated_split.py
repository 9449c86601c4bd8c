"""Consolidated metadata read a node's document at a time (``format/consolidated.py``),
over a window of the stored document (``format/windowed.py``): whatever the text, and
wherever the window's edges fall (inside a number, an escape, a character of several
bytes), the document and its members put back together are what the standard library's
:func:`json.loads` makes of the whole, and where it refuses the text, so does the split
(MetadataError, as for any document, with json.loads's words)."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from zarrmount.format import consolidated
from zarrmount.format.consolidated import split
from zarrmount.format.jsondoc import MAX_DEPTH, load_json
from zarrmount.format.model import MetadataError
from zarrmount.format.windowed import STEP, Stored, held

PATH = ("consolidated_metadata", "metadata")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
keys = st.sampled_from(["a", "g/a", "/a", "a/", "consolidated_metadata", "metadata", "é"])
documents = st.fixed_dictionaries(
    {
        "consolidated_metadata": st.fixed_dictionaries(
            {"metadata": st.dictionaries(keys | st.text(max_size=6), json_values, max_size=6)},
            optional={"kind": st.just("inline"), "must_understand": st.just(False)},
        )
        | json_values
    },
    optional={"attributes": json_values, "zarr_format": st.just(3)},
)
# written compact, as json.dumps writes by default, or pretty-printed; characters past
# ASCII escaped or as they are
layouts = st.builds(
    dict,
    st.sampled_from([{"separators": (",", ":")}, {}, {"indent": 2}, {"indent": "\t"}]),
    ensure_ascii=st.booleans(),
)
# bytes read at a time: a few (edges everywhere), or as the daemon reads
steps = st.integers(4, 40) | st.just(STEP)


def _split(text: str, step: int = STEP, encoding: str = "utf-8") -> tuple[Any, Any]:
    return split(held(text.encode(encoding)), "zarr.json", PATH, step)


def _whole(doc: Any, members: dict[str, str] | None) -> Any:
    """The document with the split members put back where they came from."""
    if members is not None:
        doc = json.loads(json.dumps(doc))
        doc[PATH[0]][PATH[1]] = {key: json.loads(text) for key, text in members.items()}
    return doc


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a) == json.dumps(b)  # NaN equals itself here; key order counts


@settings(max_examples=300, deadline=None)
@given(doc=documents, layout=layouts, step=steps)
def test_split_puts_back_together_as_json_loads_reads_the_whole(doc, layout, step):
    text = json.dumps(doc, **layout)
    got, members = _split(text, step)
    assert _same(_whole(got, members), json.loads(text))
    block = json.loads(text)[PATH[0]]
    assert (members is None) == (
        not isinstance(block, dict) or not isinstance(block.get(PATH[1]), dict)
    )
    if members is not None:
        assert got[PATH[0]][PATH[1]] == {}
        assert all("\n" not in text for text in members.values())  # no indentation kept


@pytest.mark.parametrize(
    "text",
    [
        '{"consolidated_metadata": {"metadata": {"a": {"x": 1}, "a": {"y": 2}}}}',
        '{"consolidated_metadata": {"metadata": {"a": {}}}, "consolidated_metadata": 7}',
        '{"consolidated_metadata": 7, "consolidated_metadata": {"metadata": {"a": {}}}}',
        '{"consolidated_metadata": {"metadata": {"a": {}}, "metadata": {"b": []}}}',
        '{"consolidated_metadata": {"metadata": [{"a": 1}]}}',
        ' \n{ "consolidated_metadata" :{"metadata":{ } } }\t',
        '{"consolidated_metadata": {"metadata": {"\\u00e9\\ud800": {"n": NaN}}}}',
        "[]",
    ],
)
@pytest.mark.parametrize("step", [4, 5, 7, STEP])
def test_keys_given_twice_and_other_shapes_read_as_json_loads_reads_them(text, step):
    assert _same(_whole(*_split(text, step)), json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"consolidated_metadata": {"metadata": {"a": {}},}}',
        '{"consolidated_metadata": {"metadata": {"a" {}}}}',
        '{"consolidated_metadata": {"metadata": {"a": {}}}} {}',
        '{"consolidated_metadata": {"metadata": {"a": {}} "kind": 1}}',
        '{"consolidated_metadata": {"metadata": {"a": {"b": "\x01"}}}}',
        '{"consolidated_metadata": {"metadata": {a: {}}}}',
        '{"consolidated_metadata": {"metadata": {"a": }}}',
    ],
)
@pytest.mark.parametrize("step", [4, 6, STEP])
def test_what_json_loads_refuses_is_refused(text, step):
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(MetadataError, match="zarr.json is not valid JSON"):
        _split(text, step)


@pytest.mark.parametrize("levels", [MAX_DEPTH - 3, MAX_DEPTH - 2, 100_000])
def test_a_member_nests_no_deeper_than_any_document(levels):
    """A member is 4 levels down (below the root's object, the block, the metadata
    object): the whole document nests ``levels + 3`` deep, refused past MAX_DEPTH as
    :func:`load_json` refuses it."""
    text = '{"consolidated_metadata": {"metadata": {"a": %s}}}' % ("[" * levels + "]" * levels)
    if levels + 3 <= MAX_DEPTH:
        assert _same(_whole(*_split(text)), load_json(text, "zarr.json"))
    else:
        with pytest.raises(MetadataError, match="nests deeper"):
            _split(text)
        with pytest.raises(MetadataError, match="nests deeper"):
            load_json(text, "zarr.json")


@pytest.mark.parametrize("step", [4, 5, 7, STEP])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32-be"])
def test_text_is_decoded_as_json_loads_decodes_bytes(encoding, step):
    text = '{"attributes": {"name": "é漢😀"}, "consolidated_metadata": {"metadata": {"é": {}}}}'
    raw = text.encode(encoding)
    assert _same(_whole(*_split(text, step, encoding)), json.loads(raw))


@settings(max_examples=300, deadline=None)
@given(doc=documents, layout=layouts, step=steps, data=st.data())
def test_a_broken_document_is_refused_in_json_loads_words(doc, layout, step, data):
    """A document cut short, or with a character put in anywhere (inside a key, a number,
    an escape, at a window's edge): refused where json.loads refuses it, with its words
    and position in the whole; read as it reads it where it still reads it."""
    text = json.dumps(doc, **layout)
    at = data.draw(st.integers(0, len(text)))
    put = data.draw(st.sampled_from(["", *',:{}[]"\\x1 \n']))
    broken = text[:at] + put + (text[at:] if put else "")
    try:
        expected = json.loads(broken)
    except json.JSONDecodeError as e:
        # Python 3.13 names a trailing comma; the objects split name what they expected
        assume(not e.msg.startswith("Illegal trailing comma"))
        with pytest.raises(MetadataError) as refused:
            _split(broken, step)
        assert str(refused.value) == f"zarr.json is not valid JSON: {e}"
    else:
        assert _same(_whole(*_split(broken, step)), expected)


# -- limits: what hostile documents may take --------------------------------------------


def _never_read(at: int, length: int) -> bytes:
    raise AssertionError("read")


def test_a_document_over_the_size_limit_is_refused_before_it_is_read():
    stored = Stored(consolidated.MAX_SPLIT_BYTES + 1, _never_read)
    with pytest.raises(MetadataError, match=r"zarr.json has \d+ bytes, more than \d+ allowed"):
        split(stored, "zarr.json", PATH)


@pytest.mark.parametrize("where", ["attributes", "member"])
def test_a_value_longer_than_any_document_may_be_is_refused(monkeypatch, where):
    monkeypatch.setattr(consolidated, "MAX_BYTES", 1000)
    value = {"pad": "x" * 2000}
    doc = {"attributes": value} if where == "attributes" else {PATH[0]: {PATH[1]: {"a": value}}}
    with pytest.raises(MetadataError, match="zarr.json has a value longer than 1000 characters"):
        _split(json.dumps(doc), step=64)


def test_the_document_beside_the_members_is_bounded_as_any_document(monkeypatch):
    monkeypatch.setattr(consolidated, "MAX_BYTES", 1000)
    doc = {f"k{i}": "x" * 50 for i in range(40)}  # each value short, 2,000 together
    with pytest.raises(MetadataError, match="more than 1000 characters beside"):
        _split(json.dumps(doc), step=64)


def _endless_members(at: int, length: int) -> bytes:
    """A document of members ``"k000000001":{},`` without end, made as it is read."""
    head = b'{"zarr_format": 3, "consolidated_metadata": {"metadata": {'
    first = max(at - len(head), 0) // 16  # the member ``at`` falls in
    start = len(head) + 16 * first if first else 0  # where ``made`` starts
    count = (at - start + length) // 16 + 1
    made = b"".join(b'"k%09d":{},' % n for n in range(first, first + count))
    made = made if first else head + made
    return made[at - start : at - start + length]


def test_members_past_the_kept_limit_fail_holding_no_more(monkeypatch):
    """A bomb: a document of more members than may be kept is refused once they take the
    limit, and reading it took little more than that."""
    monkeypatch.setattr(consolidated, "MAX_KEPT", 4 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(MetadataError, match="consolidated metadata takes more than 4 MiB"):
            bomb = Stored(consolidated.MAX_SPLIT_BYTES, _endless_members)
            split(bomb, "zarr.json", PATH, step=64 << 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (4 << 20) + (1 << 20), f"{peak / (1 << 20):.1f} MiB"
