"""A student's program that leaves processes behind (double fork and setsid, and a setsid shell with a
cleared environment), each writing a heartbeat file in its folder; and the check, from outside, that
none of them is left writing once the sandbox has closed. Shared by every sandbox mode's tests."""
from __future__ import annotations

import time
from pathlib import Path

PROGRAM = """
import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c",
                  "import time\\nwhile True:\\n    open('beat', 'a').write('.')\\n    time.sleep(0.05)"], {})
    os._exit(0)
subprocess.Popen(["setsid", "sh", "-c", "while :; do echo x >> beat2; sleep 0.05; done"],
                 env={}, start_new_session=True)
time.sleep(0.5)
print("parent leaves")
"""


def assert_none_left_writing(scratch: Path, log: str) -> None:
    """Both heartbeats started, and neither grows any more."""
    beat, beat2 = scratch / "beat", scratch / "beat2"
    assert beat.exists() and beat2.exists(), log  # they did start
    sizes = beat.stat().st_size, beat2.stat().st_size
    time.sleep(1.0)
    assert (beat.stat().st_size, beat2.stat().st_size) == sizes, "a detached process is still writing"
