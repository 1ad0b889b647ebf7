"""Timed grading that holds on a shared machine: a lock, paired rounds, a sequential sign test.

Notation: see the `speclab` package docstring.

A timed check compares a student's code with a baseline timed alongside it. Three rules:

1. **One student timed at a time.** A timed section runs with no other check of the grader's
   process beside it (``alone()``, autograder/checks/alone.py), and workers grading in parallel share one lock file
   (``SPECLAB_TIMING_LOCK``, set by the grading pipeline to a file in its output folder);
   a timed section holds it (``fcntl.flock``), so two students' timings never overlap. A
   section that cannot get the lock within ``LOCK_WAIT_S`` (a notebook holding it forever)
   times anyway and says so.
2. **Paired rounds.** Each round calls the baseline and every candidate once, in turn; a
   round gives one ratio per candidate (baseline time / candidate time), so a slow-down of
   the machine during a round hits both sides of its ratio.
3. **Only a clear verdict takes points.** The per-round ratios go into a one-sided sign test
   of "the median ratio is at least the bar" (rounds are exchangeable; no assumption on the
   shape of their distribution). It is looked at after ``LOOKS[0]``, ``LOOKS[1]``, ... rounds;
   at each look the test either fails the code (clearly below the bar: at most
   ``binom.ppf``-many rounds above it), passes it (clearly above), or, inconclusive, asks for
   more rounds while the time budget lasts. Still inconclusive at the end: the points stay,
   and the check says so with ``undecided(note)``: the line is printed (the notebook's output
   shows it) and, where the grader runs the check (autograder/pipeline/judge.py, inside
   ``recording()``), recorded, so the student's feedback, grades.csv and the class summary name it.

False failures: for code whose per-round ratio has median at least the bar, the look after
``LOOKS[i]`` rounds fails it with probability at most ``LOOK_ALPHAS[i]``; over all looks at
most ``ALPHA_CLAUSE = sum(LOOK_ALPHAS)`` (Bonferroni). ``power(theta)`` is the exact
probability of a fail verdict when each round independently falls below the bar with
probability ``theta`` (computed with scipy.stats.binom, looks included).
"""
from __future__ import annotations

import contextvars
import fcntl
import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Sequence

from scipy import stats

from .alone import alone

LOCK_ENV = "SPECLAB_TIMING_LOCK"
LOCK_WAIT_S = 150.0  # one other student's timed section (about 60 s on 2 busy cores), with room to spare
LOOKS = (7, 10, 14, 18, 22)  # rounds after which the verdict is looked at
# false-failure budget of each look: the first look can only fail code whose 7 rounds ALL fall below
# the bar (probability 0.5**7 = 0.0078 at worst); the later looks share the rest
LOOK_ALPHAS = (0.0079, 0.0011, 0.0011, 0.0011, 0.0011)
ALPHA_LOOK = LOOK_ALPHAS[0]
ALPHA_CLAUSE = sum(LOOK_ALPHAS)  # 1.23 % per timed clause; a cell with two clauses 2.5 %, and the
# pipeline's clean re-check times the cell a second time: <= 5 % = 1 in 20 at worst for a submission


class TimingFailure(AssertionError):
    """A timed check that failed with a clear verdict (never a tampering sign by itself)."""


# The notes of the check running in this thread (and context): a list while the grader records, else None.
_UNDECIDED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("speclab_undecided", default=None)
UNDECIDED_MARK = "timing undecided:"  # how the line starts in a notebook's output (the pipeline looks for it)


