"""The crash journal: acknowledged writes kept on local disk until they are stored."""

from zarrmount.journal.records import Entry, Refused, identity, scan
from zarrmount.journal.segments import Journal, JournalError, default_root

__all__ = ["Entry", "Journal", "JournalError", "Refused", "default_root", "identity", "scan"]
