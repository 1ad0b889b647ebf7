"""What nbgrader's run left behind, read by the pipeline (autograder/pipeline/nbgrader.py), on graded
notebooks written here: no nbgrader runs."""
from __future__ import annotations

import json

from autograder.pipeline.nbgrader import PRINTED_PER_CELL, cell_problems, printed_undecided


def _graded(tmp_path, cells: list[tuple[str | None, list[dict]]]):
    """A graded notebook: (grade id of a test cell, or None for a student's cell; its outputs) per cell."""
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}
    for i, (gid, outputs) in enumerate(cells):
        meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": gid, "points": 1}} if gid else {}
        nb["cells"].append({"cell_type": "code", "id": f"c{i}", "metadata": meta, "source": "", "outputs": outputs,
                            "execution_count": 1})
    path = tmp_path / "lab.ipynb"
    path.write_text(json.dumps(nb))
    return path


def _stdout(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_a_timing_undecided_in_the_notebook_is_read_for_the_cells_asked_only(tmp_path):
    path = _graded(tmp_path, [
        ("test_speed", [_stdout(["warming up\n", "timing undecided: no clear verdict after 22 rounds\n"])]),
        ("test_other", [_stdout("timing undecided: printed, but the grader judged this cell\n")]),
        (None, [_stdout("timing undecided: a student's own cell\n")]),
        ("test_clear", [_stdout("speed-up 41x\n")]),
    ])
    assert printed_undecided(path, {"test_speed", "test_clear", "test_missing"}) == {
        "test_speed": ["no clear verdict after 22 rounds"]}
    assert printed_undecided(tmp_path / "absent.ipynb", {"test_speed"}) == {}


def test_a_notebook_printing_the_line_over_and_over_gets_a_few_notes(tmp_path):
    path = _graded(tmp_path, [("test_speed", [_stdout("timing undecided: again\n" * 10_000)])])
    assert printed_undecided(path, {"test_speed"}) == {"test_speed": ["again"] * PRINTED_PER_CELL}


def test_a_long_error_of_a_graded_cell_is_noted_whole(tmp_path):
    evalue = "the sums differ. " + "; ".join(f"token {i}: got 0.1, expected 0.2" for i in range(300))
    path = _graded(tmp_path, [("test_sum", [{"output_type": "error", "ename": "AssertionError", "evalue": evalue,
                                             "traceback": []}])])
    assert cell_problems(path) == [f"test_sum: AssertionError: {evalue}"]
