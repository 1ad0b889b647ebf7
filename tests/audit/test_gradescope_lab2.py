"""Audit `gradescope_lab2` (`make audit gradescope_lab2`): Lab 2's Gradescope autograder under Gradescope's
confinement, emulated as in the `gradescope_lab1` audit (tests/support/emulate/gradescope.py)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.export.gradescope import NEEDS_MB
from emulate import gradescope as emulate

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_lab2_reference_gets_full_marks_under_gradescope_s_confinement(tmp_path, audit_grades):
    """Lab 2 (the decoder, its KV cache, its timed speed-up) graded as Lab 1 is above: Docker's default
    confinement, Ubuntu 22.04's bwrap options, the memory limit the guide states; uid mode; full marks. The audit
    runs on a quiet machine, so the speed-up's one timing must be clear: a held speed-up (pending, never taken)
    is not a held verdict here (the two-tier rule: nothing pending for a correct student on a quiet machine)."""
    from autograder.audit.mutants import make_submission as make

    lab = "lab2"
    gs = emulate.Container(tmp_path, lab, ROOT)
    upload = tmp_path / "upload"
    upload.mkdir()
    nbformat.write(make(lab, nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)), upload / f"{lab}.ipynb")
    data, run = gs.grade(upload, "reference")
    audit_grades.figure("reference_run_autograder_s", run["wall_s"])  # what one submission costs there
    assert sum(t["max_score"] for t in data["tests"]) == 23
    # every point given, the speed-up's on a clear timing (held back, it would be pending: not a held verdict)
    short = [(t["name"], t["score"], t["output"]) for t in data["tests"] if t["score"] < t["max_score"]]
    cells = {t["name"].rsplit("[", 1)[1].rstrip("]"): t for t in data["tests"][1:]}
    audit_grades.student("reference", {g: t["score"] for g, t in cells.items()},
                         {g: t["max_score"] for g, t in cells.items()})
    assert not short, short
    assert data["score"] == 23
    assert data["extra_data"]["sandbox_mode"].startswith("uid mode")
    board = {row["name"]: row["value"] for row in data.get("leaderboard", [])}
    # the speed-up passed on a clear timing: it and the acceptance rate are on the leaderboard
    assert board["Lab 2 speed-up (best k)"] > 1 and 0.5 < board["Lab 2 acceptance rate α (best k)"] < 1, board
    if run["peak_mb"] is not None:
        assert run["oom_kills"] == 0 and run["peak_mb"] <= NEEDS_MB
