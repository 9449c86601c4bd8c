"""The ``zarrmount`` command's entry point. ``zarrmount warm`` and the errors every
subcommand may end with are handled here, so that ``warm`` starts without loading the
mount's machinery (codecs, NumPy, the stores: 0.2 s of imports a job of 0.5 s would wait
for)."""

from __future__ import annotations

import os
import sys

from zarrmount.errors import CommandError


def _run(argv: list[str]) -> int:
    if argv[:1] == ["warm"]:
        from zarrmount import warming

        return warming.run(argv[1:])
    from zarrmount import cli

    return cli.run(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(sys.argv[1:] if argv is None else argv)
    except CommandError as e:
        print(f"zarrmount: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # --inspect | head: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 1
    except KeyboardInterrupt:
        return 130
