"""Stage 4, report (autograder/pipeline/report.py): grades.csv and the summary from result files."""
from __future__ import annotations

import csv
import dataclasses

import pytest

from autograder.pipeline.config import Config
from autograder.pipeline.report import head, summary
from autograder.pipeline.results import timing_notes

LAYOUT = {"lab1": {"test_a": 2.0, "test_b": 3.0}}
UNDECIDED = {"test_b": ["no clear verdict after 22 paired rounds (median 1.21x)"]}


def _result(student: str, a: float, b: float, problems=(), undecided=None) -> dict:
    """A result file as grade_student writes it: an undecided timing is a note and the `timing` entry."""
    timing = {"lab1": undecided} if undecided else {}
    return {"student": student, "lab": "lab1", "scores": {"lab1": {"test_a": a, "test_b": b}}, "score": a + b,
            "max_score": 5.0, "problems": list(problems) + timing_notes("lab1", undecided or {}), "timing": timing}


def test_summary_lists_students_in_order_with_their_first_problem(tmp_path):
    cfg = Config("lab1", tmp_path, tmp_path / "out")
    text = summary(cfg, LAYOUT, [_result("zoe", 2, 3), _result("al", 2, 0, ["lab1.ipynb test_b: wrong", "more"])])
    lines = text.splitlines()
    assert lines[1].startswith("al") and "lab1.ipynb test_b: wrong" in lines[1] and "more" in lines[2]
    assert lines[3].startswith("zoe") and "5/5" in lines[3]
    assert "2 students graded; mean 3.50, min 2, max 5 of 5; 1 with problems" in text
    assert "WITHOUT the sandbox" not in text
    assert "WITHOUT the sandbox" in summary(dataclasses.replace(cfg, unsafe=True), LAYOUT, [])


def test_csv_columns_follow_the_lab_and_rows_the_students(tmp_path, monkeypatch):
    from autograder.pipeline import report

    out = tmp_path / "out"
    (out / "template").mkdir(parents=True)
    (out / "template" / "gradebook.db").write_bytes(b"")
    cfg = Config("lab1", tmp_path, out)
    monkeypatch.setattr(report, "feedback", lambda *a, **k: 0)  # pages are tested in test_feedback.py

    class NoGradebook(Exception):
        pass

    def refuse(*a, **k):
        raise NoGradebook

    import nbgrader.api
    monkeypatch.setattr(nbgrader.api, "Gradebook", refuse)  # stop after the CSV: the gradebook is tested end to end
    try:
        report.merge(cfg, LAYOUT, [_result("zoe", 2, 3), _result("al", 0, 3, ["x"])])
    except NoGradebook:
        pass
    rows = list(csv.reader(open(out / "grades.csv")))
    assert rows[0] == ["student", "score", "max_score", "percent", "lab1:test_a", "lab1:test_b", "timing", "pending",
                       "problems"]
    assert rows[1] == ["al", "3", "5", "60.0", "0", "3", "", "", "x"] and rows[2][0] == "zoe"


def _csv(tmp_path, monkeypatch, results) -> list[dict]:
    """grades.csv of these results (merge stopped after the CSV, as above)."""
    import csv

    import nbgrader.api

    from autograder.pipeline import report

    out = tmp_path / "out"
    (out / "template").mkdir(parents=True)
    (out / "template" / "gradebook.db").write_bytes(b"")
    monkeypatch.setattr(report, "feedback", lambda *a, **k: 0)

    class NoGradebook(Exception):
        pass

    def refuse(*a, **k):
        raise NoGradebook

    monkeypatch.setattr(nbgrader.api, "Gradebook", refuse)
    with pytest.raises(NoGradebook):
        report.merge(Config("lab1", tmp_path, out), LAYOUT, results)
    with open(out / "grades.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_an_undecided_timing_fills_its_students_timing_cell_only(tmp_path, monkeypatch):
    rows = _csv(tmp_path, monkeypatch, [_result("al", 2, 3, undecided=UNDECIDED), _result("bo", 2, 3),
                                        _result("cy", 0, 3, ["lab1.ipynb test_a: AssertionError: 1 != 2"])])
    assert [(r["student"], r["timing"]) for r in rows] == [("al", "test_b: undecided"), ("bo", ""), ("cy", "")]
    assert "no clear verdict after 22 paired rounds" in rows[0]["problems"]


def test_a_long_note_is_whole_in_the_csv(tmp_path, monkeypatch):
    note = "lab1.ipynb test_a: AssertionError: " + "; ".join(f"token {i}: got 0.1, expected 0.2" for i in range(200))
    rows = _csv(tmp_path, monkeypatch, [_result("al", 0, 3, [note])])
    assert rows[0]["problems"] == note


def test_the_summary_names_each_undecided_timing_with_its_student(tmp_path):
    cfg = Config("lab1", tmp_path, tmp_path / "out")
    text = summary(cfg, LAYOUT, [_result("zoe", 2, 3, undecided=UNDECIDED), _result("al", 2, 3),
                                 _result("mo", 0, 3, ["lab1.ipynb test_a: wrong"],
                                         undecided={"test_a": ["a"], "test_b": ["b"]})])
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "without a clear verdict" in line)
    assert lines[at].startswith("3 timings without a clear verdict (neither given nor taken")
    assert lines[at + 1:at + 4] == ["  mo: lab1.ipynb test_a: a", "  mo: lab1.ipynb test_b: b",
                                    "  zoe: lab1.ipynb test_b: no clear verdict after 22 paired rounds (median 1.21x)"]
    assert "2 with problems" not in text and "1 with problems" in text  # an undecided timing is not a problem
    assert not any("undecided" in line for line in lines[:at])  # listed once, below the table
    clear = summary(cfg, LAYOUT, [_result("al", 2, 3)])
    assert "without a clear verdict" not in clear


def test_the_summary_shows_the_head_of_a_long_note(tmp_path):
    note = "lab1.ipynb test_a: AssertionError: the sums differ. " + " ".join(["detail"] * 2000)
    text = summary(Config("lab1", tmp_path, tmp_path / "out"), LAYOUT, [_result("al", 0, 3, [note])])
    line = text.splitlines()[1]
    assert line.startswith("al") and "the sums differ." in line and line.endswith(" [...]") and len(line) < 200
    assert head("one line") == "one line" and head("first\nsecond") == "first [...]"
