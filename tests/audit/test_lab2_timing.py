"""Audit `lab2_timing` (`make audit lab2_timing`): Lab 2's speed points cannot be bought, and a busy machine does
not hand them out.

Three notebooks that are not faster than the course's baseline, timed as the class run times them
(autograder/pipeline/grade.py: each student's timed cells after every untimed check, one student at a
time, in a grader process and a verdict sandbox of its own) while two outside busy loops keep both
cores busy. None may be awarded the speed-up's points: each loses them on a clear verdict, or has them
held pending (never given by default):
- `never_speculates`, the slowest-looking of the four slow decoders of the mutant catalogue
  (autograder/audit/mutants/lab2.py: the target alone, correct in its output). All four, with
  `recompute_without_cache` (no KV cache), `rebuilds_caches` (rebuilds both caches every step) and
  `verifies_token_by_token` (one target forward per drafted token), are timed by the `timing_load` audit
  (autograder/audit/timing_load.py), in the same timing as this class run's, again and again;
- a decoder that does not speculate with two helper processes that burn CPU whenever the decoder is not
  running, that is while the grader times its baseline. Its sandbox is frozen while the baseline runs, so
  the helpers slow nothing but its own calls;
- a decoder that does not speculate and memoises: a call identical to an earlier one is answered from
  memory. Every timed call gets a prompt it has not seen, so the memo never answers.
The reference, timed under the same load, keeps its points: tests/end_to_end/test_lab2_class.py.
How often each verdict comes out: the `timing_load` audit. The report
(autograder/audit/reports/lab2_timing.json) holds each decoder's two timed cells beside the verdict expected.

The last test calls the speed-up check directly on `recompute_without_cache` (moved from
tests/autograder/checks/test_lab2.py, where it timed a real decoder in `make test`).

The untimed grading is not repeated here (tests/end_to_end/test_lab2_class.py runs it): each notebook's
result is written as `grade_untimed` writes one for a notebook that passed every untimed cell, its timed
cells marked to be timed, and `grade_class --retime`'s timing phase judges them.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.audit.timing_load import BURN_HELPERS, busy_loops
from autograder.pipeline import Config, build_template, grade_class
from autograder.pipeline import results as R
from autograder.sandbox.bounds import available

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab2"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not available()[0], reason=f"no control groups here: {available()[2]}")]

NOT_SPECULATING = '''
from speclab.sampling import generate as _generate

_reference_decode = speculative_decode


def _target_alone(target, prompt, max_new_tokens):
    out = _generate(target, prompt[None], max_new_tokens, temperature=0)[0, len(prompt):].tolist()
    return out, [0] * len(out)  # every step "accepts" nothing and emits one token
'''
BURNING = NOT_SPECULATING + BURN_HELPERS + '''


def speculative_decode(target, draft, prompt, max_new_tokens, k, temperature=0.0, **kw):
    if temperature != 0 or kw.get("on_step") is not None or k < 1:
        return _reference_decode(target, draft, prompt, max_new_tokens, k, temperature=temperature, **kw)
    _running.value = 1  # the helpers rest while this runs, and burn while the grader times its baseline
    try:
        return _target_alone(target, prompt, max_new_tokens)
    finally:
        _running.value = 0
'''
MEMOISING = NOT_SPECULATING + '''

_memo = {}


def speculative_decode(target, draft, prompt, max_new_tokens, k, temperature=0.0, **kw):
    if temperature != 0 or kw.get("on_step") is not None or k < 1:
        return _reference_decode(target, draft, prompt, max_new_tokens, k, temperature=temperature, **kw)
    key = (tuple(prompt.tolist()), max_new_tokens, k)
    if key not in _memo:
        _memo[key] = _target_alone(target, prompt, max_new_tokens)
    return _memo[key]
'''
TIMED = ("test_speedup", "test_bandwidth")
SLOW = ("never_speculates",)  # the other three slow decoders: the timing_load audit
STUDENTS = (*SLOW, "burning", "memoising")


def notebook(release, student: str):
    from autograder.audit.mutants import make_submission
    from autograder.audit.mutants.lab2 import MUTANTS

    mutant = next((m for m in MUTANTS if m.name == student), None)
    nb = make_submission(LAB, release, mutant)
    code = {"burning": BURNING, "memoising": MEMOISING}.get(student)
    if code is not None:  # the student's own cell, just before the speed-up's test cell
        at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_speedup")
        nb.cells.insert(at, new_code_cell(code))
    return nb


@pytest.fixture(scope="module")
def timed(tmp_path_factory, audit_grades):
    base = tmp_path_factory.mktemp("lab2timing")
    cfg = Config(LAB, base / "subs", base / "out", ROOT, workers=2)
    layout = build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    for student in STUDENTS:
        folder = base / "subs" / student / LAB
        folder.mkdir(parents=True)
        nbformat.write(notebook(release, student), folder / f"{LAB}.ipynb")
        scores = {nb: dict(cells) for nb, cells in layout.items()}  # every untimed cell passed
        R.save_result(cfg.out, student, {
            "student": student, "lab": LAB, "submission_sha256": "", "scores": scores,
            "score": sum(sum(c.values()) for c in scores.values()),
            "max_score": sum(sum(c.values()) for c in layout.values()), "problems": [], "seconds": 0.0,
            "timing": {LAB: {g: [R.TIMED_LATER] for g in TIMED}}, "figures": {}})
    with busy_loops(2):
        results = {r["student"]: r for r in grade_class(dataclasses.replace(cfg, retime=True), progress=False)}
    for r in results.values():
        print(r["student"], {g: r["scores"][LAB][g] for g in TIMED}, r.get("pending"), r.get("figures"),
              [p[:300] for p in r["problems"]])
        scores, pending = {g: r["scores"][LAB][g] for g in TIMED}, (r.get("pending") or {}).get(LAB, {})
        audit_grades.student(r["student"], scores, {
            "test_speedup": "0 on a clear verdict, or held pending; never awarded",
            "test_bandwidth": BANDWIDTH_EXPECTED.get(
                r["student"], f"{layout[LAB]['test_bandwidth']:g} (every byte counted), or held pending")},
            pending=pending, held={"test_speedup": scores["test_speedup"] == 0.0,
                                   "test_bandwidth": bandwidth_held(r, layout)})
    return layout, results


# The burning student's helpers burn whenever its decoder is not running, and so while its own copy_bandwidth
# runs; they are frozen only while the grader's copy runs. Its copy shares the cores with them and with the two
# busy loops, so its figure falls by its own doing (a run measured 5.68 GB/s against the grader's 17.35, just past
# the factor of 3): its bandwidth point may go either way, and this audit asserts only that its speed points are
# never given. The other students run nothing beside their copy: every byte counted, their point kept.
BANDWIDTH_EXPECTED = {"burning": "any score: its own helpers burn beside its copy (recorded, not asserted)"}


def bandwidth_held(r: dict, layout: dict) -> bool:
    if r["student"] in BANDWIDTH_EXPECTED:
        return True
    return r["scores"][LAB]["test_bandwidth"] == layout[LAB]["test_bandwidth"] or "test_bandwidth" in (
        (r.get("pending") or {}).get(LAB, {}))


@pytest.mark.parametrize("student", STUDENTS)
def test_a_decoder_that_is_not_faster_is_never_awarded_the_speed_points(timed, student):
    """0 points for the speed-up cell, on a clear verdict (or held, never given)."""
    layout, results = timed
    r = results[student]
    assert r["scores"][LAB]["test_speedup"] == 0.0, r
    assert bandwidth_held(r, layout), r
    assert not r.get("figures"), r["figures"]  # nothing it measured reaches a leaderboard


def test_recompute_without_cache_is_correct_but_too_slow(monkeypatch):
    """The speed-up check called directly (no pipeline, no busy loop) on a correct decoder at a third of the
    baseline's speed: it is greedy-exact, and fails the timed check. The time limits are lifted here: on a loaded
    machine the first look's 7 rounds may outlast them, and a look cut short cannot decide (a policy tested in
    tests/autograder/checks/test_timing.py); what this test asks is the verdict."""
    from autograder.audit import mutants
    from autograder.audit.mutants.lab2 import MUTANTS
    from autograder.checks import lab2 as C

    monkeypatch.setattr(C, "TIMING_BUDGET_S", 1.0)  # stop at the first look that can decide
    monkeypatch.setattr(C, "TIMING_HARD_LIMIT_S", 1e9)
    decode = mutants.namespace("lab2", next(m for m in MUTANTS if m.name == "recompute_without_cache")).speculative_decode
    C.check_greedy_equivalence(decode)  # correct...
    with pytest.raises(AssertionError, match="speedup"):
        C.check_speedup(decode)  # ...but slow
