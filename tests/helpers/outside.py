"""Checks that a mount serves nothing from outside its store root."""

from __future__ import annotations

import os

from helpers.oracle import read_file


def assert_nothing_outside_served(mnt: str, marker: bytes, skip: set[str] = frozenset()) -> None:
    """No file below ``mnt`` holds ``marker`` (the bytes put outside the store). Files in
    ``skip`` (paths relative to ``mnt``: those expected to fail with EIO) are not read."""
    for dirpath, _dirs, files in os.walk(mnt):
        for f in files:
            path = os.path.join(dirpath, f)
            if os.path.relpath(path, mnt) not in skip:
                assert marker not in read_file(path), path
