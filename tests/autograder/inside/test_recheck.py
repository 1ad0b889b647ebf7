"""The clean re-check (autograder/inside/recheck.py) stops once the cells it was asked about have run."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import nbformat

from autograder.inside import launch

ROOT = Path(__file__).resolve().parents[3]


def _notebook(path: Path, marker: Path) -> None:
    def graded(gid: str, source: str):
        return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade": True, "solution": False,
                                                                         "grade_id": gid, "points": 1}})

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"),
                graded("test_a", "assert x == 1"),
                nbformat.v4.new_code_cell("x = 2"),
                graded("test_b", "assert x == 1, 'x moved on'"),
                nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran')"),
                graded("test_c", "assert True")]
    nbformat.write(nb, path)


def _recheck(tmp_path: Path, *extra: str) -> tuple[list[dict], bool]:
    nb, out, marker = tmp_path / "lab.ipynb", tmp_path / "out.jsonl", tmp_path / "marker"
    marker.unlink(missing_ok=True)
    _notebook(nb, marker)
    subprocess.run(launch(ROOT, "autograder.inside.recheck", nb, out, "--root", ROOT, *extra), check=True, timeout=120)
    return [json.loads(line) for line in out.read_text().splitlines()], marker.exists()


def test_recheck_runs_every_cell_without_only(tmp_path):
    records, ran_after = _recheck(tmp_path)
    assert [(r["grade_id"], r["passed"]) for r in records] == [("test_a", True), ("test_b", False), ("test_c", True)]
    assert "x moved on" in records[1]["error"] and ran_after


def test_recheck_with_only_stops_after_the_last_named_cell(tmp_path):
    """The cells before a named one still run (its state is the notebook's), the ones after do not."""
    records, ran_after = _recheck(tmp_path, "--only", "test_b")
    assert [(r["grade_id"], r["passed"]) for r in records] == [("test_a", True), ("test_b", False)]
    assert not ran_after
    records, ran_after = _recheck(tmp_path, "--only", "test_a,test_c")
    assert [r["grade_id"] for r in records] == ["test_a", "test_b", "test_c"] and ran_after
