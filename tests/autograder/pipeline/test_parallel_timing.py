"""Timed cells of several students at once, each on a core of its own (schedule._time_all, --timing-parallel,
issue 52).

A lab like tiny whose timed check reports where it ran instead of timing: it widens its affinity to every core of
the machine (what a student's code may try), holds its core for half a second, and fails with the cores it was
allowed and when it ran. Four students graded with --timing-parallel on a machine of at least two cores: each
ran on one core only, whatever it asked for, the core its result says it was held to; at least two were timed at
once (the grader's spans of their timed cells overlap; a load that delays one student's start by more than the
cell's half second does not change that), and no two at once on one core. The
grader's side of a timing (`bounds.beside`) is held to the student's cores too. Needs root and the cpuset
controller; skipped elsewhere, with the reason.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace

import nbformat
import pytest

import grading_fixtures as F
from autograder.pipeline import Config, build_template, grade_class
from autograder.pipeline.schedule import timing_cores
from autograder.sandbox import Limits
from autograder.sandbox import bounds as bounds_
from load import scaled

LAB = "tinycores"
STUDENTS = ("a", "b", "c", "d")
CHECKS = '''
import os
import time

import numpy as np

from . import CellSpec, Rule, defer_to_grader

R_ADD = Rule("add", "`add(a, b)` returns a + b.")
R_WHERE = Rule("where", "This cell reports where it ran; it never passes.")


def check_add(add):
    """add(a, b) returns a + b."""
    assert add(-4, 2.5) == -1.5


def check_scale(scale):
    """Report the cores this process may use after asking for all of them, and when it ran."""
    try:
        os.sched_setaffinity(0, range(os.cpu_count()))
    except OSError:
        pass
    t0 = time.time()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        np.ravel(scale(np.arange(10), 2))
    raise AssertionError(f"WHERE cores={sorted(os.sched_getaffinity(0))} from={t0:.3f} to={time.time():.3f} END")


CELLS = [CellSpec("test_add", 1, 2, check_add, ("add",), rules=(R_ADD,)),
         CellSpec("test_scale", 1, 3, check_scale, ("scale",), rules=(R_WHERE,), timed=True)]

defer_to_grader(globals())
'''
WHERE = re.compile(r"WHERE cores=\[([\d, ]+)\] from=([\d.]+) to=([\d.]+) END")
CORES = len(os.sched_getaffinity(0))
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0 or not bounds_.available()[0] or not bounds_.cpuset_available(),
                                 reason="needs root, control groups and the cpuset controller"),
              pytest.mark.skipif(CORES < 2, reason="needs two cores to time two students at once")]
LIMITS = Limits(cell_timeout_s=scaled(20), notebook_timeout_s=scaled(60), memory_mb=3072, file_mb=200, output_kb=64)


def test_without_the_option_the_class_is_timed_one_student_at_a_time(tmp_path):
    cfg = Config(LAB, tmp_path, tmp_path / "out")
    assert timing_cores(cfg) == [()]
    sets = timing_cores(replace(cfg, timing_parallel=True))
    assert len(sets) == CORES and all(len(s) == 1 for s in sets) and len({s[0] for s in sets}) == CORES
    assert timing_cores(replace(cfg, timing_parallel=True, unsafe=True)) == [()]  # no group: no cpuset to hold it
    two = replace(cfg, timing_parallel=True, bounds=replace(cfg.bounds, cpus=2.0))  # a student bound to 2 cores
    sets = timing_cores(two)
    assert sets == [()] if CORES < 4 else (len(sets) == CORES // 2 and all(len(s) == 2 for s in sets)), sets


def test_the_grader_beside_a_student_is_held_to_the_students_cores():
    core = max(os.sched_getaffinity(0))
    group = bounds_.Group("student", bounds_.Bounds(cores=(core,)))
    before = os.sched_getaffinity(0)
    try:
        with bounds_.beside(group):
            assert os.sched_getaffinity(0) == {core}
            os.sched_setaffinity(0, before)  # asking for more is cut back to the cpuset
            assert os.sched_getaffinity(0) == {core}
        assert os.sched_getaffinity(0) == before
    finally:
        group.remove()


def test_students_timed_at_once_run_on_cores_of_their_own(tmp_path):
    course, lab_checks = F.variant_lab(tmp_path, LAB, CHECKS)
    cfg = Config(LAB, tmp_path / "subs", tmp_path / "out", course, workers=2, limits=LIMITS,
                 lab_checks=(lab_checks,), timing_parallel=True)
    build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    for s in STUDENTS:
        (cfg.submissions / s / LAB).mkdir(parents=True)
        nbformat.write(F.student(release, F.SOLUTION), cfg.submissions / s / LAB / f"{LAB}.ipynb")
    results = {r["student"]: r for r in grade_class(cfg, progress=False)}
    where = {}
    for s in STUDENTS:
        found = [m for p in results[s]["problems"] if (m := WHERE.search(p))]
        assert len(found) == 1, results[s]["problems"]
        where[s] = {int(c) for c in found[0].group(1).split(",")}  # the cores it ran on (its own times are not read)
        assert results[s]["score"] == 2.0, results[s]
    assert all(len(cores) == 1 for cores in where.values()), where  # one core each, whatever it asked for
    # when each was timed: the grader's span of the student's timed cells (seconds: a sandbox starts, the cell runs),
    # not the cell's own half second, which two students started a few tenths apart need not share on a busy machine
    spans = {s: results[s]["bounds_timing"] for s in STUDENTS}
    assert all(set(spans[s]["cores"]) == where[s] for s in STUDENTS), (spans, where)  # held where it was sent
    pairs = [(x, y) for x in STUDENTS for y in STUDENTS if x < y
             and spans[x]["timed_from"] < spans[y]["timed_to"] and spans[y]["timed_from"] < spans[x]["timed_to"]]
    assert pairs, spans  # timed at the same moment
    assert all(where[x] != where[y] for x, y in pairs), (spans, where)  # never two at once on one core
