"""Measuring the machine: copy bandwidth, matmul throughput, forward times, bytes per decode step.

Notation: see the `speclab` package docstring.

Shared by the book (chapters 1 and 7) and Lab 2. Every timing here follows the same
discipline:

- warm-up calls first (allocator, caches, lazy initialisation), then ``repeats`` timed calls;
- the statistic is the **median** of the repeats (robust to a stray slow call on a
  shared machine), with the quartiles kept so a reader can see the spread;
- ``torch.cuda.synchronize()`` before reading the clock on a GPU, because kernel launches
  return before the kernel has run;
- a comparison of two things (1 vs k + 1 tokens, target vs draft) is a **ratio measured
  in one run**: the calls are interleaved, so a slow-down of the machine hits both sides;
- every timing checks itself: its noise figure is the relative IQR, (Q3 - Q1) / median, and a
  timing is *stable* when that is at most ``MAX_REL_IQR`` (10 %). Given a ``budget_s``, an
  unstable measurement is extended round by round and the stablest window of ``repeats``
  rounds is kept; ``quality_note`` writes the note a page shows next to numbers that stayed
  unstable or are physically implausible (a longer pass measured faster beyond noise);
- one seam, the *stopwatch* (``wall_time`` by default), takes every time; tests replace it with
  adversarial fakes (``FakeStopwatch``, or ``SPECLAB_FAKE_TIMER=<kind>`` for executed notebooks);
  a timing below the clock's resolution is reported as that resolution, never as 0;
- progress bars are drawn only in a terminal or an interactive Jupyter session, never into a
  page built headless (``show_progress``).

Absolute times mean something only together with the device they were measured on; every
result carries a ``device`` string for that reason.

The byte and FLOP counts (``decode_step_bytes``, ``decode_step_flops``) are exact counts
for :class:`speclab.model.GPT` from its configuration; they count what a decode step must
read at the least (every weight once, the valid part of the KV cache) and ignore
activations, which are tiny at batch 1.
"""

from __future__ import annotations

import math
import os
import platform
import random
import statistics
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from tqdm.auto import tqdm


class _LazyTorch:
    """`torch`, imported on first use: timing numpy code (Lab 1's samplers) never pays for it."""

    def __getattr__(self, name: str):
        import torch as real

        globals()["torch"] = real  # later uses go straight to the module
        return getattr(real, name)


torch = _LazyTorch()

__all__ = [
    "Timing",
    "MAX_REL_IQR",
    "CLOCK_RESOLUTION_S",
    "Stopwatch",
    "wall_time",
    "FakeStopwatch",
    "FAKE_KINDS",
    "FAKE_TIMER_ENV",
    "stopwatch",
    "use_stopwatch",
    "set_stopwatch",
    "show_progress",
    "faster_when_larger",
    "quality_note",
    "device_name",
    "synchronize",
    "time_fn",
    "time_interleaved",
    "time_ratio",
    "copy_bytes",
    "copy_bandwidth",
    "matmul_flops",
    "matmul_throughput",
    "param_count",
    "decode_step_bytes",
    "decode_step_flops",
    "DecodeBytes",
    "roofline",
    "forward_step_fns",
    "forward_times",
]

# A measurement whose timed part is predicted to take longer than this shows a tqdm bar.
PROGRESS_AFTER_S = 2.0


# ------------------------------------------------------------------------------ timing
# A timing a clock cannot resolve is reported as the clock's resolution, never as 0, so that
# every rate (bytes / time) and ratio computed from timings is finite.
CLOCK_RESOLUTION_S = max(time.get_clock_info("perf_counter").resolution, 1e-9)
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


def device_name(device: torch.device | str | None = None) -> str:
    """A human-readable name of the device a timing ran on (with the CPU thread count)."""
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    cpu = platform.processor() or platform.machine() or "cpu"
    try:  # Linux: the marketing name is more useful than the architecture
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if "torch" not in sys.modules:  # numpy code timed: torch's thread count says nothing about it
        return f"cpu ({cpu})"
    threads = sys.modules["torch"].get_num_threads()
    return f"{'cpu' if device is None else device.type} ({cpu}, {threads} thread{'' if threads == 1 else 's'})"


def synchronize(device: torch.device | str | None) -> None:
    """Wait for queued GPU work on ``device``; nothing to wait for on a CPU."""
    if device is None or device == "cpu":  # no torch needed (numpy code is timed with device None)
        return
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _check_counts(repeats: int, warmup: int) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")


# ------------------------------------------------------------------- the timer seam
# Every timing in speclab goes through ONE function, the stopwatch: stopwatch(fn, device) calls
# fn once and returns its duration in seconds. The book's robustness test replaces it with
# adversarial fakes (FakeStopwatch), in-process with use_stopwatch() or, for executed
# notebooks, through the environment variable SPECLAB_FAKE_TIMER=<kind>.
Stopwatch = Callable[[Callable[[], object], object], float]


