"""Timed grading that holds on a shared machine: a lock, paired rounds, a sequential sign test.

Notation: see the `speclab` package docstring.

A timed check compares a student's code with a baseline timed alongside it. Three rules:

1. **One student timed at a time.** The grading pipeline judges timed cells (whose CellSpec says
   ``timed=True``) after every student's untimed checks, one student at a time, in a grader process of
   that student's own (autograder/pipeline/grade.py, ``time_student``): no other student's process exists
   while a timed section runs, and the student's own sandbox is frozen while a baseline is timed
   (``pausing``/``student_paused``). Within a process a timed section runs with no other check beside it
   (``alone()``, autograder/checks/alone.py). Where several graders share a machine outside the pipeline,
   ``SPECLAB_TIMING_LOCK`` may name a lock file (``fcntl.flock``) private to them; a section that cannot
   get it within ``LOCK_WAIT_S`` times anyway and says so.
2. **Paired rounds.** Each round calls the baseline and every candidate once, in turn; a
   round gives one ratio per candidate (baseline time / candidate time), so a slow-down of
   the machine during a round hits both sides of its ratio.
3. **Only a clear verdict takes points.** The per-round ratios go into a one-sided sign test
   of "the median ratio is at least the bar" (rounds are exchangeable; no assumption on the
   shape of their distribution). It is looked at after ``LOOKS[0]``, ``LOOKS[1]``, ... rounds;
   at each look the test either fails the code (clearly below the bar: at most
   ``binom.ppf``-many rounds above it), passes it (clearly above), or, inconclusive, asks for
   more rounds while the time budget lasts. Still inconclusive at the end: the check passes
   and says so with ``undecided(note)``: the line is printed (the notebook's output shows it)
   and, where the grader runs the check (autograder/pipeline/judge.py, inside ``recording()``),
   recorded. A cell whose timing is unclear has its points held, neither given nor taken
   (autograder/pipeline/results.py, ``hold_pending``), until ``--retime`` times it again. The
   student's feedback, grades.csv (timing and pending columns) and the class summary name it.

The statistics are speclab.speedtest's (a notebook runs the same test). False failures: for code whose per-round ratio has median at least the bar, the look after
``LOOKS[i]`` rounds fails it with probability at most ``LOOK_ALPHAS[i]``; over all looks at
most ``ALPHA_CLAUSE = sum(LOOK_ALPHAS)`` (Bonferroni). ``power(theta)`` is the exact
probability of a fail verdict when each round independently falls below the bar with
probability ``theta`` (computed with scipy.stats.binom, looks included).
"""
from __future__ import annotations

import contextvars
import fcntl
import os
import time
from contextlib import contextmanager, nullcontext
from functools import partial
from typing import Callable, Sequence

# The statistics live in speclab, so that a student's notebook runs the very test the grader runs;
# re-exported here for the checks. ALPHA_CLAUSE (1.23 %) per timed clause; a cell with two clauses
# 2.5 %, and the pipeline's clean re-check times the cell a second time: <= 5 % at worst for a submission
from speclab.speedtest import (ALPHA_CLAUSE, ALPHA_LOOK, ALPHA_PASS, LOOK_ALPHAS, LOOKS, PASS_ALPHAS,  # noqa: F401
                               Rounds, alpha_at, decided_by, median, outcome_probabilities, paired_rounds,
                               pass_probability, power, thresholds, verdict)

from .alone import alone
from .scoped import bound

LOCK_ENV = "SPECLAB_TIMING_LOCK"
LOCK_WAIT_S = 150.0  # one other student's timed section (about 60 s on 2 busy cores), with room to spare


class TimingFailure(AssertionError):
    """A timed check that failed with a clear verdict (never a tampering sign by itself)."""


# The notes of the check running in this thread (and context): a list while the grader records, else None.
_UNDECIDED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("speclab_undecided", default=None)
UNDECIDED_MARK = "timing undecided:"  # how the line starts in a notebook's output (the pipeline looks for it)


def undecided(note: str) -> None:
    """A timed verdict that is not clear (the pipeline times it again, then holds its points): say why, in words a student reads
    (e.g. "no clear verdict after 22 paired rounds (median per k: k=2: 1.21x, ...); no points are
    taken for a timing that is not clear").

    Printed as ``timing undecided: <note>``, a line of the notebook's output; while the grader
    records (`recording()`, around each check it runs) it is kept for that student's cell instead,
    and travels to the feedback page, grades.csv's timing column and the class summary."""
    notes = _UNDECIDED.get()
    if notes is None:
        print(f"{UNDECIDED_MARK} {note}")
    else:
        notes.append(str(note))


@contextmanager
def recording():
    """Collect the `undecided` notes of the checks called inside (this thread only: students'
    checks run side by side in the grader, each in its worker's thread). Yields the list."""
    with bound(_UNDECIDED, []) as notes:
        yield notes


# What a timed check measured, for a leaderboard (Gradescope's): name -> (value, "desc" | "asc"), while the
# grader collects them (`measuring()`, around each cell's checks); outside, figures are dropped.
_FIGURES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("speclab_figures", default=None)


def figure(name: str, value: float, order: str = "desc") -> None:
    """Report one measured figure of the student's code (e.g. its speed-up); "desc": higher ranks first."""
    if order not in ("desc", "asc"):
        raise ValueError(f"order must be 'desc' or 'asc', not {order!r}")
    figures = _FIGURES.get()
    if figures is not None:
        figures[str(name)] = (float(value), order)


