"""uid mode (autograder/sandbox/bwrap.py), for containers where no bubblewrap can start: each student's
code runs under a uid of its own with no capabilities and the grader's limits, and the grader's files
are kept from it by their permissions (policy.lock_down). Real processes, each written as a hostile
student would, checked from outside. Needs root (uid mode does); a grader without root has no uid mode.

What uid mode does not give, and these tests do not claim: a private network, /tmp or process table
(the container is the wall between students on Gradescope, one submission per container).
"""
from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.sandbox import Limits, lock_down
from autograder.sandbox import bwrap as sandbox
import detaching
from load import scaled

LIMITS = Limits(notebook_timeout_s=30, memory_mb=1024, file_mb=5, processes=64, tmp_mb=64)
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uid mode needs a grader running as root")


@pytest.fixture
def uid_mode():
    caps = sandbox.capabilities("uid")
    assert caps.ok and caps.mode == "uid", caps.missing
    return caps


@pytest.fixture
def course(tmp_path):
    """A course (code readable, solutions not), a grading output with a result, two students' scratch."""
    root = tmp_path / "course"
    (root / "speclab").mkdir(parents=True)
    (root / "speclab" / "__init__.py").write_text("X = 1\n")
    (root / "solutions" / "lab1").mkdir(parents=True)
    (root / "solutions" / "lab1" / "lab1.md").write_text("THE ANSWER\n")
    (root / "submissions" / "classmate").mkdir(parents=True)
    (root / "submissions" / "classmate" / "lab1.ipynb").write_text("{}")
    out = root / "grading"
    (out / "results").mkdir(parents=True)
    (out / "results" / "other.json").write_text('{"score": 1}')
    (out / "grades.csv").write_text("student,score\n")
    return root


class Student:
    def __init__(self, out: Path, name: str, slot: int, caps):
        self.scratch = out / "work" / name
        self.scratch.mkdir(parents=True)
        self.uid, self.caps = sandbox.student_uid(slot), caps

    def run(self, code: str, limits: Limits = LIMITS, timeout: float = 30, **env):
        (self.scratch / "student.py").write_text(textwrap.dedent(code))
        sandbox.give_to(self.scratch, self.uid, self.caps)
        return sandbox.run([sys.executable, str(self.scratch / "student.py")], self.scratch, self.scratch,
                           sandbox.minimal_env(self.scratch, **env), timeout, limits, uid=self.uid, caps=self.caps,
                           log_path=self.scratch.parent / f"{self.scratch.name}.log")


@pytest.fixture
def students(tmp_path, course, uid_mode):
    out = course / "grading"
    a, b = Student(out, "alice", 5, uid_mode), Student(out, "bob", 6, uid_mode)
    for s in (a, b):
        s.run("pass")
    lock_down(out, course, course / "submissions", [course / "speclab", *sandbox.python_paths(), a.scratch, b.scratch])
    yield a, b
    for s in (a, b):
        assert sandbox.processes_of(s.uid) == [], "a process of the student outlived its run"


def test_own_uid_no_capabilities_and_a_cleared_environment(students, monkeypatch):
    monkeypatch.setenv("GRADER_SECRET_TOKEN", "hunter2")
    a, _ = students
    res = a.run("""
        import os
        print("UID", os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
        print([l for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))])
        print("TOKEN" if "GRADER_SECRET_TOKEN" in os.environ else "no token")
    """)
    assert res.returncode == 0, res.log
    assert f"UID {a.uid} {a.uid} {a.uid} []" in res.log
    assert "CapEff:\\t0000000000000000" in res.log and "CapBnd:\\t0000000000000000" in res.log
    assert "no token" in res.log


def test_the_grader_s_secrets_and_classmates_unreadable_the_code_readable(students, course):
    a, b = students
    (b.scratch / "answers.py").write_text("bob's work\n")
    sandbox.give_to(b.scratch, b.uid, a.caps)
    res = a.run(f"""
        import sys
        sys.path.insert(0, {str(course)!r})
        import speclab
        print("CODE", speclab.X)
        for path in {[str(course / "solutions" / "lab1" / "lab1.md"), str(course / "submissions" / "classmate" / "lab1.ipynb"),
                      str(course / "grading" / "results" / "other.json"), str(course / "grading" / "grades.csv"),
                      str(b.scratch / "answers.py")]!r}:
            try:
                print("READ", path, open(path).read())
            except OSError as err:
                print("unreadable", err.strerror)
    """)
    assert res.returncode == 0, res.log
    assert "CODE 1" in res.log and "READ" not in res.log and res.log.count("unreadable") == 5


def test_the_grader_s_files_cannot_be_written_or_replaced(students, course):
    a, _ = students
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file() and "work" not in p.parts}
    res = a.run(f"""
        import os
        targets = {[str(course / "speclab" / "__init__.py"), str(course / "grading" / "results.json"),
                    str(course / "grading" / "work" / "results.json"), str(course / "speclab" / "evil.py")]!r}
        for t in targets:
            try:
                open(t, "w").write("forged")
                print("WROTE", t)
            except OSError as err:
                print("refused", err.strerror)
        try:
            os.rename({str(course / "speclab")!r}, {str(course / "gone")!r})
            print("MOVED")
        except OSError as err:
            print("refused", err.strerror)
    """)
    assert res.returncode == 0, res.log
    assert "WROTE" not in res.log and "MOVED" not in res.log and res.log.count("refused") == 5
    assert {p: p.read_bytes() for p in course.rglob("*") if p.is_file() and "work" not in p.parts} == before


def test_detached_processes_are_killed_by_uid(students):
    a, _ = students
    res = a.run(detaching.PROGRAM)
    assert res.returncode == 0, res.log
    assert sandbox.processes_of(a.uid) == []
    detaching.assert_none_left_writing(a.scratch, res.log)


def test_limits_hold_processes_memory_files_and_time(students):
    a, _ = students
    res = a.run("""
        import os
        n = 0
        try:
            for _ in range(500):
                if os.fork() == 0:
                    import time; time.sleep(5); os._exit(0)
                n += 1
        except OSError:
            pass
        print("FORKED", n)
        try:
            b = bytearray(4 << 30)
            print("ALLOCATED")
        except MemoryError:
            print("no memory")
        try:
            open("big", "wb").write(b"z" * (20 << 20))
            print("BIG FILE")
        except OSError as err:
            print("capped", err.strerror)
    """)
    assert res.returncode == 0, res.log
    forked = int(res.log.split("FORKED")[1].split()[0])
    assert forked < LIMITS.processes and "ALLOCATED" not in res.log and "no memory" in res.log
    assert "BIG FILE" not in res.log and "File too large" in res.log
    t0 = time.perf_counter()
    res = a.run("import time\nwhile True:\n    time.sleep(1)\n", timeout=2)
    assert res.timed_out and time.perf_counter() - t0 < 2 + scaled(12)
