"""The clock a student's time limits count (autograder/inside/clock.py), with real processes.

Each test shares core 0 between the process measured and a busy process outside it, so that the
process measured waits for the core about half of the time; none depends on how fast the machine is,
only on the kernel sharing one core between two busy processes of equal weight (their own sessions:
with autogroup scheduling each is a group of its own).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.inside import clock

REPO = Path(__file__).resolve().parents[3]


def _busy_on_core0() -> subprocess.Popen:
    """A busy loop on core 0, in a session of its own."""
    return subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {0})\nwhile True: pass"],
                            start_new_session=True)


def _on_core0(body: str, timeout: float = 60) -> str:
    """Run body (Python) pinned to core 0 in a session of its own; its last printed line."""
    code = "import os, sys, time\nos.sched_setaffinity(0, {0})\nsys.path.insert(0, %r)\n" % str(REPO) + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                         start_new_session=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture
def competitor():
    p = _busy_on_core0()
    time.sleep(0.3)
    yield p
    p.kill()
    p.wait()


def test_waiting_for_the_core_is_not_counted(competitor):
    """A busy process that shares its core with another: its clock is the wall time less the time the
    kernel reports it waited for the core (about half; a wall clock would count it all)."""
    line = _on_core0("""
        from autograder.inside.clock import process_clock
        def waited(): return int(open("/proc/self/schedstat").read().split()[1]) / 1e9
        c = process_clock(); t = time.monotonic(); w = waited()
        while time.monotonic() - t < 3: pass
        wall = time.monotonic() - t
        print(c.now() / wall, (waited() - w) / wall)
    """)
    own, waited = map(float, line.split())
    assert waited >= 0.2, waited  # it did wait for the core
    assert abs(own - (1 - waited)) <= 0.1, (own, waited)


def test_sleeping_is_counted_at_wall_speed(competitor):
    """A process that sleeps (a stalling notebook) waits for no core while it sleeps: its clock counts
    the whole sleep, and discounts only the time the kernel reports it waited for the core on waking
    (how long that is depends on the machine's load, so the test compares with the kernel's count)."""
    line = _on_core0("""
        from autograder.inside.clock import process_clock
        def waited(): return int(open("/proc/self/schedstat").read().split()[1]) / 1e9
        c = process_clock(); t = time.monotonic(); w = waited()
        time.sleep(2)
        own = c.now()
        print(own, time.monotonic() - t, waited() - w)
    """)
    own, wall, waited = map(float, line.split())
    assert own >= 2.0 - 0.02, own  # the sleep itself is counted in full
    assert abs(own - (wall - waited)) <= 0.1, (own, wall, waited)


def test_a_cell_limit_counts_the_cells_own_time(competitor):
    """cell_timer(1 s) stops a busy cell after about 2 s of wall time when it gets half a core, and a
    sleeping cell after 1 s."""
    line = _on_core0("""
        from autograder.inside.protect import CellTimeout, cell_timer
        out = []
        for busy in (True, False):
            t = time.monotonic()
            try:
                with cell_timer(1.0):
                    while busy and time.monotonic() - t < 30:
                        pass
                    time.sleep(30)  # one wake-up only: the alarm's
            except CellTimeout:
                out.append(time.monotonic() - t)
        print(*out)
    """)
    busy_s, sleeping_s = map(float, line.split())
    assert 1.5 <= busy_s <= 1 + clock.STRETCH + 0.3  # at most (1 + STRETCH) x 1 s of wall time, and a little lateness
    assert 0.95 <= sleeping_s <= 1.5


def test_a_limit_ends_by_its_wall_time_however_long_the_waiting(tmp_path):
    """Threads that (by their counters) always wait never use up a limit's own time, but the limit
    still ends at (1 + STRETCH) times its length in wall time."""
    stat = tmp_path / "schedstat"
    stat.write_text("0 0 0")
    c = clock.OwnClock(free=lambda: [str(stat)])
    limit = c.limit(0.5)
    t = time.monotonic()
    while limit.left() > 0:
        waited = int((time.monotonic() - t) * 1e9) + 10**9  # more waiting than wall time, always
        stat.write_text(f"0 {waited} 0")
        time.sleep(0.02)
    assert (1 + clock.STRETCH) * 0.5 <= time.monotonic() - t <= (1 + clock.STRETCH) * 0.5 + 0.2
    assert c.now() < 0.2  # the waiting itself was discounted


def test_without_counters_the_clock_is_the_wall_clock():
    c = clock.wall_clock()
    t = time.monotonic()
    time.sleep(0.3)
    assert c.now() == pytest.approx(time.monotonic() - t, abs=0.05)
