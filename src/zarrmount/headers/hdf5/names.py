"""Which names HDF5 refuses, and why: link names are path components compared as C
strings, attribute names C strings."""

from __future__ import annotations


def encoded(name: str) -> bytes | None:
    """``name`` in UTF-8, or None when it has characters UTF-8 cannot carry (surrogates)."""
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError:
        return None


def link_problem(name: str) -> str | None:
    """Why ``name`` cannot name a member of a group, or None."""
    if name in ("", "."):
        return "HDF5 refuses the name: it is empty or '.'"
    if "/" in name:
        return "HDF5 refuses the name: it contains '/'"
    return _text_problem(name)


def attribute_problem(name: str) -> str | None:
    """Why ``name`` cannot name an attribute, or None."""
    if not name:
        return "HDF5 refuses the name: it is empty"
    return _text_problem(name)


def _text_problem(name: str) -> str | None:
    if "\0" in name:
        return "HDF5 refuses the name: it contains a NUL character"
    if encoded(name) is None:
        return "HDF5 refuses the name: it is not Unicode text UTF-8 can carry"
    return None
