"""Stage 4, report (autograder/pipeline/report.py): grades.csv and the summary from result files."""
from __future__ import annotations

import csv

from autograder.pipeline.config import Config
from autograder.pipeline.report import summary

LAYOUT = {"lab1": {"test_a": 2.0, "test_b": 3.0}}


def _result(student: str, a: float, b: float, problems=()) -> dict:
    return {"student": student, "lab": "lab1", "scores": {"lab1": {"test_a": a, "test_b": b}}, "score": a + b,
            "max_score": 5.0, "problems": list(problems)}


def test_summary_lists_students_in_order_with_their_first_problem(tmp_path):
    cfg = Config("lab1", tmp_path, tmp_path / "out")
    text = summary(cfg, LAYOUT, [_result("zoe", 2, 3), _result("al", 2, 0, ["lab1.ipynb test_b: wrong", "more"])])
    lines = text.splitlines()
    assert lines[1].startswith("al") and "lab1.ipynb test_b: wrong" in lines[1] and "more" in lines[2]
    assert lines[3].startswith("zoe") and "5/5" in lines[3]
    assert "2 students graded; mean 3.50, min 2, max 5 of 5; 1 with problems" in text
    assert "WITHOUT the sandbox" not in text
    cfg.unsafe = True
    assert "WITHOUT the sandbox" in summary(cfg, LAYOUT, [])


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
    assert rows[0] == ["student", "score", "max_score", "percent", "lab1:test_a", "lab1:test_b", "problems"]
    assert rows[1] == ["al", "3", "5", "60.0", "0", "3", "x"] and rows[2][0] == "zoe"
