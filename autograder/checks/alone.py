"""Checks side by side in one grader process, and the sections of a check that must run alone.

The pipeline grades each student in a grader process of its own (autograder/pipeline/grade.py), so the
sections below are alone among that student's checks; a process may still run checks in several
threads (an audit, a test), and a notebook runs them in its kernel. Most of a check is waiting for the
student's sandbox to answer, so two checks may overlap: each holds `SECTIONS.shared()` for its whole
run. Two kinds of section may not overlap anything:

- a timed section (autograder/checks/timing.py): another thread holding the GIL while a
  baseline is timed would slow the baseline, not the student;
- a section that reads process-wide state to judge the student, e.g. "the global random
  generators did not move" (lab1.check_randomness_contract, lab2.check_sampling_contracts):
  another check seeding torch's global generator (speclab.toy.toy_model) would move it.

Such a section is written `with alone():`. It waits until no other thread's check is running
grader-side code (a thread that holds `shared()` itself gives it up while it waits, so two
threads asking at once cannot deadlock), and no check runs grader-side code while it waits or
runs. A check waiting for its student's sandbox to answer (autograder/pipeline/judge.py) does not
count: it gives its share up for the wait (`released()`). In a notebook, where no grader shares the
process, `alone()` costs one uncontended lock.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["Sections", "SECTIONS", "alone", "released", "shared"]


class Sections:
    """A shared/exclusive lock that favours the exclusive side (a waiting section goes next)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0  # threads inside shared() and not inside alone()
        self._alone = False
        self._waiting = 0  # threads waiting to be alone
        self._mine = threading.local()  # how deep this thread is in shared()

    def _depth(self) -> int:
        return getattr(self._mine, "depth", 0)

    @contextmanager
    def shared(self) -> Iterator[None]:
        if self._depth():  # already shared by this thread: nested
            self._mine.depth += 1
            try:
                yield
            finally:
                self._mine.depth -= 1
            return
        with self._cond:
            while self._alone or self._waiting:
                self._cond.wait()
            self._shared += 1
        self._mine.depth = 1
        try:
            yield
        finally:
            self._mine.depth = 0
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        if getattr(self._mine, "alone", False):  # nested in this thread's own alone(): already alone
            yield
            return
        gave_up = self._depth() > 0
        with self._cond:
            if gave_up:
                self._shared -= 1
                self._cond.notify_all()
            self._waiting += 1
            try:
                while self._alone or self._shared:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._alone = True
        self._mine.alone = True
        try:
            yield
        finally:
            self._mine.alone = False
            with self._cond:
                self._alone = False
                if gave_up:  # back to where this thread was: inside its shared() section
                    self._shared += 1
                self._cond.notify_all()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Inside shared(): give it up while this thread waits on another process (the student's
        sandbox computing an answer) and take it back afterwards, waiting while a section is alone
        or waiting to be. So a timed section waits only for the grader-side work of other checks,
        never for their students' code. Nothing is given up inside alone(): a timed call's round
        trip stays alone."""
        if not self._depth() or getattr(self._mine, "alone", False):
            yield
            return
        with self._cond:
            self._shared -= 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                while self._alone or self._waiting:
                    self._cond.wait()
                self._shared += 1

    def state(self) -> tuple[int, bool, int]:
        """(threads sharing, a thread alone, threads waiting to be alone): for tests."""
        with self._cond:
            return self._shared, self._alone, self._waiting


SECTIONS = Sections()
alone = SECTIONS.alone
shared = SECTIONS.shared
released = SECTIONS.released
