"""The released notebooks' visible tests flag the catalog's mutants before submission
(autograder/audit/visible.py), and the committed reports say so for the notebooks as they are."""
from __future__ import annotations

import json

import nbformat
import pytest

from autograder.audit import visible


@pytest.mark.parametrize("lab", ["lab1", "lab2"])
def test_committed_report_is_current_and_meets_the_target(lab):
    report = json.loads(visible.report_path(lab).read_text())
    assert report["digest"] == visible.digest(lab), (
        f"stale: run python -m autograder.audit.visible {lab} --write")
    assert report["reference_failures"] == {}, f"the reference fails a cell: {report['reference_failures']}"
    assert report["share"] >= visible.TARGET, [r["name"] for r in report["mutants"] if not r["flagged"]]
    from importlib import import_module

    assert [r["name"] for r in report["mutants"]] == [m.name for m in import_module(
        f"autograder.audit.mutants.{lab}").MUTANTS]


def test_a_failing_graded_cell_is_reported_and_an_ungraded_one_is_not():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade_id": "setup"}}),
        nbformat.v4.new_code_cell("raise ValueError('demo broke')", metadata={"nbgrader": {"grade_id": "demo"}}),
        nbformat.v4.new_code_cell("assert x == 2, 'expected 2'",
                                  metadata={"nbgrader": {"grade": True, "grade_id": "test_x"}}),
        nbformat.v4.new_code_cell("assert x == 1", metadata={"nbgrader": {"grade": True, "grade_id": "test_ok"}}),
    ])
    assert visible.graded_failures(nb) == {"test_x": "AssertionError: expected 2"}
    assert visible.graded_failures(nb, every_cell=True) == {"demo": "ValueError: demo broke",
                                                            "test_x": "AssertionError: expected 2"}


@pytest.mark.slow
def test_a_mutant_is_recomputed_and_flagged_while_the_reference_passes():
    report = visible.audit("lab1", only=["residual_silent_nan_when_equal"], progress=False)
    assert report["reference_failures"] == {}
    (row,) = report["mutants"]
    assert row["flagged"] and row["failing_cells"] == ["test_residual_distribution"]


def test_the_table_marks_what_no_visible_test_flags():
    text = visible.table({"lab": "x", "flagged": 1, "total": 2, "share": 0.5, "reference_failures": {},
                          "mutants": [{"name": "a", "part": 1, "flagged": True, "failing_cells": ["t"]},
                                      {"name": "b", "part": 2, "flagged": False, "failing_cells": []}]})
    assert "| `b` | 2 | **no** | — |" in text and "1 of 2 catalog mutants" in text
