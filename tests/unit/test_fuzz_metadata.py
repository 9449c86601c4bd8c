"""Fuzzing the metadata parsers and the codec pipelines (hypothesis, bounded for CI).

Whatever the bytes, parsing metadata either describes an array or raises the errors that
hide a node (MetadataError, CodecError); decoding a chunk either gives the chunk or raises
ChunkDecodeError. Any other exception would reach a FUSE handler as a crash. The valid
documents mutated here are zarr-python's own.
"""

from __future__ import annotations

import contextlib
import json

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrmount.codecs import ChunkDecodeError, CodecError, build_pipeline
from zarrmount.format import v2, v3
from zarrmount.format.model import MetadataError

HIDES = (MetadataError, CodecError)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _documents(tmp_path_factory) -> dict[str, dict]:
    """A valid .zarray and zarr.json of each kind, written by zarr-python."""
    root = tmp_path_factory.mktemp("fuzz")
    docs = {}
    for fmt, kwargs in (
        (2, {"compressors": numcodecs.Zstd()}),
        (3, {"shards": (8, 8)}),
        (3, {"compressors": zarr.codecs.BloscCodec()}),
    ):
        path = root / f"a{len(docs)}.zarr"
        zarr.create_array(
            path, shape=(16, 16), chunks=(4, 4), dtype="<i4", zarr_format=fmt, **kwargs
        )
        name = ".zarray" if fmt == 2 else "zarr.json"
        docs[f"{fmt}-{len(docs)}"] = json.loads((path / name).read_text())
    return docs


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    return _documents(tmp_path_factory)


def parse(doc: object) -> None:
    """Parse ``doc`` as the format it claims, and build its pipeline."""
    raw = json.dumps(doc).encode()
    fmt = doc.get("zarr_format") if isinstance(doc, dict) else 2
    meta = v3.parse_array("a", v3.parse_document(raw)) if fmt == 3 else v2.parse_array(raw, {})
    build_pipeline(meta)


@FUZZ
@given(doc=json_values)
def test_any_json_document_parses_or_hides(doc):
    with contextlib.suppress(*HIDES):
        parse(doc)


@FUZZ
@given(data=st.data())
def test_mutated_documents_parse_or_hide(documents, data):
    doc = json.loads(json.dumps(documents[data.draw(st.sampled_from(sorted(documents)))]))
    for _ in range(data.draw(st.integers(1, 3))):
        field = data.draw(st.sampled_from(sorted(doc)))
        doc[field] = data.draw(json_values)
    with contextlib.suppress(*HIDES):
        parse(doc)


@FUZZ
@given(raw=st.binary(max_size=64))
def test_any_bytes_as_metadata_parse_or_hide(raw):
    with contextlib.suppress(*HIDES):
        v2.parse_array(raw, {})
    with contextlib.suppress(*HIDES):
        v3.parse_array("a", v3.parse_document(raw))


@FUZZ
@given(data=st.data())
def test_any_stored_chunk_decodes_or_fails_cleanly(documents, data):
    """Random bytes, or a valid chunk with bytes flipped, as each pipeline's stored chunk."""
    name = data.draw(st.sampled_from(sorted(documents)))
    doc = documents[name]
    raw = json.dumps(doc).encode()
    meta = v2.parse_array(raw, {}) if doc["zarr_format"] == 2 else v3.parse_array("a", doc)
    pipeline = build_pipeline(meta)
    chunk = np.arange(np.prod(meta.chunks), dtype="<i4").reshape(meta.chunks)
    stored = bytearray(pipeline.encode(chunk))
    if data.draw(st.booleans()):
        stored = bytearray(data.draw(st.binary(max_size=len(stored) + 64)))
    for _ in range(data.draw(st.integers(0, 4))):
        if stored:
            stored[data.draw(st.integers(0, len(stored) - 1))] = data.draw(st.integers(0, 255))
    out = np.empty(meta.chunk_nbytes, dtype=np.uint8)
    try:
        got = pipeline.decode(bytes(stored), out)
    except ChunkDecodeError:
        return
    assert got.nbytes == meta.chunk_nbytes
