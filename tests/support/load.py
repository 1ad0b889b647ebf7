"""How crowded the machine is, so that the suite's wall-clock limits hold on a loaded machine.

The tests give notebooks, nbgrader calls and book builds wall-clock limits sized on a quiet
2-core machine. Other processes (two busy loops, another build) stretch wall time without
changing the work, and a limit sized for quiet would fail a correct submission. So the
limits that a correct notebook must meet are multiplied by `slack()`, measured once per
session: one process per core spins for a fixed CPU time, and the ratio of wall time to CPU
time is how many runnable processes share each core. A quiet machine gives about 1 and
leaves the limits as written (the cases that wait for a limit, such as an infinite loop,
cost no more there); with two busy loops on 2 cores it gives about 2, and the limits triple.
The contention is measured once, when the suite starts (`measure_at_start`, from tests/conftest.py, before
any test runs; the test processes of `pytest -n` read the controller's figure from SPECLAB_CONTENTION): the
limits follow how crowded the machine was found, never what the suite itself does to it later. `make test`
starts no deliberate load; the audits that do (`make audit`) size their limits for it themselves.

Budgets that check a COST (seconds of grading per student) are CPU time, not wall time:
`cpu_of_children()` around the command measures it, whatever the load.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import resource
import statistics
import time

SPIN_CPU_S = 0.3  # CPU seconds each probe process spins
QUIET = 1.3  # contention below this is a quiet machine: slack 1
SAFETY = 1.5  # limits get this much more than the measured share on a loaded machine
MOST = 4.0  # slack never exceeds this (a stuck machine is a failure worth seeing)
ENV = "SPECLAB_CONTENTION"  # the figure measured at the start, handed to pytest-xdist's test processes
_at_start: float | None = None


def _spin(cpu_s: float, out) -> None:
    w0, c0 = time.perf_counter(), time.process_time()
    while time.process_time() - c0 < cpu_s:
        pass
    out.put(time.perf_counter() - w0)


def measure_at_start() -> float:
    """Measure the contention once (or take the figure the controlling process measured) and keep it."""
    global _at_start
    if _at_start is None:
        if os.environ.get(ENV):
            _at_start = float(os.environ[ENV])
        else:
            _at_start = _measure_contention()
            os.environ[ENV] = repr(_at_start)
    return _at_start


def contention() -> float:
    """Wall time / CPU time of one spinning process per core, median over the cores (>= 1), as measured when
    the suite started."""
    return measure_at_start()


def _measure_contention() -> float:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spin, args=(SPIN_CPU_S, out)) for _ in range(os.cpu_count() or 1)]
    for p in procs:
        p.start()
    walls = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    return max(1.0, statistics.median(walls) / SPIN_CPU_S)


def slack(busy_loops: int = 0) -> float:
    """The factor for wall-clock limits: 1 on a quiet machine, SAFETY x contention (at most MOST) else.
    busy_loops: outside busy loops the caller itself starts (an audit), on top of the contention found."""
    c = contention() + busy_loops / (os.cpu_count() or 1)
    return 1.0 if c < QUIET else min(MOST, SAFETY * c)


def scaled(seconds: float, busy_loops: int = 0) -> int:
    """A wall-clock limit sized on a quiet machine, for this machine as the suite found it (and the
    busy loops the caller starts)."""
    return int(round(seconds * slack(busy_loops)))


def cpu_of_children() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
