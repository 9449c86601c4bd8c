"""The obstore client's store (``-o client=obstore``) over obstore's in-memory store, the
translation of fsspec-style options, and how its errors are told apart for retries.
The S3 behaviour through a real mount is in tests/integration/test_obstore_client.py."""

from __future__ import annotations

import obstore
import pytest
from obstore.exceptions import GenericError, InvalidPathError, PermissionDeniedError

from zarrmount.store import StoreError, open_store
from zarrmount.store.objstore import Failure, ObstoreStore, _config
from zarrmount.store.retry import is_transient


@pytest.fixture
def store() -> ObstoreStore:
    s = ObstoreStore("memory:///")
    obstore.put(s.objects, "g/a/c/0", b"0123456789")
    obstore.put(s.objects, "g/a/zarr.json", b"{}")
    obstore.put(s.objects, "g/zarr.json", b"{}")
    return s


def test_values_ranges_and_suffixes(store):
    assert store.get("g/a/c/0") == b"0123456789"
    assert bytes(store.get_buffer("g/a/c/0")) == b"0123456789"
    assert store.get_range("g/a/c/0", 2, 3) == b"234"
    assert store.get_range("g/a/c/0", -4, 2) == b"67"  # from the end, as the index of a shard
    assert store.get("g/a/c/1") is None
    assert store.get_range("g/a/c/1", 0, 4) is None


def test_listings_carry_validators_that_change_with_the_object(store):
    assert store.list_dir("g") == ["a", "zarr.json"]
    level = store.list_validated("g")
    assert level["a"] == "" and level["zarr.json"].endswith(":2")
    tree = store.list_tree("g/a")
    assert set(tree) == {"c/0", "zarr.json"}
    before = store.validator("g/a/c/0")
    assert before == tree["c/0"]
    obstore.put(store.objects, "g/a/c/0", b"changed!!!")
    assert store.validator("g/a/c/0") != before
    assert store.validator("g/a/c/9") is None
    assert store.root_exists()


def test_keys_leaving_the_root_are_refused(store):
    with pytest.raises(StoreError, match="leave the store root"):
        store.get("g/../../etc/passwd")


def test_it_never_writes(store):
    assert store.read_only_reason
    with pytest.raises(StoreError, match="read-only"):
        store.set("g/a/c/0", b"x")
    with pytest.raises(StoreError, match="read-only"):
        store.delete("g/a/c/0")


def test_fsspec_names_of_options_are_translated():
    config, client = _config("s3://b/p", {"endpoint_url": "http://127.0.0.1:9", "anon": True})
    assert config == {"endpoint": "http://127.0.0.1:9", "skip_signature": True}
    assert client == {"allow_http": True}
    assert _config("http://host/x.zarr", {}) == ({}, {"allow_http": True})
    assert _config("https://host/x.zarr", {}) == ({}, {"allow_http": False})
    assert _config("s3://b", {"region_name": "eu-west-1"})[0] == {"region": "eu-west-1"}


CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5;"
    "BlobEndpoint=http://127.0.0.1:10000/acct;"
)
FROM_CONNECTION = {
    "account_name": "acct",
    "account_key": "a2V5",
    "endpoint": "http://127.0.0.1:10000/acct",
}


def test_an_azure_connection_string_is_taken_apart_from_the_option_or_the_environment():
    config, client = _config("az://c/p", {"connection_string": CONNECTION}, environ={})
    assert config == FROM_CONNECTION and client == {"allow_http": True}
    environ = {"AZURE_STORAGE_CONNECTION_STRING": CONNECTION}
    assert _config("abfs://c/p", {}, environ)[0] == FROM_CONNECTION
    # an account named in the options wins over the environment's string
    named = _config("az://c/p", {"account_name": "other"}, environ)[0]
    assert named == {"account_name": "other"}


def test_suffix_ranges_where_the_store_has_none(store):
    store.suffix_ranges = False  # Azure: the size first (a HEAD), then the range
    assert store.get_range("g/a/c/0", -4, 2) == b"67"
    assert store.get_range("g/a/c/0", -40, 3) == b"012"
    assert store.get_range("g/a/c/1", -4, 2) is None


def test_unknown_options_fail_the_open_naming_the_key():
    with pytest.raises(StoreError, match="no_such_key"):
        ObstoreStore("s3://bucket/x", no_such_key="1")


def test_only_object_store_urls_take_the_client(tmp_path):
    assert isinstance(open_store("s3://bucket/x", {}, 5, client="obstore"), ObstoreStore)
    assert not isinstance(open_store("memory://x", {}, 5, client="obstore"), ObstoreStore)
    assert not isinstance(open_store(str(tmp_path), {}, 5, client="obstore"), ObstoreStore)


@pytest.mark.parametrize(
    "error,transient,line",
    [
        (
            GenericError(
                "GET in 4ms - Server returned non-2xx status code: 503 Service "
                "Unavailable: <?xml?>\n<Error><Code>SlowDown</Code></Error>\n\n"
                "Debug source:\nGeneric {\n}"
            ),
            True,
            "GenericError: HTTP 503 (SlowDown)",
        ),
        (GenericError("status code: 501 Not Implemented"), False, "GenericError: HTTP 501"),
        (
            PermissionDeniedError("denied\n\nDebug source:\n{}"),
            False,
            "PermissionDeniedError: denied",
        ),
        (InvalidPathError("bad path"), False, "InvalidPathError: bad path"),
        (
            GenericError("error sending request\n  for url"),
            True,
            "GenericError: error sending request for url",
        ),
    ],
)
def test_failures_are_one_line_and_retried_only_when_a_second_try_may_work(error, transient, line):
    failure = Failure(error)
    assert str(failure) == line
    assert is_transient(failure) is transient
