"""A grading step in a grader process of its own (autograder/pipeline/spawn.py): the steps it may run are
named, one by one. The processes themselves are started by every class graded in
tests/autograder/pipeline/test_grade.py and test_isolation.py."""
from __future__ import annotations

import pytest

from autograder.pipeline import grade, spawn
from autograder.pipeline.config import Config


def test_the_steps_are_grade_s_own():
    assert spawn.STEPS == {"grade_untimed": grade.grade_untimed, "time_student": grade.time_student}


@pytest.mark.parametrize("what", ["grade_class", "globals", "in_own_process"])
def test_no_other_name_starts_a_process(tmp_path, what):
    with pytest.raises(ValueError, match="no grading step"):
        spawn.in_own_process(what, Config("lab1", tmp_path, tmp_path), {}, "ada", tmp_path, 0, b"k", limit_s=5)


def test_a_grader_process_passes_over_stop_signals_and_what_it_starts_does_not():
    """A grader process lets SIGINT and SIGTERM pass (the class process stops it), and a program it starts (the
    student's kernel, its helpers) gets the default: SIGTERM ends it. With SIG_IGN, the program would inherit it."""
    import signal
    import subprocess
    import sys

    code = ("import os, signal, subprocess, sys\n"
            "from autograder.pipeline.spawn import pass_over_stop_signals\n"
            "pass_over_stop_signals()\n"
            "os.kill(os.getpid(), signal.SIGTERM)  # passed over\n"
            "child = subprocess.run(['grep', '^SigIgn', '/proc/self/status'], capture_output=True, text=True)\n"
            "print(int(child.stdout.split()[1], 16))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ignored = int(out.stdout.strip())
    assert not ignored & (1 << (signal.SIGTERM - 1)) and not ignored & (1 << (signal.SIGINT - 1)), hex(ignored)


# what a grader process must find imported: PRELOAD, and the server extensions nbgrader's API imports with it
PRELOADED = sorted(spawn.PRELOAD + ["nbgrader.server_extensions.formgrader"])


def _what_a_grader_process_finds(send) -> None:
    import os
    import sys
    import threading

    send.send({"parent": os.getppid(), "threads": threading.active_count(),
               "imported": [m for m in PRELOADED if m in sys.modules]})
    send.close()


def test_a_grader_process_comes_from_the_fork_server_with_the_grader_imported():
    """Every grader process is forked from one fork server, not from the class process (whose threads a fork
    would copy mid-flight), and starts with PRELOAD imported: nbgrader's API (and the server extensions it
    imports) is imported once per run, not once per student (about a second of CPU each)."""
    import os

    ctx = spawn._context()
    found = []
    for _ in range(2):
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_what_a_grader_process_finds, args=(send,))
        proc.start()
        send.close()
        found.append(receive.recv())
        proc.join(30)
        assert proc.exitcode == 0
    assert found[0]["parent"] != os.getpid() and found[0]["parent"] == found[1]["parent"], found  # one server
    assert found[0]["threads"] == 1, found
    assert found[0]["imported"] == PRELOADED, found
