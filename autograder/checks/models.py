"""Objects a check hands to a student's function that cannot travel as data (models), rebuilt on the
student's side from the course's own code.

A lab's checks module declares each such factory with `@rebuildable`: a function of ints and strings
that returns a tuple of objects, the same on both sides (a pair of models loaded from the shipped
weights, a toy pair built from a seed). In the grader (autograder/pipeline/judge.py, once `record()`
was called), every object such a call returns is noted with its reference, [module, function, args,
index]; the wire (autograder/inside/wire.py) sends the reference instead of the object, and the
student's harness rebuilds it with `rebuild`, which calls only functions declared here. A lab without
models declares nothing and pays nothing.
"""
from __future__ import annotations

import functools
import importlib
from typing import Callable

_REFERENCES: dict[int, tuple[object, list]] = {}  # id -> (object, reference); the object is kept alive
_RECORDING = [False]  # whether this process notes what the factories return (the grader's only)


def record() -> dict[int, tuple[object, list]]:
    """Note from now on what every rebuildable factory returns in this process; the table of notes
    (id of an object -> (object, reference)), which the wire's `encode` reads."""
    _RECORDING[0] = True
    return _REFERENCES


def rebuildable(fn: Callable) -> Callable:
    """Declare fn (module-level, ints and strings in, a tuple out) a factory both sides can call."""

    @functools.wraps(fn)
    def factory(*args):
        out = fn(*args)
        if _RECORDING[0] and all(isinstance(a, (int, str)) for a in args):
            for i, obj in enumerate(out):
                _REFERENCES[id(obj)] = (obj, [fn.__module__, fn.__name__, list(args), i])
        return out

    factory.rebuildable = True
    return factory


class UnknownReference(ValueError):
    """A reference that names no factory declared with `rebuildable`."""


def rebuild(ref) -> object:
    """The object a reference [module, function, args, index] names: module.function(*args)[index],
    only for a factory of the course's checks declared with `rebuildable`."""
    mod, name, args, index = ref
    if not (isinstance(mod, str) and mod.startswith("autograder.checks.") and isinstance(name, str)):
        raise UnknownReference(f"unknown reference {mod!r}.{name!r}")
    fn = getattr(importlib.import_module(mod), name, None)
    if not getattr(fn, "rebuildable", False) or not all(isinstance(a, (int, str)) for a in args):
        raise UnknownReference(f"unknown reference {mod!r}.{name!r}")
    return fn(*args)[index]
