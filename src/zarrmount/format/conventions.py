"""Zarr conventions (0.1.0): UUID-keyed ``zarr_conventions_metadata`` in node attributes.

Conventions never change how data are stored, so a malformed block only yields
problems to report; it never hides a node.
"""

from __future__ import annotations

import uuid
from typing import Any

KEY = "zarr_conventions_metadata"
VERSION_KEY = "zarr_conventions_version"
_REQUIRED = {"version", "configuration"}
_ALLOWED = _REQUIRED | {"name", "schema", "spec", "description"}


def parse_conventions(attributes: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """The conventions a node declares (uuid, name, version each) and what is wrong with them.

    Returns ``None`` when the node declares no conventions at all.
    """
    if KEY not in attributes:
        return None, []
    block = attributes[KEY]
    problems = []
    if not isinstance(attributes.get(VERSION_KEY), str):
        problems.append(f"{VERSION_KEY} is missing or not a string")
    if not isinstance(block, dict):
        return [], [*problems, f"{KEY} is not an object"]
    found = []
    for key, entry in block.items():
        try:
            uuid.UUID(key)
        except (ValueError, TypeError):
            problems.append(f"convention key {key!r} is not a UUID")
            continue
        if not isinstance(entry, dict):
            problems.append(f"convention {key}: metadata is not an object")
            continue
        missing = _REQUIRED - set(entry)
        extra = set(entry) - _ALLOWED
        if missing:
            problems.append(f"convention {key}: missing {sorted(missing)}")
        if extra:
            problems.append(f"convention {key}: unknown fields {sorted(extra)}")
        if "configuration" in entry and not isinstance(entry["configuration"], dict):
            problems.append(f"convention {key}: configuration is not an object")
        found.append({"uuid": key, "name": entry.get("name"), "version": entry.get("version")})
    return found, problems
