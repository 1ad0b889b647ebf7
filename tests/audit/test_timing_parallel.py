"""Audit `timing_parallel` (`make audit timing_parallel`): Lab 1's speed cell timed two students at a time, each on
a core of its own (--timing-parallel), gives the verdicts and the figures it gives timed one student at a time.

Four correct Lab 1 notebooks (the reference twice, and twice the plain implementation of
autograder/audit/correct.py, written from the notebook's text alone) are timed through the class run's timing
phase (autograder.audit.timing_agreement.grader_figures: every untimed cell already passed, the speed cell marked
to be timed), in ROUNDS rounds, each round alone and then in parallel, one after the other, so that both modes
see the machine in the same state (its speed for interpreted code drifts over tens of seconds:
timing_agreement.py says how much).

Its verdicts: every timing of both modes gives the speed cell its point and holds nothing (the same verdicts);
in parallel, two students were timed at the same moment on two different cores, each held to one core; and the
median, over every student and round, of the parallel figure over the alone figure of the same student in the
same round is within the timing issue's tolerance (timing_agreement.AGREE, 25 %). Every figure and ratio is in
the report (`figures`).
"""
from __future__ import annotations

import os
import statistics

import pytest

from autograder.audit.timing_agreement import AGREE, CELL, grader_figures
from autograder.sandbox import bounds as bounds_

LAB = "lab1"
ROUNDS = 3
STUDENTS = {"reference_a": "reference", "reference_b": "reference", "plain_a": "batch_plain", "plain_b": "batch_plain"}

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0 or not bounds_.available()[0] or not bounds_.cpuset_available()
                                 or len(os.sched_getaffinity(0)) < 2,
                                 reason="needs root, control groups, the cpuset controller and two cores")]


def _where(base, mode: str) -> dict[str, dict]:
    """student -> its timing's cores and interval, read from its result file."""
    import json

    out = {}
    for s in STUDENTS:
        r = json.loads((base / mode / "out" / "results" / f"{s}.json").read_text())
        t = r.get("bounds_timing") or {}
        out[s] = {"cores": t.get("cores"), "from": t.get("timed_from"), "to": t.get("timed_to")}
    return out


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    base = tmp_path_factory.mktemp("timing_parallel")
    done = []
    for j in range(ROUNDS):
        alone = grader_figures(LAB, STUDENTS, base / f"r{j}" / "alone", 0)
        parallel = grader_figures(LAB, STUDENTS, base / f"r{j}" / "parallel", 0, parallel=True)
        done.append({"alone": alone, "parallel": parallel, "where": _where(base / f"r{j}", "parallel")})
    return done


def test_both_modes_give_every_correct_student_the_point_and_hold_nothing(rounds, audit_grades):
    for j, r in enumerate(rounds):
        for mode in ("alone", "parallel"):
            for s, g in r[mode].items():
                audit_grades.student(f"{s} round {j} {mode}", {CELL[LAB]: g["score"]}, {CELL[LAB]: g["points"]},
                                     pending={CELL[LAB]: g["points"]} if g["pending"] else None)
    verdicts = {(j, s, mode): (g["score"], g["pending"]) for j, r in enumerate(rounds) for mode in ("alone", "parallel")
                for s, g in r[mode].items()}
    assert all(v == (1.0, False) for v in verdicts.values()), verdicts


def test_in_parallel_two_students_were_timed_at_once_on_cores_of_their_own(rounds, audit_grades):
    audit_grades.figure("parallel_cores_and_times", [r["where"] for r in rounds])
    for r in rounds:
        where = r["where"]
        assert all(w["cores"] and len(w["cores"]) == 1 for w in where.values()), where
        at_once = [(x, y) for x in where for y in where if x < y
                   and where[x]["from"] < where[y]["to"] and where[y]["from"] < where[x]["to"]]
        assert at_once, where
        assert all(where[x]["cores"] != where[y]["cores"] for x, y in at_once), where


def test_the_parallel_figures_are_the_alone_figures_within_the_tolerance(rounds, audit_grades):
    table = {s: {"alone": [r["alone"][s]["figure"] for r in rounds],
                 "parallel": [r["parallel"][s]["figure"] for r in rounds]} for s in STUDENTS}
    ratios = {s: [round(p / a, 3) for a, p in zip(t["alone"], t["parallel"])] for s, t in table.items()}
    median = statistics.median(x for xs in ratios.values() for x in xs)
    audit_grades.figure("speed_up_figures", table)
    audit_grades.figure("parallel_over_alone", ratios)
    audit_grades.figure("median_parallel_over_alone", round(median, 3))
    assert abs(median - 1) <= AGREE, (median, ratios)
