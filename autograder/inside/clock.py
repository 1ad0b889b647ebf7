"""A grading's own clock: wall time less the time its threads were ready to run but waited for a core.

A cell or notebook limit counts this clock, not the wall clock, so that a machine busy with other work
(outside processes, a classmate graded beside) does not take a correct notebook's points: a notebook
that needs 250 s of CPU gets them even when it gets a third of a core. What the clock counts:

- the time any thread counted was running, sleeping or waiting for input (its own choice), at wall speed;
- not the time the kernel kept a runnable thread off the CPU (`run_delay`, the second field of
  `/proc/TID/schedstat`, summed over the threads counted), and only so much of it as the quota left
  unused: over each look, the discount is at most `wall - run / quota`, where `run` is the CPU time the
  quota-bound threads got and `quota` their CPU quota in cores. Throttling at the quota counts as waiting
  in `run_delay`, so without that bound a student could stretch its own limits by running more threads
  than its quota; with it, a group that uses its whole quota gets no discount.

A limit of L seconds ends at L seconds of this clock, and at (1 + stretch) L seconds of wall time at the
latest (stretch: STRETCH unless the limit is given another), however busy the machine: a notebook that is
slow because the machine is overloaded is still stopped, later. Threads that end between two looks take
their last waiting with them (the clock then counts a little more than it should, never less). Where
`/proc/TID/schedstat` cannot be read the clock is the wall clock.

This module runs on both sides: in the sandbox (the harness's cell timer, counting its own process's
threads) and in the grader (the limits it waits for a harness or a sandbox under, counting the threads
of the student's control group and its own). It imports nothing but the standard library.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Iterable

STRETCH = 2.0  # a limit of L s ends by (1 + STRETCH) L s of wall time, however long the threads waited
LOOK_S = 1.0  # the longest a waiting loop goes without a look at the threads' counters


def _counters(tid_paths: Iterable[str]) -> dict[str, tuple[int, int]]:
    """path -> (ns running, ns runnable but waiting) of each thread that could be read."""
    out: dict[str, tuple[int, int]] = {}
    for path in tid_paths:
        try:
            with open(path, "rb") as f:
                run, wait = f.read().split()[:2]
            out[path] = (int(run), int(wait))
        except (OSError, ValueError):
            continue
    return out


def own_threads() -> list[str]:
    """The schedstat files of this process's threads."""
    try:
        return [f"/proc/self/task/{t}/schedstat" for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


def tasks_of(files: Iterable) -> Callable[[], list[str]]:
    """The threads listed in control-group files (v1 `tasks`, v2 `cgroup.threads`), as schedstat files."""
    files = list(files)

    def threads() -> list[str]:
        tids: set[str] = set()
        for f in files:
            try:
                with open(f) as fh:
                    tids.update(fh.read().split())
            except OSError:
                continue
        return [f"/proc/{t}/schedstat" for t in tids]
    return threads


class Limit:
    """L seconds of a clock, from now (and (1 + stretch) L of wall time at most). The grader passes its
    run's stretch (Config.stretch: 0 where one submission has the machine to itself, as on Gradescope);
    code in the sandbox keeps STRETCH."""

    def __init__(self, clock: "OwnClock", seconds: float, stretch: float = STRETCH):
        self.clock, self.seconds = clock, seconds
        self.start, self.wall_end = clock.now(), time.monotonic() + (1 + stretch) * seconds

    def left(self) -> float:
        """Seconds of the clock left (0 once over); looks at the threads' counters."""
        if self.seconds == float("inf"):
            return float("inf")
        return max(0.0, min(self.start + self.seconds - self.clock.now(), self.wall_end - time.monotonic()))


class OwnClock:
    """The clock of the threads `bound()` (under a CPU quota of `quota` cores) and `free()` (no quota):
    wall time since it was made, less the time they waited for a core (module docstring)."""

    def __init__(self, bound: Callable[[], list[str]] = lambda: [], free: Callable[[], list[str]] = lambda: [],
                 quota: float = 1.0):
        self.bound, self.free, self.quota = bound, free, max(quota, 1e-3)
        self.t0 = self.t = time.monotonic()
        self.seen: dict[str, tuple[int, int]] = {}
        self.waited = 0.0  # seconds discounted so far
        self._look()

    def _look(self) -> None:
        now = time.monotonic()
        bound, free = _counters(self.bound()), _counters(self.free())
        run_ns = wait_ns = 0
        for counters, quota_bound in ((bound, True), (free, False)):
            for path, (run, wait) in counters.items():
                run0, wait0 = self.seen.get(path, (0, 0)) if self.t > self.t0 or path in self.seen else (run, wait)
                if run < run0 or wait < wait0:  # a thread id used again by a new thread
                    run0, wait0 = 0, 0
                if quota_bound:
                    run_ns += run - run0
                wait_ns += wait - wait0
        dt = now - self.t
        self.waited += max(0.0, min(wait_ns / 1e9, dt - run_ns / 1e9 / self.quota, dt))
        self.seen = {**bound, **free}
        self.t = now

    def now(self) -> float:
        """Seconds of this clock since it was made."""
        self._look()
        return (self.t - self.t0) - self.waited

    def limit(self, seconds: float, stretch: float = STRETCH) -> Limit:
        return Limit(self, seconds, stretch)


def wall_clock() -> OwnClock:
    """A clock that counts wall time (no threads to discount)."""
    return OwnClock()


def process_clock() -> OwnClock:
    """The clock of this process's threads, counted as bound by a quota of one core (the sandbox's)."""
    return OwnClock(bound=own_threads)
