"""Event counters of a part (store requests, cache lookups), for the mount's statistics."""

from __future__ import annotations


class Counters:
    """Named counters starting at zero; subclasses list them in ``names``."""

    __slots__ = ()
    names: tuple[str, ...] = ()

    def __init__(self) -> None:
        for name in self.names:
            setattr(self, name, 0)

    def as_dict(self, prefix: str) -> dict[str, int]:
        return {prefix + name: getattr(self, name) for name in self.names}
