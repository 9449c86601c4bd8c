"""Consolidated metadata read a node's document at a time (``format/consolidated.py``):
whatever the text, the document and its members put back together are what the standard
library's :func:`json.loads` makes of the whole, and where it refuses the text, so does
the split (MetadataError, as for any document)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrmount.format.consolidated import split
from zarrmount.format.jsondoc import MAX_DEPTH, json_text, load_json
from zarrmount.format.model import MetadataError

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
# written compact, as json.dumps writes by default, or pretty-printed
layouts = st.sampled_from([{"separators": (",", ":")}, {}, {"indent": 2}, {"indent": "\t"}])


def _whole(doc: Any, members: dict[str, str] | None) -> Any:
    """The document with the split members put back where they came from."""
    if members is not None:
        doc = json.loads(json.dumps(doc))
        doc[PATH[0]][PATH[1]] = {key: json.loads(text) for key, text in members.items()}
    return doc


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a) == json.dumps(b)  # NaN equals itself here; key order counts


@settings(max_examples=300, deadline=None)
@given(doc=documents, layout=layouts)
def test_split_puts_back_together_as_json_loads_reads_the_whole(doc, layout):
    text = json.dumps(doc, **layout)
    got, members = split(text, "zarr.json", PATH)
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
def test_keys_given_twice_and_other_shapes_read_as_json_loads_reads_them(text):
    assert _same(_whole(*split(text, "zarr.json", PATH)), json.loads(text))


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
def test_what_json_loads_refuses_is_refused(text):
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(MetadataError, match="zarr.json is not valid JSON"):
        split(text, "zarr.json", PATH)


@pytest.mark.parametrize("levels", [MAX_DEPTH - 3, MAX_DEPTH - 2, 100_000])
def test_a_member_nests_no_deeper_than_any_document(levels):
    """A member is 4 levels down (below the root's object, the block, the metadata
    object): the whole document nests ``levels + 3`` deep, refused past MAX_DEPTH as
    :func:`load_json` refuses it."""
    text = '{"consolidated_metadata": {"metadata": {"a": %s}}}' % ("[" * levels + "]" * levels)
    if levels + 3 <= MAX_DEPTH:
        assert _same(_whole(*split(text, "zarr.json", PATH)), load_json(text, "zarr.json"))
    else:
        with pytest.raises(MetadataError, match="nests deeper"):
            split(text, "zarr.json", PATH)
        with pytest.raises(MetadataError, match="nests deeper"):
            load_json(text, "zarr.json")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32-be"])
def test_text_is_decoded_as_json_loads_decodes_bytes(encoding):
    raw = '{"attributes": {"name": "é漢"}}'.encode(encoding)
    assert json.loads(json_text(raw, "zarr.json")) == json.loads(raw)
