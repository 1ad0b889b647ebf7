"""What protects a graded cell from the student's code that ran before it, in one process.

Used by the two runners that execute a notebook inside the student's sandbox: the clean
re-check (`recheck.py`) and the verdict's harness (`harness.py`). Both import the modules
a graded cell relies on, `snapshot` them BEFORE any student code runs, and `restore` them
right before every graded test cell: module dicts, Python functions' code and defaults,
Python classes' attributes, sys.modules, sys.path, import hooks and builtins. A cell runs
under `cell_timer` (SIGALRM raising `CellTimeout`, a BaseException a cell cannot catch by
`except Exception`), with `Shell` standing in for get_ipython() (magics and shell escapes
do nothing).

Limit: an in-process defence; code written to attack the runner itself (frame or ctypes
tricks) is out of its scope. That is why the grader keeps the lower of every opinion.
"""
from __future__ import annotations

import builtins
import signal
import sys
import types
from contextlib import contextmanager

from .clock import process_clock


def snapshot(prefixes: tuple[str, ...]):
    mods = {n: m for n, m in sys.modules.items() if n.split(".")[0] in prefixes}
    dicts = {n: dict(vars(m)) for n, m in mods.items()}
    funcs, classes = [], []
    for n, m in mods.items():
        for obj in list(vars(m).values()):
            if isinstance(obj, types.FunctionType) and obj.__module__ and obj.__module__.split(".")[0] in prefixes:
                funcs.append((obj, obj.__code__, obj.__defaults__, obj.__kwdefaults__))
            elif isinstance(obj, type) and obj.__module__.split(".")[0] in prefixes:
                try:
                    classes.append((obj, dict(vars(obj))))
                except TypeError:
                    pass
    return (mods, dicts, funcs, classes, list(sys.path), list(sys.meta_path), list(sys.path_hooks),
            dict(vars(builtins)), prefixes)


def restore(snap) -> None:
    mods, dicts, funcs, classes, path, meta, hooks, bdict, prefixes = snap
    for name in [n for n in sys.modules if n.split(".")[0] in prefixes and n not in mods]:
        del sys.modules[name]
    sys.modules.update(mods)
    for n, m in mods.items():
        d = vars(m)
        d.clear()
        d.update(dicts[n])
    for fn, code, defaults, kwdefaults in funcs:
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults
    for cls, attrs in classes:
        for key in [k for k in vars(cls) if k not in attrs]:
            try:
                delattr(cls, key)
            except (AttributeError, TypeError):
                pass
        for key, val in attrs.items():
            if key in ("__dict__", "__weakref__") or vars(cls).get(key) is val:
                continue
            try:
                setattr(cls, key, val)
            except (AttributeError, TypeError):
                pass
    sys.path[:], sys.meta_path[:], sys.path_hooks[:] = path, meta, hooks
    b = vars(builtins)
    b.clear()
    b.update(bdict)


class Shell:
    """Stand-in for get_ipython(): magics and shell escapes do nothing."""

    def __getattr__(self, name):
        return lambda *a, **k: None


class CellTimeout(BaseException):
    pass


_LIMIT = None  # the running cell's limit (clock.Limit), read by the alarm


def _alarm(signum, frame):
    left = _LIMIT.left() if _LIMIT is not None else 0.0
    if left > 0.01:  # the process waited for a core meanwhile: the limit counts its own time (clock.py)
        signal.setitimer(signal.ITIMER_REAL, left)
        return
    raise CellTimeout()


@contextmanager
def cell_timer(seconds: float):
    """Raise CellTimeout in the code run inside once `seconds` of this process's own time have passed:
    wall time less the time its threads were ready to run but waited for a core
    (autograder/inside/clock.py), and at most (1 + clock.STRETCH) times `seconds` of wall time."""
    global _LIMIT
    outer = _LIMIT
    _LIMIT = process_clock().limit(seconds)
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _LIMIT = outer
