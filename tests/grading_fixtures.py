"""A tiny nbgrader course for the grading pipeline's tests, and hostile students for it.

Assignment `tiny`, notebook `tiny.ipynb`: one solution cell (add, scale), two graded
test cells: `test_add` (2 points) and `test_scale` (3 points), each with hidden tests
that call `autograder/checks/tiny.py` (numpy and scipy.stats inside), as the real labs do.
A student's notebook is the release notebook with the solution cell replaced, plus
optional extra cells (after the solution cell unless said otherwise).
"""
from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

LAB = "tiny"
POINTS = {"test_add": 2.0, "test_scale": 3.0}
SOLUTION = "def add(a, b):\n    return a + b\n\n\ndef scale(v, c):\n    return np.asarray(v) * c\n"
HALF = "def add(a, b):\n    return a + b\n\n\ndef scale(v, c):\n    return v\n"  # test_add only

CONFIG = """\
c = get_config()
c.CourseDirectory.course_id = "tiny"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
"""


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    m = {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": locked, "schema_version": 3}
    if points is not None:
        m["points"] = points
    return {"nbgrader": m}


def source_notebook() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell("# Tiny lab", metadata=_meta("intro", locked=True)),
        new_code_cell("import numpy as np", metadata=_meta("setup", locked=True)),
        new_code_cell("### BEGIN SOLUTION\n" + SOLUTION + "### END SOLUTION", metadata=_meta("impl", solution=True)),
        new_code_cell("assert add(1, 2) == 3\n### BEGIN HIDDEN TESTS\nfrom autograder.checks import tiny as _checks\n"
                      "_checks.check_add(add)\n### END HIDDEN TESTS",
                      metadata=_meta("test_add", grade=True, locked=True, points=2)),
        new_code_cell("assert np.array_equal(scale([1, 2], 2), [2, 4])\n### BEGIN HIDDEN TESTS\n"
                      "from autograder.checks import tiny as _checks\n_checks.check_scale(scale)\n"
                      "### END HIDDEN TESTS",
                      metadata=_meta("test_scale", grade=True, locked=True, points=3)),
    ]
    for i, c in enumerate(cells):
        c.id = c.metadata["nbgrader"]["grade_id"] if i else "intro"
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def make_course(root: Path) -> Path:
    (root / "solutions" / LAB).mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(CONFIG)
    nbformat.write(source_notebook(), root / "solutions" / LAB / f"{LAB}.ipynb")
    return root


def student(release: nbformat.NotebookNode, solution: str | None = SOLUTION, before: list[str] = (),
            after: list[str] = (), end: list[str] = ()) -> nbformat.NotebookNode:
    """The release notebook with the solution filled in and extra cells around it."""
    nb = copy.deepcopy(release)
    cells = []
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "impl":
            cells += [new_code_cell(s) for s in before]
            if solution is not None:
                c.source = solution
            cells.append(c)
            cells += [new_code_cell(s) for s in after]
        else:
            cells.append(c)
    cells += [new_code_cell(s) for s in end]
    nb.cells = cells
    return nb
