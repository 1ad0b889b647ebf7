"""Hidden checks of `tiny`, the smallest lab: the worked example of the recipe in
autograder/README.md and the lab the grading pipeline's robustness suite grades
(its source is tiny.md beside this file; tests/support/grading_fixtures.py builds it, and
the pipeline finds this module through `Config.lab_checks`, autograder.checks.add_folder).

Part 1 asks for add(a, b) and scale(v, c). The checks use numpy and scipy.stats on
purpose: a student who patches them must be caught by the clean re-check.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import CellSpec, Rule, defer_to_grader, under

R_ADD = Rule("add", "`add(a, b)` returns a + b.")
R_SCALE = Rule("scale", "`scale(v, c)` returns the array v times c.")


def check_add(add: Callable) -> None:
    with under(R_ADD):
        assert add(-4, 2.5) == -1.5


def check_scale(scale: Callable) -> None:
    from scipy import stats  # imported here, as a check that needs it would: test_add stays light (5 s cell limit)

    with under(R_SCALE):
        assert np.array_equal(scale(np.arange(4), -3), np.arange(4) * -3)
        assert float(np.sum(scale(np.ones(3), 0.5))) == 1.5
        assert stats.describe(scale(np.arange(4.0), -3)).mean == -4.5


ALPHA_CELL = 0.0  # no statistical cell
CELLS: list[CellSpec] = [
    CellSpec("test_add", 1, 2, check_add, ("add",), rules=(R_ADD,), note="0: exact values"),
    CellSpec("test_scale", 1, 3, check_scale, ("scale",), rules=(R_SCALE,), note="0: exact values"),
]

defer_to_grader(globals())  # the grading pipeline's nbgrader run leaves these checks to the grader
