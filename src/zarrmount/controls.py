"""Names of the mount's attributes that ask the daemon for something, shared by the
daemon and the commands that ask: these import nothing else (a command starts fast)."""

# read on a file or directory: its arrays fetched into the disk cache (zarrmount warm);
# read on the root, the progress of that
WARM_XATTR = "user.zarrmount.warm"
WARM_PROGRESS_XATTR = "user.zarrmount.warm_progress"
