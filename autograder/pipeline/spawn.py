"""A grading step of one student in a grader process of its own (`in_own_process`).

A class run (schedule.py) grades each student's untimed checks, then its timed ones, each in a process
started fresh (not forked from the threaded class process): a check the student's code stalls, or the
memory it takes, stalls or takes only that process. The run's settings, its hidden-input key among them,
travel through the pipe, never a file. A process still running after its limit is killed, with every
process of the student.

A run told to stop (SIGTERM, SIGINT: `stopping`, installed by schedule.grade_class) sets STOP: every step in
flight kills its grader process (and every process of its student) within POLL_S and raises Stopped, which
records nothing for that student, so the next run grades it afresh. Grader processes let SIGINT and SIGTERM
pass (a terminal's Ctrl-C reaches the whole process group): the class process decides.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from autograder.sandbox import bounds as bounds_

from . import cleanup, grade, results
from .collect import submission_hash
from .config import Config

# the steps a grader process may run, by the name the class process sends
STEPS = {"grade_untimed": grade.grade_untimed, "time_student": grade.time_student}
STOP = threading.Event()  # set when the run is told to stop; cleared when a run starts
POLL_S = 0.5  # how often a waiting step looks at STOP


class Stopped(BaseException):
    """The run was told to stop (a BaseException, so that no `except Exception` records a failed result)."""


@contextmanager
def stopping():
    """For the block (a class run, in the main thread): SIGTERM and SIGINT set STOP and raise Stopped, so the
    steps in flight are killed and cleaned up, and nothing half-done is recorded. Outside the main thread
    (a caller's worker thread), signals stay as they are."""
    STOP.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        if STOP.is_set():  # a second signal while the first one's clean-up runs: that clean-up goes on
            return
        STOP.set()
        raise Stopped(signal.Signals(signum).name)

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


# What every grader process imports before it grades: imported once, by the fork server (below), rather than
# by each student's process (about a second of CPU per student: nbgrader's API imports its server extensions).
# Nothing here is a lab's checks, nor starts a thread: a lab's checks are imported by the grader process itself,
# from the folders the run names (`_child`), as they are on disk when it starts.
PRELOAD = ["autograder.pipeline.spawn", "nbgrader.api"]


def _context():
    """Grader processes come from a fork server (multiprocessing's "forkserver" start method): a process started
    fresh, single-threaded, that has imported PRELOAD and forks one grader process per step. Like "spawn", no
    grader process is forked from the threaded class process; unlike it, none pays the imports again."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def in_own_process(what: str, cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes,
                   limit_s: float) -> dict:
    """`grade_untimed` or `time_student` (what: a name in STEPS) of one student in a grader process of its
    own; its result. RuntimeError when the process failed, or was killed after limit_s seconds."""
    if what not in STEPS:
        raise ValueError(f"no grading step {what!r} (the steps: {', '.join(STEPS)})")
    if STOP.is_set():
        raise Stopped("the run was stopped before this step")
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, what, cfg, layout, student, folder, slot, key),
                       name=f"speclab grader of {student}")
    proc.start()
    send.close()
    deadline = time.monotonic() + limit_s
    try:
        while not receive.poll(POLL_S):
            if STOP.is_set():
                raise Stopped("the run was stopped")
            if time.monotonic() > deadline:
                raise RuntimeError(f"its grader process did not finish within {limit_s:.0f} s")
        ok, value = receive.recv()
    except EOFError:
        proc.join(5)
        if STOP.is_set():
            raise Stopped("the run was stopped") from None
        raise RuntimeError(f"its grader process ended without a result (exit code {proc.exitcode})") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receive.close()
        bounds_.clean_up_after(proc.pid, [cfg.out / "work" / student, cfg.out / "work" / ".verdict" / student])
    if not ok:
        raise RuntimeError(value)
    return value


def _ignore(_signum, _frame) -> None:
    """A grader process's SIGINT and SIGTERM handler: nothing (module docstring)."""


def pass_over_stop_signals() -> None:
    """In a grader process: SIGINT and SIGTERM do nothing (the class process stops it, module docstring). By a
    handler that does nothing, not SIG_IGN: an ignored signal stays ignored in every program this process
    starts (the student's kernel and its helpers), where a handler is reset to the default."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _ignore)


def _child(send, what: str, cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes) -> None:
    from autograder.checks import add_folder

    pass_over_stop_signals()
    for extra in cfg.lab_checks:  # a lab's checks outside the package, as the class's process found them
        add_folder(extra)
    try:
        caps = grade.sandbox_caps(cfg)
        if caps is not None and caps.mode == "uid":
            os.umask(0o077)
        # one grader per student at a time (cleanup.py): an earlier run's orphan finishes first, and the result
        # it wrote stands when it is current
        with cleanup.student_lock(cfg.out, student) as waited:
            old = results.load_result(cfg.out, student) if waited and what == "grade_untimed" else None
            version = results.grader_version(cfg.code_root, cfg.out / "template", cfg.lab_checks) if old else ""
            if old and results.is_current(old, submission_hash(folder), version, cfg.unsafe):
                send.send((True, old))
            else:
                send.send((True, STEPS[what](cfg, layout, student, folder, slot, key)))
    except BaseException as err:  # noqa: BLE001 - the parent says it on the student's page
        send.send((False, f"{type(err).__name__}: {err}"))
    finally:
        send.close()
