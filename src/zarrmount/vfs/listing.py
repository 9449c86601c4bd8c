"""A directory's entries, and what each came from, so that a reload keeps what did not
change: each entry's owner (the child of the group it shows, or whose sidecar it is)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Listing:
    entries: dict[str, int] = field(default_factory=dict)  # name -> inode
    owners: dict[str, str] = field(default_factory=dict)  # entry name -> child name
    # arrays among the children that have no entry: name -> why (named by the views of
    # the whole group)
    unshown: dict[str, str] = field(default_factory=dict)

    def put(self, name: str, owner: str, ino: int) -> None:
        self.entries[name] = ino
        self.owners[name] = owner

    def kept(self, same: set[str], taken: set[str]) -> Listing:
        """The part of this listing owned by the children in ``same`` (unchanged), without
        entries whose names a child in ``taken`` now has (a real node beats a sidecar)."""
        names = [
            n
            for n, owner in self.owners.items()
            if owner in same and (n == owner or n not in taken)
        ]
        return Listing(
            {n: self.entries[n] for n in names},
            {n: self.owners[n] for n in names},
            {n: why for n, why in self.unshown.items() if n in same},
        )
