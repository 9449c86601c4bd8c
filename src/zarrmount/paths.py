"""Where the daemon keeps files of its own on local disk (journals, the disk cache)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """Root's under /var/cache, a user's under the XDG cache directory."""
    if os.getuid() == 0:
        return Path("/var/cache/zarrmount")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "zarrmount"
