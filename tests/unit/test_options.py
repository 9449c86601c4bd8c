"""One table of ``-o`` options: the parser, ``zarrmount --help`` and the README agree."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers.mounting import zarrmount_exe

from zarrmount.options import OPTIONS, PASSIVE, MountOptions, OptionError

README = Path(__file__).resolve().parents[2] / "README.md"
# so_json=FILE reads its file when parsed: one for the module
SO_JSON = Path(tempfile.mkdtemp(prefix="zarrmount-options-")) / "so.json"
SO_JSON.write_text('{"anon": true, "client_kwargs": {"region_name": "a,b"}}')
# A value for each placeholder that the option's parser must accept.
SAMPLES = {
    "FILE": str(SO_JSON),
    "DIR": "/var/tmp/journals",
    "ADDR:PORT": "127.0.0.1:9109",
    "SPEC": "error@0.5:c/0/",
    "SIZE": "48M",
    "SECONDS": "2.5",
    "N": "7",
    "OCT": "027",
    "PATH": "/tmp/z.log",
    "VALUE": "true",
    "LIST": "envi+npy",
    "ORDER": "big",
    "LEVEL": "debug",
    "NAME": "obstore",
    "ID": "G1DQ1P2CM80Y66BR4FTG",
    "TIME": "2026-10-01T12:00:00",
    "TEXT": "nightly run",
    "CHOICE": "ours",
    "PREFIX": "s3://archive/netcdf/",
}


def test_one_version_is_picked_and_as_of_goes_with_a_branch():
    options = MountOptions()
    options.apply("branch=dev,as_of=2026-10-01T12:00:00+02:00")
    assert options.version == {"branch": "dev", "as_of": "2026-10-01T12:00:00+02:00"}
    for text in ("branch=a,tag=b", "tag=v1,snapshot=X", "tag=v1,as_of=2026-01-01", "as_of=soon"):
        with pytest.raises(OptionError):
            MountOptions().apply(text)


def readme_options() -> set[str]:
    """The first column of the README's option table: every ``usage`` in backquotes."""
    text = README.read_text()
    table = text[text.index("| option | meaning |") :].split("\n\n", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines()[2:]]
    return {u for row in rows for u in re.findall(r"`([^`]+)`", row)}


def test_readme_table_lists_every_option_and_no_other():
    assert readme_options() == {o.usage for o in OPTIONS}


def test_help_lists_every_option():
    out = subprocess.run([zarrmount_exe(), "--help"], capture_output=True, text=True, check=True)
    listed = re.findall(r"^  (\S+) ", out.stdout, re.MULTILINE)
    assert {o.usage for o in OPTIONS} <= set(listed), out.stdout
    for name in PASSIVE:
        assert name in out.stdout


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_every_listed_option_parses(option):
    name, _, placeholder = option.usage.partition("=")
    text = name.replace("KEY", "anon") + ("=" + SAMPLES[placeholder] if placeholder else "")
    options = MountOptions()
    options.apply(text)
    assert options != MountOptions() or text == "ro"  # it changed something (ro: the default)
    if placeholder:
        with pytest.raises(OptionError, match=name.split(".")[0]):
            MountOptions().apply(name.replace("KEY", "anon") + "=")
    else:
        with pytest.raises(OptionError, match="takes no value"):
            MountOptions().apply(text + "=1")


def test_options_mount_adds_are_ignored_and_others_refused():
    options = MountOptions()
    options.apply("defaults,nofail,_netdev,x-systemd.requires=network-online.target,noatime")
    assert options == MountOptions()
    with pytest.raises(OptionError, match="frobnicate"):
        options.apply("ro,frobnicate=1")


def test_sidecar_kinds_join_with_plus_and_none_clears_them():
    options = MountOptions()
    options.apply("sidecars=tiff+npy+tiff")
    assert options.sidecars == ["tiff", "npy"]
    options.apply("sidecars=none")
    assert options.sidecars == []
    with pytest.raises(OptionError, match="unknown kind 'gif'"):
        options.apply("sidecars=envi+gif")


def test_every_sidecar_kind_the_option_accepts_is_a_sidecar():
    from zarrmount.options import SIDECAR_KINDS
    from zarrmount.vfs.sidecars import SIDECARS

    # text files are made by the inode table (they need the array decoded), and netCDF
    # and HDF5 files by it too (one per group, of its arrays), not SIDECARS
    assert list(SIDECAR_KINDS) == [*SIDECARS, "netcdf", "hdf5", "text"]


def test_default_sidecars_are_envi_headers_and_text():
    assert MountOptions().sidecars == ["envi", "text"]
