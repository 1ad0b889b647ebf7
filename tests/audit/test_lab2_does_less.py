"""Audit `lab2_does_less` (`make audit lab2_does_less`): a Lab 2 notebook that does less than the lab asks, graded
by the course's own pipeline (issue 31).

Its `speculative_decode` never speculates (no drafts: one target forward and one token a step) and gives the
target's p its temperature only at the settings written in the check file. It is right wherever the grader
can be predicted: greedy decoding is exact, and so is sampling at the fixed knobs. Graded as a class is graded
(`grade_class`: nbgrader's run beside the grader's verdict, the lower score kept), it keeps the cells it earns
(the baseline, greedy equivalence, the sampling contracts) and loses the rollback cell (the forwards the
grader counts show no speculation) and the sampling cell (its token cases draw the knobs for every decode). Parts 3 and 4 are
left as released, so their cells score 0 at once (except the timed speed-up cell, which needs only the decoder). The catalog mutants behind it are `never_speculates` and
`knobs_only_at_fixed_settings` (autograder/audit/mutants/lab2.py), each also judged by its checks called
directly (tests/autograder/checks/test_lab2.py).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from autograder.audit.mutants import make_submission
from autograder.audit.mutants.lab2 import MUTANTS
from autograder.checks.lab2 import CELLS
from autograder.pipeline import Config, build_template, grade_class
from autograder.sandbox import Limits
from load import scaled
from submissions import only_parts

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab2"
pytestmark = pytest.mark.slow
BY_NAME = {m.name: m for m in MUTANTS}
EARNED = {"test_baseline", "test_greedy", "test_sampling_contracts"}


def does_less():
    """never_speculates and knobs_only_at_fixed_settings in one speculative_decode."""
    never, knobs = BY_NAME["never_speculates"], BY_NAME["knobs_only_at_fixed_settings"]
    return replace(never, name="never_speculates_knobs_fixed", doc=f"{never.doc} {knobs.doc}",
                   edits=never.edits + knobs.edits)


def test_a_decoder_that_does_less_keeps_only_what_it_earns(tmp_path, audit_grades):
    cfg = Config(LAB, tmp_path / "subs", tmp_path / "out", ROOT, workers=2,
                 limits=Limits(notebook_timeout_s=scaled(600), memory_mb=6144))
    build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    folder = cfg.submissions / "does_less" / LAB
    folder.mkdir(parents=True)
    nbformat.write(only_parts(make_submission(LAB, release, does_less()), release, {1, 2}), folder / f"{LAB}.ipynb")
    (result,) = grade_class(cfg, progress=False)
    scores = result["scores"][LAB]
    print(scores, result["problems"])
    points = {c.grade_id: float(c.points) for c in CELLS}
    pending = (result.get("pending") or {}).get(LAB, {})
    audit_grades.student("does_less", scores, {c.grade_id: points[c.grade_id] if c.grade_id in EARNED else 0.0
                                               for c in CELLS}, pending=pending,
                         held={"test_speedup": scores["test_speedup"] == 0})  # 0 on a clear verdict, or held
    assert {g: scores[g] for g in EARNED} == {g: points[g] for g in EARNED}, result["problems"]
    assert scores["test_rollback"] == 0 and scores["test_sampling"] == 0, result["problems"]
    assert all(scores[c.grade_id] == 0 for c in CELLS if c.part in (3, 4) and c.grade_id != "test_speedup")
    text = " ".join(result["problems"])
    assert "test_rollback" in text and "no rejection" in text  # the forwards show no speculation
    assert "test_sampling:" in text and "drawn for every decode" in text  # the knobs it met were drawn (issue 53)
    # test_speedup times this decoder (it needs only speculative_decode): a decoder that never speculates is
    # no faster than the baseline. On a busy machine the timing may not tell it from the bar; then it is timed
    # again alone and, if still unclear, its points are held. Either way they are never awarded.
    assert scores["test_speedup"] == 0, result["problems"]
    assert (result.get("pending") or {}).get(LAB, {}) in ({}, {"test_speedup": points["test_speedup"]})


KNOB_MUTANTS = ("bonus_without_knobs", "knobs_in_wrong_order", "knobs_on_p_only")


def test_decoders_that_mishandle_the_knobs_lose_the_sampling_cell_only(tmp_path, audit_grades):
    """Issue 53: three speculative decoders that are exact at temperature 1 without knobs, graded as a class is
    graded. The bonus drawn from the raw softmax, the cut applied before the temperature, and the cut applied to
    p only each lose the sampling cell (every emitted token against the target's processed law) and keep the
    cells of Parts 1 and 2 they earn: they speculate, roll back and decode greedily as the lab asks. Parts 3 and
    4 are left as released (their cells score 0, except the timed speed-up cell: its points are earned or held,
    since these decoders speculate as the reference does)."""
    cfg = Config(LAB, tmp_path / "subs", tmp_path / "out", ROOT, workers=2,
                 limits=Limits(notebook_timeout_s=scaled(600), memory_mb=6144))
    build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    for name in KNOB_MUTANTS:
        folder = cfg.submissions / name / LAB
        folder.mkdir(parents=True)
        nbformat.write(only_parts(make_submission(LAB, release, BY_NAME[name]), release, {1, 2}),
                       folder / f"{LAB}.ipynb")
    results = {r["student"]: r for r in grade_class(cfg, progress=False)}
    points = {c.grade_id: float(c.points) for c in CELLS}
    earned = {c.grade_id for c in CELLS if c.part in (1, 2)} - {"test_sampling"}
    for name in KNOB_MUTANTS:
        r = results[name]
        scores = r["scores"][LAB]
        pending = (r.get("pending") or {}).get(LAB, {})
        print(name, scores, pending, [p[:300] for p in r["problems"]])
        want = {c.grade_id: points[c.grade_id] if c.grade_id in earned | {"test_speedup"} else 0.0 for c in CELLS}
        audit_grades.student(name, scores, want, pending=pending, held={
            g: scores[g] <= want[g] <= scores[g] + pending.get(g, 0.0) for g in scores})
        assert {g: scores[g] for g in earned} == {g: points[g] for g in earned}, (name, r["problems"])
        assert scores["test_sampling"] == 0, (name, r["problems"])
        assert "test_sampling:" in " ".join(r["problems"]), (name, r["problems"])
        assert all(scores[c.grade_id] == 0 for c in CELLS if c.part in (3, 4) and c.grade_id != "test_speedup")
        assert set(pending) <= {"test_speedup"}, pending
