"""A directory's entries, and what each came from, so that a reload keeps what did not
change: each entry's owner (the child of the group it shows, or whose sidecar it is) and
each child's description when listed."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Listing:
    entries: dict[str, int] = field(default_factory=dict)  # name -> inode
    owners: dict[str, str] = field(default_factory=dict)  # entry name -> child name
    keys: dict[str, str] = field(default_factory=dict)  # child name -> its description

    def put(self, name: str, owner: str, ino: int) -> None:
        self.entries[name] = ino
        self.owners[name] = owner

    def kept(self, keys: dict[str, str]) -> Listing:
        """The part of this listing whose children ``keys`` describes as before, without
        entries whose names a child now takes (a real node beats a sidecar)."""
        same = {c for c, key in self.keys.items() if keys.get(c) == key}
        names = [
            n for n, owner in self.owners.items() if owner in same and (n == owner or n not in keys)
        ]
        return Listing(
            {n: self.entries[n] for n in names},
            {n: self.owners[n] for n in names},
            {c: self.keys[c] for c in same},
        )