def wall_time(fn: Callable[[], object], device=None) -> float:
    """The real stopwatch: synchronise, read perf_counter, call fn, synchronise, read it again."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


class FakeStopwatch:
    """An adversarial stopwatch for testing code that consumes timings.

    Each distinct function is really run (and really timed) the first time it is seen, so that a
    broken closure still fails; later calls are NOT run and return a distorted duration at once,
    so a whole chapter executes in seconds. Kinds (``FAKE_KINDS``):

    - ``noise10``: the real duration times a log-uniform factor in [1/10, 10], fresh every call;
    - ``reversed``: 1e-6 s^2 / real duration, so a longer operation reads as a shorter one;
    - ``equal``: 1 ms for everything;
    - ``tiny``: the real duration times 1e-7 (a millisecond reads as 0.1 ns, below the clock);
    - ``huge``: the real duration times 1e6 (a millisecond reads as 17 minutes);
    - ``zero``: 0 seconds.
    """

    KINDS = ("noise10", "reversed", "equal", "tiny", "huge", "zero")

    def __init__(self, kind: str, seed: int = 0) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"unknown fake stopwatch {kind!r}; choose one of {', '.join(self.KINDS)}")
        self.kind = kind
        self.calls = 0
        self._real: dict[int, float] = {}
        self._keep: list = []  # keeps the functions alive so that their ids stay unique
        self._rng = random.Random(seed)

    def __call__(self, fn: Callable[[], object], device=None) -> float:
        self.calls += 1
        if id(fn) not in self._real:
            self._real[id(fn)] = max(wall_time(fn, device), 1e-6)
            self._keep.append(fn)
        real = self._real[id(fn)]
        if self.kind == "noise10":
            return real * 10 ** self._rng.uniform(-1.0, 1.0)
        if self.kind == "reversed":
            return 1e-6 / real
        if self.kind == "equal":
            return 1e-3
        if self.kind == "tiny":
            return real * 1e-7
        if self.kind == "huge":
            return real * 1e6
        return 0.0

    def __repr__(self) -> str:
        return f"FakeStopwatch({self.kind!r}, calls={self.calls})"


FAKE_KINDS = FakeStopwatch.KINDS
FAKE_TIMER_ENV = "SPECLAB_FAKE_TIMER"


def _stopwatch_from_env() -> Stopwatch:
    kind = os.environ.get(FAKE_TIMER_ENV, "").strip()
    if not kind:
        return wall_time
    if os.environ.get("NBGRADER_EXECUTION") is not None:  # grading always runs on the real clock
        warnings.warn(f"{FAKE_TIMER_ENV}={kind!r} ignored under the autograder", stacklevel=2)
        return wall_time
    return FakeStopwatch(kind)


_STOPWATCH: Stopwatch = _stopwatch_from_env()


def stopwatch() -> Stopwatch:
    """The stopwatch every timing in speclab uses now (``wall_time`` unless a test replaced it)."""
    return _STOPWATCH


def set_stopwatch(sw: Stopwatch | None = None) -> Stopwatch:
    """Make ``sw`` the stopwatch of every later timing (None: the one SPECLAB_FAKE_TIMER names, else
    ``wall_time``); returns the previous one. For executed notebooks; code prefers use_stopwatch."""
    global _STOPWATCH
    previous, _STOPWATCH = _STOPWATCH, _stopwatch_from_env() if sw is None else sw
    return previous


@contextmanager
def use_stopwatch(sw: Stopwatch):
    """Time with ``sw`` inside the ``with`` block (tests use it to feed adversarial timings)."""
    global _STOPWATCH
    previous, _STOPWATCH = _STOPWATCH, sw
    try:
        yield sw
    finally:
        _STOPWATCH = previous


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
    ``stopwatch`` overrides the module's stopwatch (the grader passes ``wall_time``).
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
    max_rounds = 10 * repeats if max_rounds is None else max(int(max_rounds), repeats)
    sw = _STOPWATCH if stopwatch is None else stopwatch
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
                times[i].append(_measure(fn, device, sw))
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
) -> Timing:
    """Median-of-repeats wall time of ``fn()`` after ``warmup`` discarded calls (see time_interleaved)."""
    return time_interleaved([fn], [label], repeats, warmup, device, progress, budget_s, max_rel_iqr)[0]


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


# ---------------------------------------------------------------------- copy bandwidth
def copy_bytes(numel: int, dtype: torch.dtype | None = None) -> int:
    """Bytes moved by ``dst.copy_(src)`` of ``numel`` elements: each is read once and written once."""
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    return 2 * numel * torch.empty((), dtype=torch.float32 if dtype is None else dtype).element_size()


@dataclass(frozen=True)
class Bandwidth:
    bytes_moved: int  # per copy: read + write
    timing: Timing

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_moved / self.timing.median


def copy_bandwidth(
    n_bytes: int = 64 * 2**20,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    repeats: int = 7,
    warmup: int = 2,
    budget_s: float = 0.0,
) -> Bandwidth:
    """Copy bandwidth: time ``dst.copy_(src)`` of a tensor of ``n_bytes`` (choose it well above
    the last-level cache, or the result is cache bandwidth) and count read + write bytes
    (dtype: default float32)."""
    dtype = torch.float32 if dtype is None else dtype
    element = torch.empty((), dtype=dtype).element_size()
    numel = n_bytes // element
    if numel < 1:
        raise ValueError(f"n_bytes={n_bytes} holds no element of {dtype}")
    src = torch.ones(numel, dtype=dtype, device=device)
    dst = torch.empty_like(src)
    timing = time_fn(lambda: dst.copy_(src), repeats, warmup, device, label=f"copy {n_bytes / 2**20:.0f} MiB",
                     budget_s=budget_s)
    return Bandwidth(copy_bytes(numel, dtype), timing)


# ------------------------------------------------------------------- matmul throughput
def matmul_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an [m, k] @ [k, n] product: m * n dot products of length k, a multiply and an add each."""
    if min(m, n, k) < 0:
        raise ValueError(f"matrix sizes must be >= 0, got m={m}, n={n}, k={k}")
    return 2 * m * n * k


