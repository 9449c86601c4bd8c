"""The ``-o`` mount options, in the comma-separated form fstab and mount.fuse3 pass.

``OPTIONS`` is the one table of them: the parser, ``zarrmount --help`` and the test that
checks the README's table all read it, so the three cannot drift apart. Its options are
grouped by concern (``caching``, ``stores``, ``versioned``, ``writing``, ``views``,
``service``), put together in ``table``; ``MountOptions`` holds their values. Import from
here: the modules are how the package is kept, not its interface.
"""

from zarrmount.options.mount_options import MountOptions
from zarrmount.options.option import Option, Setter
from zarrmount.options.service import LOG_LEVELS
from zarrmount.options.stores import CLIENTS
from zarrmount.options.table import OPTIONS, PASSIVE, find_option, options_help
from zarrmount.options.values import OptionError, json_object, parse_size
from zarrmount.options.versioned import CONFLICTS
from zarrmount.options.views import BYTE_ORDERS, DEFAULT_SIDECARS, SIDECAR_KINDS, dataset_name

__all__ = [
    "BYTE_ORDERS",
    "CLIENTS",
    "CONFLICTS",
    "DEFAULT_SIDECARS",
    "LOG_LEVELS",
    "OPTIONS",
    "PASSIVE",
    "SIDECAR_KINDS",
    "MountOptions",
    "Option",
    "OptionError",
    "Setter",
    "dataset_name",
    "find_option",
    "json_object",
    "options_help",
    "parse_size",
]
