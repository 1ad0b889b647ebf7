"""The two rules that decide a grade from the opinions on it, and the version a cached grade is kept under
(autograder/pipeline/results.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.inside.recheck import MESSAGE_CAP
from autograder.pipeline.results import (grade_code_files, grader_version, lower_of, recheck_note, timing_column,
                                         timing_notes, verdict_alone)

ROOT = Path(__file__).resolve().parents[3]


def test_lower_of_keeps_the_lower_score_per_cell():
    nbgrader = {"a": 2.0, "b": 3.0, "c": 1.0, "d": 0.0}
    opinions = {"a": (True, ""), "b": (False, "AssertionError: too far"), "d": (True, "")}
    scores, notes = lower_of("lab", nbgrader, opinions, judged={"a", "b", "d"}, deferred=set())
    assert scores == {"a": 2.0, "b": 0.0, "c": 1.0, "d": 0.0}  # c: no second opinion; d: nbgrader's 0 stays 0
    assert len(notes) == 1 and notes[0].startswith("lab.ipynb b: passed inside the notebook but fails the grader's")


def test_lower_of_never_raises_a_score():
    scores, notes = lower_of("lab", {"a": 0.0}, {"a": (True, "")}, judged={"a"}, deferred={"a"})
    assert scores == {"a": 0.0} and notes == []


def test_a_hidden_checks_message_is_kept_when_the_visible_test_failed_too():
    """nbgrader scored the cell 0 (its visible test failed) and the hidden check, left to the grader,
    failed as well: the score stays 0 and the student still reads the hidden check's message."""
    opinions = {"a": (False, "AssertionError: scale(v, c): expected [0, -3], got [0, 1]"), "b": (False, "x")}
    scores, notes = lower_of("lab", {"a": 0.0, "b": 0.0}, opinions, judged={"a", "b"}, deferred={"a"})
    assert scores == {"a": 0.0, "b": 0.0}
    assert notes == ["lab.ipynb a: AssertionError: scale(v, c): expected [0, -3], got [0, 1]"]  # b ran in nbgrader too
    _, notes = lower_of("lab", {"a": 0.0}, {"a": (False, "not reached (the notebook's process ended)")},
                        judged={"a"}, deferred={"a"})
    assert notes == []  # no check ran: nothing to teach, and nbgrader's run says why


@pytest.mark.parametrize("judged, deferred, starts", [
    ({"x"}, {"x"}, "lab.ipynb x: AssertionError: why"),  # the check ran only in the grader: its message is the note
    ({"x"}, set(), "lab.ipynb x: passed inside the notebook but fails the grader's own check, 0 points. "),
    (set(), {"x"}, "lab.ipynb x: checked in a clean re-run of the notebook. "),
    (set(), set(), "lab.ipynb x: passed inside the notebook but fails in a clean re-run, 0 points"),
])
def test_lower_of_says_which_opinion_lowered_the_cell(judged, deferred, starts):
    _, notes = lower_of("lab", {"x": 4.0}, {"x": (False, "AssertionError: why")}, judged, deferred)
    assert notes[0].startswith(starts) and notes[0].endswith("AssertionError: why"), notes


# a check's message as long as Lab 1's distance test can write: the detail is at the end
LONG = ("AssertionError: [reversed] your samples do not follow the target distribution. Largest differences: "
        + "; ".join(f"token {i}: 0.{i:04d} of your samples, expected 0.0100" for i in range(150)))


@pytest.mark.parametrize("judged, deferred", [({"x"}, {"x"}), ({"x"}, set()), (set(), {"x"}), (set(), set())])
def test_a_long_message_travels_whole_in_every_note(judged, deferred):
    assert 5000 < len(LONG) < MESSAGE_CAP
    _, notes = lower_of("lab", {"x": 4.0}, {"x": (False, LONG)}, judged, deferred)
    assert notes[0].endswith(LONG) and "token 149: 0.0149 of your samples" in notes[0]


def test_only_a_message_past_the_cap_is_cut_and_says_by_how_much():
    huge = "AssertionError: " + "x" * (MESSAGE_CAP + 1234)
    _, notes = lower_of("lab", {"x": 4.0}, {"x": (False, huge)}, {"x"}, {"x"})
    kept = huge[:MESSAGE_CAP]
    assert notes[0] == f"lab.ipynb x: {kept}\n[... cut: {len(huge) - MESSAGE_CAP} more characters]"
    exact = "AssertionError: " + "x" * (MESSAGE_CAP - 16)  # exactly the cap: nothing cut
    _, notes = lower_of("lab", {"x": 4.0}, {"x": (False, exact)}, {"x"}, {"x"})
    assert notes[0] == f"lab.ipynb x: {exact}" and "cut:" not in notes[0]
    assert recheck_note("lab", "x", huge).endswith(f"[... cut: {len(huge) - MESSAGE_CAP} more characters]")


