"""The grading run's key: hidden inputs that no file in the sandbox holds.

The checks' designs (which pairs, how many draws, which eps) are public: they are in this package,
which the sandbox can read, and the power report is computed from them. What a notebook must not
know in advance is the *instance*: the seed of each statistical check and the labelling of each
pair's tokens. Outside the grader (a student's own run of a hidden cell, a plain `nbgrader
autograde`, the test suite) there is no key and every check uses its fixed seed and the pairs as
written. In the grading pipeline, the grader's own process draws a key per run
(`new_key`), derives one per student (`student_key`) and runs each check under it (`keyed`,
autograder/pipeline/judge.py); the key never enters the sandbox, so the seeds and relabellings
are unknown to the student's code until its functions are called with them.

A relabelling (a permutation of the vocabulary applied to p and q together) changes no design
figure: the distance tests and their thresholds do not depend on the order of the outcomes, and a
correct sampler's law on the relabelled pair is the relabelled law. Notation: see the `speclab`
package docstring.
"""
from __future__ import annotations

import contextvars
import hashlib
import secrets
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from .scoped import bound

# Per thread (the grader judges students in threads): a new thread starts without a key.
_KEY: contextvars.ContextVar[bytes | None] = contextvars.ContextVar("speclab_grading_key", default=None)


def new_key() -> bytes:
    """A fresh key for one grading run (from the operating system's random source)."""
    return secrets.token_bytes(32)


def student_key(run_key: bytes, student: str) -> bytes:
    """The key of one student's checks in a run: students never share an instance."""
    return hashlib.blake2b(student.encode("utf-8"), key=run_key, digest_size=32).digest()


@contextmanager
def keyed(key: bytes | None) -> Iterator[None]:
    """Run the checks inside the block on the instance that key draws (None: the fixed one)."""
    with bound(_KEY, key):
        yield


def active() -> bool:
    return _KEY.get() is not None


def seed(label: str, fixed: int) -> int:
    """The seed of the check called `label`: `fixed` without a key, else a 63-bit number drawn from the key."""
    key = _KEY.get()
    if key is None:
        return fixed
    digest = hashlib.blake2b(label.encode("utf-8"), key=key, digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def relabelling(label: str, vocab: int) -> np.ndarray:
    """The permutation perm of range(vocab) applied to the pair called `label` (new token i is old token
    perm[i]): the identity without a key."""
    if _KEY.get() is None:
        return np.arange(vocab)
    return np.random.default_rng(seed(f"relabel {label}", 0)).permutation(vocab)