def undecided(note: str) -> None:
    """A timed verdict that is not clear, so no points are taken: say why, in words a student reads
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
    notes: list[str] = []
    token = _UNDECIDED.set(notes)
    try:
        yield notes
    finally:
        _UNDECIDED.reset(token)


@contextmanager
def timing_lock(wait_s: float = LOCK_WAIT_S):
    """Time alone: no other check of this process runs (autograder/checks/alone.py), and no
    other grader times (the lock file SPECLAB_TIMING_LOCK names, when it is set).

    Yields a note (empty, or why the section timed without the lock file)."""
    with alone(), _lock_file(wait_s) as note:
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


def thresholds(n: int, alpha: float = ALPHA_LOOK) -> tuple[int, int]:
    """(fail_at_most, pass_at_least): with n rounds and X of them at or above the bar, the look
    fails the code if X <= fail_at_most, passes it if X >= pass_at_least, else is inconclusive.

    fail_at_most is the largest x with P(Binom(n, 1/2) <= x) <= alpha (-1 when none is), the
    one-sided sign test of median >= bar; pass_at_least mirrors it for median <= bar."""
    x = int(stats.binom.ppf(alpha, n, 0.5))
    while x >= 0 and stats.binom.cdf(x, n, 0.5) > alpha:
        x -= 1
    return x, n - x


def alpha_at(n: int) -> float:
    """The false-failure budget of the look taken after n rounds: that of the first look at or after
    n (a look cut short by the time limit spends the budget of the look it replaces)."""
    for look, a in zip(LOOKS, LOOK_ALPHAS):
        if n <= look:
            return a
    return LOOK_ALPHAS[-1]


def verdict(ratios: Sequence[float], bar: float, alpha: float | None = None) -> str:
    """'fail', 'pass' or 'inconclusive' for per-round ratios against the bar (one look)."""
    n = len(ratios)
    alpha = alpha_at(n) if alpha is None else alpha
    above = sum(r >= bar for r in ratios)
    fail_at_most, pass_at_least = thresholds(n, alpha)
    if above <= fail_at_most:
        return "fail"
    if above >= pass_at_least:
        return "pass"
    return "inconclusive"


def power(theta: float, looks: Sequence[int] = LOOKS, alphas: Sequence[float] = LOOK_ALPHAS) -> float:
    """P(a fail verdict at some look) when each round falls below the bar independently with
    probability theta; exact, by carrying the distribution of the count above the bar from look
    to look (scipy.stats.binom for the rounds in between). theta = 1/2 bounds the false failures."""
    import numpy as np

    dist = np.zeros(1)  # dist[x] = P(no verdict yet and x rounds above the bar so far)
    dist[0] = 1.0
    done = 0
    fail = 0.0
    for n, alpha in zip(looks, alphas):
        step = stats.binom.pmf(np.arange(n - done + 1), n - done, 1 - theta)
        dist = np.convolve(dist, step)
        fail_at_most, pass_at_least = thresholds(n, alpha)
        if fail_at_most >= 0:
            fail += dist[: fail_at_most + 1].sum()
            dist[: fail_at_most + 1] = 0
        dist[pass_at_least:] = 0
        done = n
    return float(fail)


@dataclass
class Rounds:
    """Per-round wall times of the functions timed together (seconds): times[i][j] is round i, function j."""

    labels: list[str]
    times: list[list[float]]
    lock_note: str = ""

    def column(self, label: str) -> list[float]:
        j = self.labels.index(label)
        return [r[j] for r in self.times]

    def ratios(self, numerator: str, denominator: str) -> list[float]:
        return [a / b for a, b in zip(self.column(numerator), self.column(denominator))]


def sequential_rounds(fns: Sequence[Callable[[], object]], labels: Sequence[str], decide: Callable[[Rounds], bool],
                      budget_s: float, device=None, looks: Sequence[int] = LOOKS,
                      hard_limit_s: float | None = None) -> Rounds:
    """Time ``fns`` round-robin under the timing lock, on the real clock, after one warm-up round;
    after each look call ``decide(rounds)`` and stop when it returns True (a clear verdict), at
    the last look, or at the first look after ``budget_s`` seconds of timing (the wait for the
    lock not counted). The first look is always completed (fewer rounds could never give a
    verdict) unless ``hard_limit_s`` (default 3 * budget_s) runs out first; a look cut short
    by it is the last one, so there are never more looks than ``len(looks)``."""
    from speclab.measure import wall_time  # the real clock, never a test's fake stopwatch

    hard = 3 * budget_s if hard_limit_s is None else hard_limit_s
    with timing_lock() as note:
        for fn in fns:
            wall_time(fn, device)
        rounds = Rounds(list(labels), [], note)
        start = time.monotonic()
        for look in looks:
            while len(rounds.times) < look and time.monotonic() - start <= hard:
                rounds.times.append([max(wall_time(fn, device), 1e-9) for fn in fns])
            elapsed = time.monotonic() - start
            if decide(rounds) or elapsed > budget_s or elapsed > hard:
                break
    return rounds


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return math.nan if n == 0 else (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))