def test_a_clear_timing_verdict_is_not_called_tampering():
    _, notes = lower_of("lab", {"x": 4.0}, {"x": (False, "TimingFailure: 1.1x, below 1.3x")}, set(), set())
    assert "timing of the clean re-run" in notes[0] and "tamper" not in notes[0]


def test_an_undecided_timing_is_a_note_and_fills_the_timing_column():
    undecided = {"test_speedup": ["no clear verdict after 22 paired rounds"]}
    assert timing_notes("lab2", undecided) == [
        "lab2.ipynb test_speedup: timing undecided: no clear verdict after 22 paired rounds"]
    result = {"scores": {"lab2": {"test_speedup": 2.0, "test_greedy": 3.0}}, "timing": {"lab2": undecided}}
    assert timing_column(result) == "test_speedup: undecided"
    several = {"scores": {"a": {}, "b": {}}, "timing": {"a": {"t1": ["x"]}, "b": {"t2": ["y", "z"]}}}
    assert timing_column(several) == "a:t1: undecided; b:t2: undecided"


@pytest.mark.parametrize("result", [{"scores": {"lab2": {}}, "timing": {}}, {"scores": {"lab2": {}}},
                                    {"scores": {"lab2": {}}, "timing": {"lab2": {"test_speedup": []}}}])
def test_clear_timings_leave_the_timing_column_empty(result):
    assert timing_column(result) == ""


def test_verdict_alone_counts_only_the_cells_that_passed():
    assert verdict_alone({"a": 2.0, "b": 3.0, "c": 1.0}, {"a": (True, ""), "b": (False, "x")}) == \
        {"a": 2.0, "b": 0.0, "c": 0.0}


