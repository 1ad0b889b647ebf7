"""Repeated timings on a shared machine: medians, interleaved ratios, and their self-check.

Notation: see the `speclab` package docstring. Every time is taken by the stopwatch of
`speclab.clock`; `speclab.measure` re-exports the public names of both modules and adds what
is measured with them (copy bandwidth, matmul throughput, forward times).

The discipline every timing in speclab follows:

- warm-up calls first (allocator, caches, lazy initialisation), then ``repeats`` timed calls;
- the statistic is the **median** of the repeats (robust to a stray slow call on a
  shared machine), with the quartiles kept so a reader can see the spread;
- the clock is read after synchronising the device (``speclab.clock.wall_time``); an operation
  not much longer than that synchronisation (a CUDA-graph decode step) is timed in blocks of
  ``number`` back-to-back calls, each repeat then reporting the block's time / ``number``;
- a comparison of two things (1 vs k + 1 tokens, target vs draft) is a **ratio measured
  in one run**: the calls are interleaved, so a slow-down of the machine hits both sides;
- every timing checks itself: its noise figure is the relative IQR, (Q3 - Q1) / median, and a
  timing is *stable* when that is at most ``MAX_REL_IQR`` (10 %). Given a ``budget_s``, an
  unstable measurement is extended round by round and the stablest window of ``repeats``
  rounds is kept; ``quality_note`` writes the note a page shows next to numbers that stayed
  unstable or are physically implausible (a longer pass measured faster beyond noise);
- a timing below the clock's resolution is reported as that resolution, never as 0;
- progress bars are drawn only in a terminal or an interactive Jupyter session, never into a
  page built headless (``show_progress``).

Absolute times mean something only together with the device they were measured on; every
result carries a ``device`` string for that reason.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from tqdm.auto import tqdm

from speclab import clock
from speclab.clock import CLOCK_RESOLUTION_S, Stopwatch, device_name

__all__ = [
    "Timing",
    "MAX_REL_IQR",
    "show_progress",
    "faster_when_larger",
    "quality_note",
    "time_fn",
    "time_interleaved",
    "time_ratio",
]

# A measurement whose timed part is predicted to take longer than this shows a tqdm bar.
PROGRESS_AFTER_S = 2.0
# Stability criterion of a timing: relative interquartile range (Q3 - Q1) / median of its repeats.
MAX_REL_IQR = 0.10


@dataclass(frozen=True)
class Timing:
    """Repeated wall-clock times (seconds) of one operation on one device."""

    times: tuple[float, ...]  # one entry per timed repeat, seconds
    device: str  # where it ran, e.g. "cpu (AMD EPYC, 2 threads)" or "cuda (NVIDIA H100)"
    label: str = ""
    max_rel_iqr: float = MAX_REL_IQR  # the stability criterion this timing is judged by
    rounds: int = 0  # timed rounds measured in all (>= repeats when it was re-measured)

    def __post_init__(self) -> None:
        if not self.times:
            raise ValueError("a Timing needs at least one measured time")
        if not all(math.isfinite(t) and t >= 0 for t in self.times):
            raise ValueError(f"times must be finite and >= 0 seconds, got {self.times}")

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def quartiles(self) -> tuple[float, float]:
        """(25th, 75th) percentiles of the repeats; both equal the time when there is one repeat."""
        if len(self.times) == 1:
            return self.times[0], self.times[0]
        q = statistics.quantiles(self.times, n=4, method="inclusive")
        return q[0], q[2]

    @property
    def rel_iqr(self) -> float:
        """Noise figure: (Q3 - Q1) / median, e.g. 0.05 for a spread of 5 % of the median."""
        lo, hi = self.quartiles
        return (hi - lo) / self.median if self.median > 0 else 0.0

    @property
    def stable(self) -> bool:
        """True when the relative IQR meets the stability criterion ``max_rel_iqr``."""
        return self.rel_iqr <= self.max_rel_iqr

    @property
    def repeats(self) -> int:
        return len(self.times)

    @property
    def noise(self) -> str:
        """The noise figure as the page prints it next to a number, e.g. "±4 %" (half the relative IQR)."""
        return f"±{50 * self.rel_iqr:.0f} %"

    def __str__(self) -> str:
        lo, hi = self.quartiles
        name = f"{self.label}: " if self.label else ""
        flag = "" if self.stable else f", UNSTABLE: relative IQR {self.rel_iqr:.0%} > {self.max_rel_iqr:.0%}"
        return (f"{name}median {self.median * 1e3:.3f} ms {self.noise} (IQR {lo * 1e3:.3f}-{hi * 1e3:.3f} ms, "
                f"n={self.repeats}{flag}) on {self.device}")



def _check_counts(repeats: int, warmup: int) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")



def _measure(fn: Callable[[], object], device, sw: Stopwatch) -> float:
    t = float(sw(fn, device))
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"the stopwatch returned {t!r} seconds; a duration is finite and >= 0")
    return max(t, CLOCK_RESOLUTION_S)


def show_progress() -> bool:
    """Whether a long measurement may draw a tqdm bar: in a terminal or an interactive Jupyter
    session, never while a notebook is executed headless (book build, autograder), where the
    bar would be saved into the page. SPECLAB_PROGRESS=0/1 overrides."""
    forced = os.environ.get("SPECLAB_PROGRESS", "").strip()
    if forced:
        return forced not in ("0", "false", "no")
    if os.environ.get("NBGRADER_EXECUTION") is not None:
        return False
    if "JPY_SESSION_NAME" in os.environ:  # a kernel started by a Jupyter server for a notebook a person opened
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _block(fn: Callable[[], object], number: int) -> Callable[[], object]:
    def block() -> None:
        for _ in range(number):
            fn()

    return block


def _worst_window(times: list[list[float]], repeats: int, start: int) -> float:
    """Largest relative IQR over the functions, in the window of rounds [start, start + repeats)."""
    worst = 0.0
    for t in times:
        window = t[start : start + repeats]
        if len(window) > 1:
            q = statistics.quantiles(window, n=4, method="inclusive")
            med = statistics.median(window)
            worst = max(worst, (q[2] - q[0]) / med if med > 0 else 0.0)
    return worst


def time_interleaved(
    fns: Sequence[Callable[[], object]],
    labels: Sequence[str] | None = None,
    repeats: int = 7,
    warmup: int = 2,
    device: torch.device | str | None = None,
    progress: bool | None = None,
    budget_s: float = 0.0,
    max_rel_iqr: float = MAX_REL_IQR,
    max_rounds: int | None = None,
    stopwatch: Stopwatch | None = None,
    number: int = 1,
) -> list[Timing]:
    """Time several operations in one run, calling them round-robin so drift hits all alike.

    Each round calls every function once (in the given order); ``warmup`` rounds are
    discarded, then ``repeats`` rounds are kept.

    Self-check: a timing is *stable* when its relative IQR is at most ``max_rel_iqr``. While
    some function is unstable, further rounds are measured, for at most ``budget_s`` extra
    seconds of wall time (and ``max_rounds`` rounds in all, default 10 * repeats); the result
    is the window of ``repeats`` consecutive rounds that is stablest for the worst function
    (every function measured in the same rounds, so ratios stay interleaved). Each Timing
    says whether it met the criterion (``Timing.stable``); callers print ``Timing.noise``
    next to the number and a note when it did not (see ``quality_note``).

    ``progress=None`` shows a tqdm bar only when the timed rounds are predicted (from the
    warm-up) to take over ``PROGRESS_AFTER_S`` seconds and ``show_progress()`` allows it.
    ``stopwatch`` overrides the clock's stopwatch (the grader passes ``wall_time``).

    ``number`` > 1 times each repeat as a block of that many back-to-back calls and reports the
    block's time / number: for an operation not much longer than the device synchronisation
    around every sample (a CUDA-graph decode step of tens of microseconds), whose single calls
    would mostly measure that synchronisation.
    """
    _check_counts(repeats, warmup)
    if len(fns) == 0:
        raise ValueError("nothing to time: fns is empty")
    labels = [""] * len(fns) if labels is None else list(labels)
    if len(labels) != len(fns):
        raise ValueError(f"got {len(labels)} labels for {len(fns)} functions")
    if not (budget_s >= 0 and math.isfinite(budget_s)):
        raise ValueError(f"budget_s must be a finite number of seconds >= 0, got {budget_s!r}")
    if not max_rel_iqr > 0:
        raise ValueError(f"max_rel_iqr must be > 0, got {max_rel_iqr!r}")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"number (calls per timed block) must be an int >= 1, got {number!r}")
    max_rounds = 10 * repeats if max_rounds is None else max(int(max_rounds), repeats)
    sw = clock.stopwatch() if stopwatch is None else stopwatch
    if number > 1:
        fns = [_block(fn, number) for fn in fns]
    round_time = 0.0
    for _ in range(warmup):
        round_time = sum(_measure(fn, device, sw) for fn in fns)
    if progress is None:
        progress = round_time * repeats > PROGRESS_AFTER_S and show_progress()
    times: list[list[float]] = [[] for _ in fns]
    bar = tqdm(total=repeats, desc="timing", disable=not progress, leave=False)
    start = time.perf_counter()  # the budget is real time, whatever the stopwatch says
    best_start, best_worst = 0, math.inf
    try:
        while True:
            for i, fn in enumerate(fns):
                times[i].append(_measure(fn, device, sw) / number)
            bar.update()
            n = len(times[0])
            if n < repeats:
                continue
            worst = _worst_window(times, repeats, n - repeats)
            if worst < best_worst:
                best_start, best_worst = n - repeats, worst
            if best_worst <= max_rel_iqr or n >= max_rounds or time.perf_counter() - start > budget_s:
                break
            if bar.total == n:  # re-measuring: extend the bar by one round at a time
                bar.total = n + 1
                bar.set_description("timing (re-measuring: unstable)")
    finally:
        bar.close()
    name = device_name(device)
    rounds = len(times[0])
    return [
        Timing(tuple(t[best_start : best_start + repeats]), name, label, max_rel_iqr, rounds)
        for t, label in zip(times, labels)
    ]


def time_fn(
    fn: Callable[[], object],
    repeats: int = 7,
    warmup: int = 2,
    device: torch.device | str | None = None,
    label: str = "",
    progress: bool | None = None,
    budget_s: float = 0.0,
    max_rel_iqr: float = MAX_REL_IQR,
    number: int = 1,
) -> Timing:
    """Median-of-repeats wall time of ``fn()`` after ``warmup`` discarded calls (see time_interleaved,
    also for ``number``, the calls per timed block)."""
    return time_interleaved([fn], [label], repeats, warmup, device, progress, budget_s, max_rel_iqr,
                            number=number)[0]


def time_ratio(
    numerator: Callable[[], object],
    denominator: Callable[[], object],
    repeats: int = 7,
    warmup: int = 2,
    device: torch.device | str | None = None,
    budget_s: float = 0.0,
) -> tuple[float, Timing, Timing]:
    """(median(numerator) / median(denominator), both Timings), interleaved in one run."""
    num, den = time_interleaved([numerator, denominator], ["numerator", "denominator"], repeats, warmup, device,
                                budget_s=budget_s)
    return num.median / den.median, num, den


# ------------------------------------------------------------ checking the measurement
def faster_when_larger(timings: Mapping[float, Timing]) -> list[tuple[float, float]]:
    """Pairs (smaller size, larger size) whose larger operation was measured faster *beyond noise*:
    its 75th percentile lies below the smaller one's 25th. Physically implausible for work that
    only grows with the size (more tokens, more rows), so a sign of a disturbed measurement."""
    sizes = sorted(timings)
    return [
        (a, b)
        for i, a in enumerate(sizes)
        for b in sizes[i + 1 :]
        if timings[b].quartiles[1] < timings[a].quartiles[0]
    ]


def quality_note(timings: Sequence[Timing] | Mapping[float, Timing], what: str = "these timings") -> str | None:
    """A short Markdown note for the page when a measurement failed its own checks, else None.

    Lists the timings whose relative IQR broke the stability criterion (with their noise figure)
    and, for a mapping size -> Timing, the larger sizes measured faster than smaller ones beyond
    noise. The numbers are still printed: the note says how far to trust them.
    """
    items = list(timings.values()) if isinstance(timings, Mapping) else list(timings)
    problems = []
    unstable = [t for t in items if not t.stable]
    if unstable:
        worst = max(unstable, key=lambda t: t.rel_iqr)
        names = ", ".join(t.label or "unlabelled" for t in unstable[:6]) + (", ..." if len(unstable) > 6 else "")
        problems.append(
            f"{len(unstable)} of {len(items)} timings stayed unstable after {worst.rounds} rounds "
            f"(relative IQR up to {worst.rel_iqr:.0%}, criterion {worst.max_rel_iqr:.0%}: {names})"
        )
    if isinstance(timings, Mapping):
        bad = faster_when_larger(timings)
        if bad:
            shown = "; ".join(
                f"{b} ({timings[b].median * 1e3:.3g} ms {timings[b].noise}) faster than {a} "
                f"({timings[a].median * 1e3:.3g} ms {timings[a].noise})" for a, b in bad[:4]
            )
            problems.append(f"{len(bad)} larger size(s) measured faster than a smaller one beyond noise: {shown}")
    if not problems:
        return None
    return (f"**Measurement note.** The machine that built this page was disturbed while measuring {what}: "
            + "; ".join(problems) + ". Read these numbers with that noise in mind; re-run the cell on a quiet "
            "machine for firmer ones.")

