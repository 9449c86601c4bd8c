"""The objects of the file in its order: a group, its arrays (by name), then each of its
groups (by name) the same way; members HDF5 cannot hold are left out, with the reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from zarrmount.headers.hdf5.names import link_problem
from zarrmount.headers.hdf5.objects import array_problem
from zarrmount.headers.hdf5.tree import Array, Group

MAX_DEPTH = 100  # groups nested deeper are left out (readers recurse through the tree)


class Omission(NamedTuple):
    """Something the file leaves out: a member (``attribute`` None) or an attribute of the
    object at ``path``, and why."""

    path: str
    attribute: str | None
    why: str


@dataclass
class Planned:
    """An object of the file; a group's members (name, object index) sorted by name."""

    path: str
    node: Group | Array
    members: list[tuple[bytes, int]] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # members: (name, why)


def join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def walk(root: Group) -> tuple[list[Planned], list[Omission]]:
    """Every object of ``root``'s file in file order, and what is left out."""
    objects: list[Planned] = []
    omitted: list[Omission] = []

    def visit(group: Group, path: str, depth: int) -> int:
        index = len(objects)
        planned = Planned(path, group, left_out=list(group.left_out))
        objects.append(planned)
        members = kept_members(group, depth, planned.left_out)
        omitted.extend(Omission(join(path, n), None, why) for n, why in planned.left_out)
        for name, node in members:
            if isinstance(node, Array):
                planned.members.append((name, len(objects)))
                objects.append(Planned(join(path, node.name), node))
        for name, node in members:
            if isinstance(node, Group):
                planned.members.append((name, visit(node, join(path, node.name), depth + 1)))
        planned.members.sort()
        return index

    visit(root, "", 0)
    return objects, omitted


def kept_members(
    group: Group, depth: int, left_out: list[tuple[str, str]]
) -> list[tuple[bytes, Group | Array]]:
    """``group``'s members HDF5 holds, sorted by name; the others added to ``left_out``."""
    nodes: list[Group | Array] = [*group.arrays, *group.groups]
    seen = Counter(node.name for node in nodes)
    kept = []
    for node in nodes:
        why = link_problem(node.name)
        if not why and seen[node.name] > 1:
            why = "another member has the same name"
        if not why and isinstance(node, Array):
            why = array_problem(node)
        if not why and isinstance(node, Group) and depth >= MAX_DEPTH:
            why = f"groups are nested at most {MAX_DEPTH} deep"
        if why:
            left_out.append((node.name, why))
        else:
            kept.append((node.name.encode("utf-8"), node))
    return sorted(kept, key=lambda pair: pair[0])
