"""How many decoding threads a mount starts: one per core this process may run on (a
container's or taskset's share), at least two."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zarrmount.array.decoders import Decoders

PROBE = "from zarrmount.array.decoders import usable_cores; print(usable_cores())"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux affinity")
def test_the_cores_counted_are_those_this_process_may_run_on():
    one = subprocess.run(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{0}}); {PROBE}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert one.stdout.strip() == "1"
    assert Decoders().threads == max(2, len(os.sched_getaffinity(0)))
    assert Decoders(5).threads == 5