@dataclass(frozen=True)
class Throughput:
    flops: int  # per call
    bytes_min: int  # the least a call must move: read both operands, write the result
    timing: Timing

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.timing.median

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte of compulsory traffic."""
        return self.flops / self.bytes_min


def matmul_throughput(
    m: int = 1024,
    n: int | None = None,
    k: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    repeats: int = 7,
    warmup: int = 2,
    budget_s: float = 0.0,
) -> Throughput:
    """FLOP/s of ``a @ b`` with a: [m, k], b: [k, n] (square when only m is given; dtype: default float32)."""
    dtype = torch.float32 if dtype is None else dtype
    n = m if n is None else n
    k = m if k is None else k
    if min(m, n, k) < 1:
        raise ValueError(f"matrix sizes must be >= 1, got m={m}, n={n}, k={k}")
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    timing = time_fn(lambda: torch.matmul(a, b, out=out), repeats, warmup, device, label=f"matmul {m}x{k}x{n} {dtype}",
                     budget_s=budget_s)
    element = a.element_size()
    return Throughput(matmul_flops(m, n, k), element * (m * k + k * n + m * n), timing)


def roofline(intensity, peak_flops: float, bytes_per_s: float):
    """Attainable FLOP/s at a given arithmetic intensity: min(peak, intensity * bandwidth)."""
    if peak_flops <= 0 or bytes_per_s <= 0:
        raise ValueError("peak_flops and bytes_per_s must be positive")
    import numpy as np

    return np.minimum(peak_flops, np.asarray(intensity, dtype=float) * bytes_per_s)


# ------------------------------------------------------------- bytes of a decode step
def param_count(cfg) -> int:
    """Parameters of speclab.model.GPT(cfg), counted from the configuration.

    embedding V*C (tied with the output head, stored once); per block two RMSNorm weights
    (2C), the fused qkv projection (3C*C), the output projection (C*C), the MLP
    (2 * mlp_ratio * C*C); the final RMSNorm (C).
    """
    C, V = cfg.d_model, cfg.vocab_size
    per_block = 2 * C + 3 * C * C + C * C + 2 * cfg.mlp_ratio * C * C
    return V * C + cfg.n_layer * per_block + C


def _matmul_params(cfg) -> int:
    """Weights used as a matrix in a matmul for every token: the blocks' linears and the tied head."""
    C, V = cfg.d_model, cfg.vocab_size
    return cfg.n_layer * (4 * C * C + 2 * cfg.mlp_ratio * C * C) + V * C


@dataclass(frozen=True)
class DecodeBytes:
    """Least bytes moved by one forward of T new tokens on a KV cache holding L positions."""

    weights: int  # every parameter read once
    kv_read: int  # keys and values of the L + T positions attended to, every layer
    kv_write: int  # keys and values of the T new positions, every layer

    @property
    def total(self) -> int:
        return self.weights + self.kv_read + self.kv_write