def _code_copy(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    for part in ("autograder", "speclab"):
        shutil.copytree(ROOT / part, code / part, ignore=shutil.ignore_patterns("__pycache__", "*.safetensors"))
    return code


def test_the_version_covers_what_decides_a_grade_and_nothing_else(tmp_path):
    code, template = _code_copy(tmp_path), tmp_path / "template"
    template.mkdir()
    (template / "source.sha256").write_text("release 1")
    base = grader_version(code, template)
    files = {p.relative_to(code).as_posix() for p in grade_code_files(code)}
    assert {"autograder/checks/lab1.py", "autograder/inside/harness.py", "autograder/sandbox/bwrap.py",
            "autograder/pipeline/grade.py", "speclab/model.py"} <= files
    assert not any(f.startswith(("autograder/audit/", "autograder/export/", "autograder/authoring/")) for f in files)

    # editing an audit, an export, the authoring tools or a page renderer keeps every cached grade
    for kept in ("autograder/audit/power.py", "autograder/export/gradescope.py", "autograder/authoring/labs.py",
                 "autograder/pipeline/feedback.py", "autograder/pipeline/report.py"):
        (code / kept).write_text((code / kept).read_text() + "\n# an edit\n")
        assert grader_version(code, template) == base, kept

    # editing a check, the sandbox's code, the pipeline's grading, speclab or the release drops them
    for dropped in ("autograder/checks/lab1.py", "autograder/inside/wire.py", "autograder/pipeline/results.py",
                    "speclab/sampling.py"):
        path = code / dropped
        original = path.read_text()
        path.write_text(original + "\n# an edit\n")
        assert grader_version(code, template) != base, dropped
        path.write_text(original)
    assert grader_version(code, template) == base
    (template / "source.sha256").write_text("release 2")
    assert grader_version(code, template) != base


def test_a_lab_outside_the_package_is_in_the_version(tmp_path):
    code, template = _code_copy(tmp_path), tmp_path / "template"
    template.mkdir()
    lab = tmp_path / "lab_checks"
    lab.mkdir()
    (lab / "mylab.py").write_text("def check_x(f):\n    assert f() == 1\n")
    before = grader_version(code, template, (lab,))
    (lab / "mylab.py").write_text("def check_x(f):\n    assert f() == 2\n")
    assert grader_version(code, template, (lab,)) != before


def test_hold_pending_holds_only_points_an_unclear_timing_would_award():
    from autograder.pipeline import results as R

    result = {"student": "s", "scores": {"lab2": {"test_speedup": 4.0, "test_bandwidth": 0.0, "test_bytes": 2.0}},
              "score": 6.0, "max_score": 10.0, "problems": [],
              "timing": {"lab2": {"test_speedup": ["no clear verdict"], "test_bandwidth": ["no clear verdict"]}}}
    held = R.hold_pending(result, "RETIME")
    assert held["pending"] == {"lab2": {"test_speedup": 4.0}}  # the failed cell's timing decides nothing
    assert held["scores"]["lab2"] == {"test_speedup": 0.0, "test_bandwidth": 0.0, "test_bytes": 2.0}
    assert held["score"] == 2.0 and R.pending_column(held) == "4"
    assert len(held["problems"]) == 1 and "timing pending: 4 points held back" in held["problems"][0]
    assert "RETIME" in held["problems"][0] and held["problems"][0].startswith("lab2.ipynb test_speedup:")
    assert result["score"] == 6.0 and "pending" not in result  # the input is left as it was
    clear = dict(result, timing={})
    assert R.hold_pending(clear, "RETIME") is clear and R.pending_column(clear) == ""


# ----------------------------------------------------------------------------- timed cells, judged last
def _marked() -> dict:
    """A result as grade_untimed leaves it: two timed cells marked, one of them scored 0 by nbgrader."""
    from autograder.pipeline.results import TIMED_LATER

    return {"scores": {"lab": {"a": 2.0, "speed": 4.0, "bw": 0.0}}, "score": 6.0, "problems": [],
            "timing": {"lab": {"speed": [TIMED_LATER], "bw": [TIMED_LATER]}}, "figures": {}}


def test_to_time_names_the_marked_cells_with_what_is_at_stake():
    from autograder.pipeline.results import to_time

    assert to_time(_marked()) == {"lab": {"speed": 4.0, "bw": 0.0}}
    assert to_time({"scores": {"lab": {"speed": 0.0}}, "pending": {"lab": {"speed": 4.0}}}) == {"lab": {"speed": 4.0}}
    assert to_time({"scores": {}, "timing": {"lab": {"speed": ["no clear verdict"]}}}) == {}


def test_a_clear_pass_keeps_the_points_a_clear_fail_takes_them_an_unclear_one_holds_them():
    from autograder.pipeline.results import PENDING_MARK, timed, to_time

    r = _marked()
    passed = timed(r, to_time(r), {"lab": ({"speed": (True, ""), "bw": (True, "")}, {}, {"speed": {"S": [2.0, "desc"]}})},
                   "RETIME")
    assert passed["scores"]["lab"] == {"a": 2.0, "speed": 4.0, "bw": 0.0} and not passed.get("pending")
    assert passed["figures"] == {"lab": {"speed": {"S": [2.0, "desc"]}}} and passed["timing"] == {}
    failed = timed(r, to_time(r), {"lab": ({"speed": (False, "TimingFailure: clearly below"), "bw": (True, "")}, {}, {})},
                   "RETIME")
    assert failed["scores"]["lab"]["speed"] == 0.0 and failed["score"] == 2.0
    assert any("clearly below" in p for p in failed["problems"]) and not failed.get("pending")
    unclear = timed(r, to_time(r), {"lab": ({"speed": (True, ""), "bw": (True, "")}, {"speed": ["not clear"]},
                                            {"speed": {"S": [1.4, "desc"]}})}, "RETIME")
    assert unclear["scores"]["lab"]["speed"] == 0.0 and unclear["pending"] == {"lab": {"speed": 4.0}}
    assert not unclear.get("figures"), "a held timing never reaches a leaderboard"
    assert any(PENDING_MARK in p and "RETIME" in p for p in unclear["problems"])
    # timed again (--retime) and now clear: the points come back, the old notes go
    again = timed(unclear, to_time(unclear), {"lab": ({"speed": (True, "")}, {}, {})}, "RETIME")
    assert again["scores"]["lab"]["speed"] == 4.0 and not again.get("pending")
    assert not any(PENDING_MARK in p or "not clear" in p for p in again["problems"])


def test_a_timing_that_could_not_run_holds_its_points():
    from autograder.pipeline.results import timing_failed

    r = timing_failed(_marked(), "RuntimeError: its grader process did not finish", "RETIME")
    assert r["scores"]["lab"]["speed"] == 0.0 and r["pending"] == {"lab": {"speed": 4.0}}
    assert r["timing"]["lab"]["speed"] == ["the timing could not run (RuntimeError: its grader process did not finish)"]


# Today's two shapes of a result file, key for key in the order grade_untimed and the class run's failed
# grading have always built them (the file itself is written with its keys sorted: save_result)
LAYOUT = {"lab1": {"test_a": 2.0, "test_b": 3.0}}
GRADED = {"student": "ada", "lab": "lab1", "submission_sha256": "5f" * 32,
          "scores": {"lab1": {"test_a": 2.0, "test_b": 0.0}}, "score": 2.0, "max_score": 5.0,
          "problems": ["lab1.ipynb test_b: expected 3, got 4"], "seconds": 41.7, "grader_version": "0123456789abcdef",
          "sandbox": True, "sandbox_mode": "bubblewrap", "timing": {"lab1": {"test_b": ["no clear verdict"]}},
          "figures": {}, "bounds": {"peak_mb": 310, "oom_kills": 0, "cpu_s": 12.5, "forks_refused": 0,
                                    "memory_bound_mb": 4096}}
FAILED = {"student": "bob", "lab": "lab1", "submission_sha256": "", "seconds": 0.0,
          "scores": {"lab1": {"test_a": 0.0, "test_b": 0.0}}, "score": 0.0, "max_score": 5.0,
          "problems": ["grading failed (RuntimeError: boom); grade this student again"]}
FAILED_FILE = """{
 "lab": "lab1",
 "max_score": 5.0,
 "problems": [
  "grading failed (RuntimeError: boom); grade this student again"
 ],
 "score": 0.0,
 "scores": {
  "lab1": {
   "test_a": 0.0,
   "test_b": 0.0
  }
 },
 "seconds": 0.0,
 "student": "bob",
 "submission_sha256": ""
}"""
TIMED = {**GRADED, "timed_runs": 2, "bounds_timing": {"peak_mb": 200}, "pending": {"lab1": {"test_b": 3.0}}}


def test_a_result_is_built_in_today_s_two_shapes():
    from autograder.pipeline.results import GradingResult

    graded = GradingResult.graded("ada", "lab1", "5f" * 32, LAYOUT, GRADED["scores"], GRADED["problems"], 41.7,
                                  "0123456789abcdef", "bubblewrap", GRADED["timing"], {}, GRADED["bounds"])
    assert list(graded.to_json().items()) == list(GRADED.items())
    failed = GradingResult.failed("bob", "lab1", LAYOUT, "RuntimeError: boom")
    assert list(failed.to_json().items()) == list(FAILED.items())
    unsafe = GradingResult.graded("ada", "lab1", "", LAYOUT, GRADED["scores"], [], 1.0, "v", None, {}, {}, {})
    assert (unsafe.sandbox, unsafe.sandbox_mode) == (False, "none")  # --unsafe


@pytest.mark.parametrize("shape", [GRADED, FAILED, TIMED], ids=["graded", "failed", "timed"])
def test_a_result_round_trips_byte_for_byte(tmp_path, shape):
    """to_json(from_json(d)) has d's keys in d's order, and its file is d's file, byte for byte, whether d
    is built in memory or read back from its (key-sorted) file."""
    from autograder.pipeline.results import GradingResult, load_result, save_result

    save_result(tmp_path / "today", "s", shape)
    today = (tmp_path / "today" / "results" / "s.json").read_bytes()
    for d in (shape, load_result(tmp_path / "today", "s")):
        back = GradingResult.from_json(d).to_json()
        assert list(back.items()) == list(shape.items())
        save_result(tmp_path / "back", "s", back)
        assert (tmp_path / "back" / "results" / "s.json").read_bytes() == today
    if shape is FAILED:
        assert today.decode() == FAILED_FILE


def test_a_result_with_a_key_of_no_known_shape_is_refused():
    from autograder.pipeline.results import GradingResult

    with pytest.raises(ValueError, match="wrong_key"):
        GradingResult.from_json({**FAILED, "wrong_key": 1})


def test_a_students_graded_files_take_at_most_the_bound_and_the_one_left_out_is_named(tmp_path):
    """Issue 49: the output folder's use per student is bounded. A graded notebook larger than what is left
    of Limits.kept_mb is not copied into OUT, and the result says which file, how large, and that the score
    stands; a smaller file beside it is kept."""
    import json

    from autograder.pipeline.results import publish

    src = tmp_path / "work" / "ann" / "autograded" / "ann" / "lab1"
    src.mkdir(parents=True)
    (src / "lab1.ipynb").write_bytes(b"x" * (3 << 20))
    (src / "notes.html").write_bytes(b"<p>small</p>")
    result = {"student": "ann", "problems": []}
    publish(tmp_path / "out", "lab1", tmp_path / "work" / "ann", "ann", result, kept_mb=2)
    kept = tmp_path / "out" / "autograded" / "ann" / "lab1"
    assert sorted(p.name for p in kept.iterdir()) == ["notes.html"]
    saved = json.loads((tmp_path / "out" / "results" / "ann.json").read_text())
    assert any("lab1.ipynb" in p and "3 MB" in p and "not kept" in p for p in saved["problems"]), saved
    assert not (tmp_path / "work" / "ann").exists()  # the scratch course is gone, as after every student
    publish(tmp_path / "out2", "lab1", tmp_path / "nothing", "ann", {"student": "ann", "problems": []}, kept_mb=2)
    assert json.loads((tmp_path / "out2" / "results" / "ann.json").read_text())["problems"] == []
