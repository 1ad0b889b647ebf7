"""Many calls of a student's function, in one go when the function lives in the grading sandbox.

A statistical check calls the student's sampler tens of thousands of times. Inside a notebook
that is a plain loop; in the grader's own verdict (autograder/pipeline/judge.py) the student's
function runs in a sandboxed process, and one round trip per call cost about 0.6 ms, more
than the sampler itself. `call_each` gives the checks one way to write the loop: the
verdict's stand-in sends the whole list in one message and gets the results in one answer.

The semantics are those of the loop, in both places:
- calls run in order; the first exception stops them and is raised;
- every numpy array or torch tensor argument is a fresh copy for each call (what one call
  does to its input cannot change the next call's);
- every other argument (a random generator above all) is the same object in every call, so
  a generator advances call after call, and the caller's generator ends where the last
  call left it;
- the keyword arguments, if any, are the same for every call.
"""
from __future__ import annotations

import sys
from typing import Callable, Sequence

import numpy as np

BATCH_METHOD = "speclab_call_each"  # the method a stand-in for a sandboxed function defines


def fresh(a):
    """A copy of an array or tensor argument; anything else as it is."""
    if isinstance(a, np.ndarray):
        return a.copy()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return a.clone()
    return a


def call_each(fn: Callable, calls: Sequence[tuple], **kwargs) -> list:
    """[fn(*args, **kwargs) for args in calls], with the semantics above."""
    batch = getattr(type(fn), BATCH_METHOD, None)  # only the verdict's stand-in class defines it
    if batch is not None:
        return list(batch(fn, list(calls), kwargs))
    return [fn(*[fresh(a) for a in args], **{k: fresh(v) for k, v in kwargs.items()}) for args in calls]