def _check_lengths(context_len: int, new_tokens: int, batch: int) -> None:
    if context_len < 0 or new_tokens < 1 or batch < 1:
        raise ValueError(
            f"need context_len >= 0, new_tokens >= 1, batch >= 1; got {context_len}, {new_tokens}, {batch}"
        )


def decode_step_bytes(
    cfg,
    context_len: int,
    new_tokens: int = 1,
    batch: int = 1,
    weight_bytes: int = 4,
    kv_bytes: int = 4,
) -> DecodeBytes:
    """Exact least traffic of one cached forward of ``new_tokens`` after ``context_len`` cached ones.

    weights: param_count(cfg) * weight_bytes (read once, whatever T and the batch are);
    KV read: 2 (K and V) * n_layer * batch * d_model * (L + T) * kv_bytes, since attention
    reads slots [0, L + T); KV write: 2 * n_layer * batch * d_model * T * kv_bytes.
    """
    _check_lengths(context_len, new_tokens, batch)
    per_position = 2 * cfg.n_layer * batch * cfg.d_model * kv_bytes  # K and V, all layers, all heads
    return DecodeBytes(
        weights=param_count(cfg) * weight_bytes,
        kv_read=per_position * (context_len + new_tokens),
        kv_write=per_position * new_tokens,
    )


def decode_step_flops(cfg, context_len: int, new_tokens: int = 1, batch: int = 1) -> int:
    """Matmul FLOPs of one cached forward: 2 per weight per token, plus attention.

    Attention per layer and token: q.k over L + T slots (2 C (L + T)) and the weighted sum
    of values (2 C (L + T)); the causal mask among the T new tokens is ignored (an upper
    bound by at most 2 C T per token). Norms, activations and softmax are left out.
    """
    _check_lengths(context_len, new_tokens, batch)
    tokens = batch * new_tokens
    attention = cfg.n_layer * 4 * cfg.d_model * (context_len + new_tokens)
    return tokens * (2 * _matmul_params(cfg) + attention)


# ------------------------------------------------------------------- forward timings
def forward_step_fns(
    model,
    new_tokens: Sequence[int],
    context_len: int = 128,
    batch: int = 1,
    seed: int = 0,
) -> dict[int, Callable[[], object]]:
    """Closures, one per T in ``new_tokens``, each running one cached forward of T new tokens
    after ``context_len`` cached tokens (rolling the cache back first, O(1)).

    The cache is filled once with random tokens, so every call sees the same context and
    writes the same slots. Use with ``time_interleaved`` to time several models in one run.
    """
    sizes = [int(t) for t in new_tokens]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"new_tokens must be a non-empty list of ints >= 1, got {new_tokens!r}")
    if context_len < 1:
        raise ValueError(f"context_len must be >= 1 (the cache is filled first), got {context_len}")
    capacity = context_len + max(sizes)
    if capacity > model.cfg.max_len:
        raise ValueError(f"context_len + max(new_tokens) = {capacity} exceeds the model's max_len {model.cfg.max_len}")
    device = model.device
    gen = torch.Generator().manual_seed(seed)
    vocab = model.cfg.vocab_size
    context = torch.randint(vocab, (batch, context_len), generator=gen).to(device)
    cache = model.new_cache(batch=batch, max_len=capacity)
    with torch.inference_mode():
        model(context, torch.arange(context_len, device=device), cache)
    blocks = {t: torch.randint(vocab, (batch, t), generator=gen).to(device) for t in sizes}
    positions = {t: torch.arange(context_len, context_len + t, device=device) for t in sizes}

    def step(t: int) -> Callable[[], object]:
        @torch.inference_mode()
        def run():
            cache.rollback(context_len)
            return model(blocks[t], positions[t], cache)

        return run

    return {t: step(t) for t in sizes}


def forward_times(
    model,
    new_tokens: Sequence[int],
    context_len: int = 128,
    batch: int = 1,
    repeats: int = 7,
    warmup: int = 2,
    seed: int = 0,
    progress: bool | None = None,
    budget_s: float = 0.0,
    max_rel_iqr: float = MAX_REL_IQR,
) -> dict[int, Timing]:
    """Wall time of one cached forward of T new tokens after ``context_len`` cached tokens,
    for every T in ``new_tokens``, interleaved in one run.

    T = 1 is a decode step; T = k + 1 is the verification of k drafted tokens. ``budget_s`` and
    ``max_rel_iqr`` are the self-check of ``time_interleaved``; pass the result to
    ``quality_note`` to flag a larger T measured faster than a smaller one.
    """
    fns = forward_step_fns(model, new_tokens, context_len, batch, seed)
    timings = time_interleaved(list(fns.values()), [f"T={t}" for t in fns], repeats, warmup, model.device, progress,
                               budget_s, max_rel_iqr)
    return dict(zip(fns, timings))
