"""The clock every timing in speclab reads: one stopwatch seam, the device it waits for.

Notation: see the `speclab` package docstring.

`stopwatch()(fn, device)` calls fn once and returns its duration in seconds. The real one,
`wall_time`, synchronises the device before and after (kernel launches return before the
kernel has run); tests replace it with adversarial fakes (`FakeStopwatch`), in-process with
`use_stopwatch()` or, for executed notebooks, through SPECLAB_FAKE_TIMER=<kind>. Grading always
runs on the real clock.

Timing numpy code (Lab 1) never imports torch: it is imported on first use (`lazy_torch`).
`speclab.timing` builds repeated timings on this clock; `speclab.measure` re-exports both.
"""

from __future__ import annotations

import os
import platform
import random
import sys
import time
import warnings
from contextlib import contextmanager
from typing import Callable

class _LazyTorch:
    """`torch`, imported on first use; the first attribute read replaces this stand-in by the real
    module in the namespace that holds it, so later uses go straight to torch."""

    def __init__(self, namespace: dict) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str):
        import torch as real

        self._namespace["torch"] = real
        return getattr(real, name)


def lazy_torch(namespace: dict) -> _LazyTorch:
    """A stand-in for `torch` in the module whose globals() are `namespace` (speclab.measure uses it too)."""
    return _LazyTorch(namespace)


torch = lazy_torch(globals())

__all__ = [
    "CLOCK_RESOLUTION_S",
    "Stopwatch",
    "wall_time",
    "cpu_time",
    "real_clock",
    "FakeStopwatch",
    "FAKE_KINDS",
    "FAKE_TIMER_ENV",
    "stopwatch",
    "use_stopwatch",
    "set_stopwatch",
    "device_name",
    "synchronize",
]

# A timing a clock cannot resolve is reported as the clock's resolution, never as 0, so that
# every rate (bytes / time) and ratio computed from timings is finite.
CLOCK_RESOLUTION_S = max(time.get_clock_info("perf_counter").resolution, 1e-9)


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


def cpu_time(fn: Callable[[], object], device=None, read: Callable[[], float] = time.process_time) -> float:
    """The real stopwatch of a CPU speed test: the CPU seconds this process worked during fn (every thread
    of it, `time.process_time`; `read` names another counter of CPU seconds). What the code worked, not how
    long it waited for a core: another busy process on the machine changes it little, where it stretches
    the wall clock. On a GPU, where work is queued and waited for, use `wall_time`."""
    synchronize(device)
    start = read()
    fn()
    synchronize(device)
    return read() - start


# glibc's allocator, held at the thresholds it moves to by itself once a process frees a large block (its dynamic
# maxima on 64-bit): blocks under 32 MB come from the heap, and up to 64 MB freed at the heap's top is kept.
# Before that point, and wherever a process's history drops it back, a timed call that builds large arrays
# page-faults them in afresh every time; measured on Lab 1's timed call, 359-718 faults per call, 1-3 ms of 10.
MALLOC_MMAP_THRESHOLD, MALLOC_TRIM_THRESHOLD = 32 << 20, 64 << 20
GLIBC_TUNABLES = (f"glibc.malloc.mmap_threshold={MALLOC_MMAP_THRESHOLD}:"
                  f"glibc.malloc.trim_threshold={MALLOC_TRIM_THRESHOLD}")  # the same, for a process to be started


def steady_allocator() -> bool:
    """Hold this process's glibc allocator at MALLOC_MMAP_THRESHOLD and MALLOC_TRIM_THRESHOLD (`mallopt`), so that
    a speed test times the code and not the state its allocator happens to be in. The speed tests call it in the
    process they run in (a notebook's kernel); the grader's sandbox starts the student's process with the same
    setting (GLIBC_TUNABLES). Costs at most 64 MB of freed memory kept. False where there is no glibc (macOS,
    musl): nothing changes there."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    return bool(mallopt(m_mmap_threshold, MALLOC_MMAP_THRESHOLD)) and \
        bool(mallopt(m_trim_threshold, MALLOC_TRIM_THRESHOLD))


def real_clock(device=None) -> Stopwatch:
    """The real stopwatch for timing code on `device`: `cpu_time` on a CPU (or None: numpy code), else
    `wall_time` (the device synchronised)."""
    kind = getattr(device, "type", device)
    return cpu_time if kind in (None, "cpu") else wall_time


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


