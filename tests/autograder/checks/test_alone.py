"""Checks overlap in the grader, and the sections that must not overlap anything run alone
(autograder/checks/alone.py)."""
from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import pytest

from autograder.checks.alone import Sections

CHECKS = Path(__file__).resolve().parents[3] / "autograder" / "checks"


class Tally:
    """Who is inside: the number of threads in a shared section, and whether one is alone."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shared = self.alone = 0
        self.most_shared = 0
        self.overlaps: list[str] = []

    def enter(self, kind: str) -> None:
        with self.lock:
            if kind == "alone":
                if self.shared or self.alone:
                    self.overlaps.append(f"alone entered with {self.shared} shared, {self.alone} alone")
                self.alone += 1
            else:
                if self.alone:
                    self.overlaps.append("shared entered while one was alone")
                self.shared += 1
                self.most_shared = max(self.most_shared, self.shared)

    def leave(self, kind: str) -> None:
        with self.lock:
            if kind == "alone":
                self.alone -= 1
            else:
                self.shared -= 1


def _check(sections: Sections, tally: Tally, timed: bool, pause: float) -> None:
    """What run_check does: a shared section for the whole check, and inside it maybe a timed one."""
    with sections.shared():
        tally.enter("shared")
        time.sleep(pause)
        if timed:
            tally.leave("shared")  # inside alone() this thread no longer counts as sharing
            with sections.alone():
                tally.enter("alone")
                time.sleep(pause)
                tally.leave("alone")
            tally.enter("shared")
        time.sleep(pause)
        tally.leave("shared")


def test_checks_overlap_and_alone_sections_do_not():
    sections, tally = Sections(), Tally()
    threads = [threading.Thread(target=_check, args=(sections, tally, i % 3 == 0, 0.01 + 0.003 * (i % 4)))
               for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread never finished: deadlock"
    assert tally.overlaps == []
    assert tally.most_shared >= 2  # checks did run side by side
    assert sections.state() == (0, False, 0)


def test_two_checks_asking_to_be_alone_at_once_do_not_deadlock():
    sections = Sections()
    inside = threading.Barrier(2)
    order: list[str] = []

    def check(name: str) -> None:
        with sections.shared():
            inside.wait(timeout=10)  # both hold shared(), then both ask to be alone
            with sections.alone():
                order.append(name)
                time.sleep(0.02)

    threads = [threading.Thread(target=check, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    assert sorted(order) == ["a", "b"]


def test_a_waiting_alone_section_holds_back_new_checks():
    sections = Sections()
    first_in, release = threading.Event(), threading.Event()
    events: list[str] = []

    def long_check():
        with sections.shared():
            first_in.set()
            release.wait(timeout=10)
            events.append("long check done")

    def timed():
        with sections.alone():
            events.append("timed")

    def late_check():
        with sections.shared():
            events.append("late check")

    a = threading.Thread(target=long_check)
    a.start()
    assert first_in.wait(10)
    b = threading.Thread(target=timed)
    b.start()
    while sections.state()[2] == 0:  # the timed section is waiting
        time.sleep(0.001)
    c = threading.Thread(target=late_check)
    c.start()
    time.sleep(0.05)
    assert events == []  # neither the timed section nor the late check got in
    release.set()
    for t in (a, b, c):
        t.join(timeout=10)
    assert events == ["long check done", "timed", "late check"]


def _inside_alone(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.With) and any(isinstance(i.context_expr, ast.Call) and getattr(
                i.context_expr.func, "id", getattr(i.context_expr.func, "attr", "")) == "alone" for i in node.items):
            return True
    return False


@pytest.mark.parametrize("path", sorted(CHECKS.glob("*.py")), ids=lambda p: p.name)
def test_every_read_of_process_wide_state_is_alone(path):
    """A check that compares the global random generators, or times, does it inside alone()."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "attr", getattr(n.func, "id", "")) in ("get_state", "get_rng_state", "_lock_file")]
    outside = [f"line {n.lineno}" for n in reads if not _inside_alone(n, parents)]
    assert outside == [], f"{path.name}: process-wide state read outside alone(): {outside}"


def test_the_scan_sees_a_read_outside_alone(tmp_path):
    """The scan above can fail: a contract check comparing the global state without alone()."""
    src = "import numpy as np\n\ndef check(f):\n    before = np.random.get_state()\n    f()\n    return before\n"
    tree = ast.parse(src)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "get_state"]
    assert reads and not any(_inside_alone(n, parents) for n in reads)
    wrapped = "import numpy as np\n\ndef check(f):\n    with alone():\n        before = np.random.get_state()\n"
    tree = ast.parse(wrapped)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "get_state"]
    assert all(_inside_alone(n, parents) for n in reads)


def test_a_check_waiting_for_its_sandbox_does_not_hold_back_a_timed_section():
    sections = Sections()
    waiting, answered, timed_done = threading.Event(), threading.Event(), threading.Event()
    events: list[str] = []

    def check_waiting_on_sandbox():
        with sections.shared():
            with sections.released():  # what Harness._exchange does around the round trip
                waiting.set()
                answered.wait(timeout=10)
            events.append("check resumed")  # only once the timed section has left

    def timed():
        with sections.alone():
            events.append("timed")
            answered.set()  # the other student's sandbox answers while this section is alone
            time.sleep(0.05)
            events.append("timed done")
        timed_done.set()

    a = threading.Thread(target=check_waiting_on_sandbox)
    a.start()
    assert waiting.wait(10)
    b = threading.Thread(target=timed)
    b.start()
    for t in (a, b):
        t.join(timeout=10)
    assert not any(t.is_alive() for t in (a, b))
    assert events == ["timed", "timed done", "check resumed"]
    assert sections.state() == (0, False, 0)


def test_nothing_is_released_inside_alone():
    """A timed call's round trip stays alone: released() inside alone() gives nothing up."""
    sections = Sections()
    with sections.shared():
        with sections.alone():
            with sections.released():
                assert sections.state() == (0, True, 0)
        assert sections.state() == (1, False, 0)