@contextmanager
def measuring():
    """Collect the figures reported by the checks called inside (this thread only). Yields the dict."""
    with bound(_FIGURES, {}) as figures:
        yield figures


# How the grader pauses the student's own sandbox while it times its baselines (a cgroup freezer,
# autograder/sandbox/cgroups.py): a callable giving a context manager, set by the pipeline around each
# check it runs (`pausing()`); outside the pipeline (a notebook) nothing is paused.
_PAUSE: contextvars.ContextVar[Callable[[], object] | None] = contextvars.ContextVar("speclab_pause", default=None)


@contextmanager
def pausing(pause: Callable[[], object]):
    """While inside, `student_paused` pauses the student's sandbox with `pause()` (a context manager)."""
    with bound(_PAUSE, pause):
        yield


# How the grader puts its baseline and the student's code on one core while it times (autograder/sandbox/bounds.py,
# `one_core`): a callable giving a context manager, set by the pipeline (`pinning()`) and entered by `timing_lock`;
# outside the pipeline (a notebook) the baseline and the student's code already run in one thread of one process.
_PIN: contextvars.ContextVar[Callable[[], object] | None] = contextvars.ContextVar("speclab_pin", default=None)


@contextmanager
def pinning(pin: Callable[[], object]):
    """While inside, every timed section (`timing_lock`) runs inside `pin()` (a context manager)."""
    with bound(_PIN, pin):
        yield


def student_paused(student_labels) -> Callable[[str], object]:
    """`around` for speclab.speedtest.paired_rounds: a timed call whose label is not one of the student's
    (a baseline the grader runs in its own process) runs with the student's sandbox paused, so nothing the
    student started (a helper burning CPU) runs beside the baseline. Pausing happens before the clock
    starts and ends after it stops. Outside the pipeline: nothing is paused."""
    mine = set(student_labels)

    def around(label: str):
        pause = _PAUSE.get()
        if pause is None or label in mine:
            return nullcontext()
        return pause()
    return around


# How long the student's code worked, as a clock the student's code cannot set: set by the pipeline around the
# timed checks it runs (`student_clock`) to the CPU time of the student's control group, as the kernel counts it
# (or the wall clock where it has none). Outside the pipeline (a notebook, a test calling a check) the student's
# code runs in this very process, and the process's own CPU time counts.
_CLOCK: contextvars.ContextVar[tuple[Callable[[], float], bool] | None] = contextvars.ContextVar(
    "speclab_student_clock", default=None)


@contextmanager
def student_clock(read: Callable[[], float], cpu: bool = True):
    """While inside, `student_seconds()` reads `read()`: seconds of the student's work so far; `cpu` says
    whether they are CPU seconds (a control group's usage) or wall seconds (a machine without groups)."""
    with bound(_CLOCK, (read, bool(cpu))):
        yield


def student_seconds() -> float:
    """Seconds the student's code has worked so far (only differences mean anything): the pipeline's reader
    (its control group's CPU time), else this process's CPU time (the student's code runs here)."""
    clock = _CLOCK.get()
    return float(clock[0]()) if clock is not None else time.process_time()


def cpu_clocks(student_labels, device=None) -> Callable[[str], Callable]:
    """`clock_of` for speclab.speedtest.paired_rounds, as the grader times: a call whose label is one of
    the student's is timed by `student_seconds` (in the pipeline the CPU time of the student's whole
    control group, every process and thread of it, read by the kernel; the wire that carries its inputs
    and outputs is charged to it too), and the course's own calls (the baselines, run in this thread)
    by this thread's CPU time (`time.thread_time`: no other thread of the grader counts). The two count
    the same thing, work on a core, so a busy machine moves neither. On a GPU, or where the student's
    clock is a wall clock (a machine without control groups), every call is timed by the wall clock
    (`speclab.clock.wall_time`, the device synchronised)."""
    from speclab.clock import cpu_time, wall_time

    mine = set(student_labels)
    clock = _CLOCK.get()
    if getattr(device, "type", device) not in (None, "cpu") or (clock is not None and not clock[1]):
        return lambda label: wall_time
    student, course = partial(cpu_time, read=student_seconds), partial(cpu_time, read=time.thread_time)
    return lambda label: student if label in mine else course


@contextmanager
def timing_lock(wait_s: float = LOCK_WAIT_S):
    """Time alone: no other check of this process runs (autograder/checks/alone.py), and no
    other grader times (the lock file SPECLAB_TIMING_LOCK names, when it is set).

    While the pipeline pins (`pinning`), the section also runs on one core with the student's code.

    Yields a note (empty, or why the section timed without the lock file)."""
    pin = _PIN.get()
    with alone(), _lock_file(wait_s) as note, pin() if pin is not None else nullcontext():
        yield note


@contextmanager
def _lock_file(wait_s: float):
    path = os.environ.get(LOCK_ENV, "")
    if not path:
        yield ""
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        yield f"timed without the graders' lock ({err.strerror})"
        return
    deadline = time.monotonic() + wait_s
    held = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        yield "" if held else f"timed without the graders' lock (another timing held it over {wait_s:.0f} s)"
    finally:
        if held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def sequential_rounds(fns: Sequence[Callable[[], object]], labels: Sequence[str], decide: Callable[[Rounds], bool],
                      budget_s: float, device=None, looks: Sequence[int] = LOOKS,
                      hard_limit_s: float | None = None) -> Rounds:
    """`speclab.speedtest.paired_rounds` under the timing lock (one student timed at a time)."""
    return paired_rounds(fns, labels, decide, budget_s, device, looks, hard_limit_s, section=timing_lock)
