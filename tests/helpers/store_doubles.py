"""Test doubles of stores: the parts that tests of reads do not exercise."""

from __future__ import annotations

from zarrmount.store.base import Store


class ReadOnlyRemoteDouble(Store):
    """A remote store that only answers gets (subclasses say how); writes and listings
    are no-ops, and a range is cut from the whole value."""

    remote = True

    def get_range(self, key, start, length, *, deadline_s=None):
        return self.get(key, deadline_s=deadline_s)[start : start + length]

    def set(self, key, value):
        pass

    def delete(self, key):
        pass

    def list_dir(self, prefix):
        return []
