"""Audit `throughput` (`make audit throughput`): what a class costs, graded as `grade --timing-parallel` grades it.

Four copies of each lab's reference are graded here (two workers, the timed phase two students at a time on cores
of their own); `autograder.audit.cost.project` turns the measured wall times into students per hour and the wall
time of 500 students on a host of 32 cores and on 8 such hosts (one shard each). The table is printed and kept in
the report (`figures`). Its verdicts: every copy gets full marks with nothing held, and the timed phase ran on
cores of their own.
"""
from __future__ import annotations

import os

import pytest

from autograder.audit.cost import grade_copies, project, table
from autograder.sandbox import bounds as bounds_

LABS = ("lab1", "lab2")
STUDENTS, WORKERS, CORES, HOSTS, CLASS = 4, 2, 32, 8, 500
PARALLEL = os.geteuid() == 0 and bounds_.available()[0] and bounds_.cpuset_available() and len(os.sched_getaffinity(0)) >= 2
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not PARALLEL, reason="needs root, control groups, the cpuset "
                                                                         "controller and two cores")]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    base = tmp_path_factory.mktemp("throughput")
    return {lab: grade_copies(lab, STUDENTS, WORKERS, True, base / lab) for lab in LABS}


def test_every_copy_of_the_reference_gets_full_marks_and_nothing_is_held(measured, audit_grades):
    for lab, m in measured.items():
        audit_grades.student(f"{lab} copies", {"total": sum(m["scores"])}, {"total": STUDENTS * m["max_score"]})
        assert m["scores"] == [m["max_score"]] * STUDENTS and m["pending"] == 0, m


def test_the_timed_phase_ran_on_cores_of_their_own(measured):
    for lab, m in measured.items():
        assert len(m["timing_cores"]) == 2 and all(len(c) == 1 for c in m["timing_cores"]), m


def test_the_throughput_table(measured, audit_grades):
    slots = 2
    rows = {lab: {"measured": m, "workers": WORKERS, "timing_slots": slots,
                  **project(m, WORKERS, slots, CORES, HOSTS, CLASS, 1)} for lab, m in measured.items()}
    lines = table(rows)
    print("\n" + "\n".join(lines))
    audit_grades.figure("throughput", rows)
    audit_grades.figure("table", lines)
    assert all(r["one_host_h"] > r["cluster_h"] > 0 for r in rows.values()), rows
