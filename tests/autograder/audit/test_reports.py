"""The audits' committed reports hold for this tree (autograder/audit/reports.py).

`make audit` measures what needs load, many students or a real lab's time, and each audit writes its report
with a digest of every file that can change its verdicts. Here, without running any audit: each committed report
is current (else "stale: run `make audit NAME`"), every verdict in it held, and it records what the issue of the
two tiers asks a report to hold. Then the checker itself, on reports made up for the purpose: a one-character
change of an input makes a report stale, and a failed assertion, a grade off its expected value or a mount
left behind each make it fail.
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autograder.audit import reports


@pytest.mark.parametrize("name", list(reports.AUDITS))
def test_the_committed_report_is_current_and_every_verdict_held(name):
    problems = reports.problems(name)
    assert not problems, f"autograder/audit/reports/{name}.json: " + "; ".join(problems)


@pytest.mark.parametrize("name", list(reports.AUDITS))
def test_a_report_records_the_grades_the_machine_its_load_and_the_wall_time(name):
    report = reports.load(name)
    assert report is not None, f"no report: run `make audit {name}`"
    assert report["machine"]["cores"] >= 1 and report["wall_s"] > 0
    assert {"loadavg_before", "loadavg_after", "busy_loops"} <= set(report["load"])
    assert report["load"]["busy_loops"] == (2 if reports.AUDITS[name].loaded else 0)
    assert set(report["left_behind"]) >= {"control_groups", "mounts"}
    for student, row in report["students"].items():
        assert row["cells"], student
        assert all({"score", "expected", "held"} <= set(cell) for cell in row["cells"].values()), student
    if name not in ("load_probe", "fake_timers"):  # these grade no student
        assert report["students"], name


def test_every_audit_module_is_registered_and_every_registered_audit_has_a_module():
    modules = {p.stem[len("test_"):] for p in reports.TESTS.glob("test_*.py")}
    assert modules == {n for n, a in reports.AUDITS.items() if not a.command}


def test_every_input_of_an_audit_exists():
    for audit in reports.AUDITS.values():
        for rel in audit.inputs():
            assert reports.files_of([rel]), f"{audit.name}: {rel} names no file"


# ------------------------------------------------------------------ the checker, on made-up reports
@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A repository of two files, one audit reading both, and its reports folder."""
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "lab1.py").write_text("POINTS = 2\n")
    (tmp_path / "labs.md").write_text("# lab\n")
    audit = reports.Audit("made_up", "An audit made up for the test.", extra=("checks", "labs.md"),
                          command=("-c", "pass"))
    monkeypatch.setattr(reports, "ROOT", tmp_path)
    monkeypatch.setattr(reports, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(reports, "COMMON", ())
    monkeypatch.setattr(reports, "AUDITS", {"made_up": audit})
    return tmp_path, audit


def held_report() -> dict:
    return {"tests": {"test_it": "passed"}, "left_behind": {"control_groups": [], "mounts": []},
            "students": {"s": {"cells": {"test_x": {"score": 2.0, "expected": 2.0, "held": True}}}}}


def test_a_report_as_written_holds(tree):
    reports.write("made_up", held_report())
    assert reports.problems("made_up") == []
    assert reports.stale() == []


def test_a_one_character_change_of_an_input_makes_the_report_stale(tree):
    root, _ = tree
    reports.write("made_up", held_report())
    (root / "checks" / "lab1.py").write_text("POINTS = 3\n")
    assert reports.problems("made_up") == ["stale: run `make audit made_up` (its report was measured on other inputs)"]
    assert reports.stale() == ["made_up"]
    (root / "checks" / "lab1.py").write_text("POINTS = 2\n")
    assert reports.problems("made_up") == []


def test_a_new_or_renamed_input_changes_the_digest_and_caches_do_not(tree):
    root, audit = tree
    before = reports.digest(audit)
    (root / "checks" / "__pycache__").mkdir()
    (root / "checks" / "__pycache__" / "lab1.cpython-311.pyc").write_bytes(b"\0")
    assert reports.digest(audit) == before
    (root / "checks" / "lab1.py").rename(root / "checks" / "lab2.py")
    assert reports.digest(audit) != before
    assert reports.digest(replace(audit, extra=("labs.md",))) != before


@pytest.mark.parametrize(("change", "says"), [
    (lambda r: r["tests"].update(test_it="failed"), "assertions not held: ['test_it']"),
    (lambda r: r["tests"].clear(), "records no assertion"),
    (lambda r: r["students"]["s"]["cells"]["test_x"].update(score=0.0, held=False),
     "grades not as expected: ['s test_x: 0.0 (expected 2.0)']"),
    (lambda r: r["left_behind"]["mounts"].append("/tmp/x"), "left behind: {'mounts': ['/tmp/x']}"),
])
def test_a_verdict_not_held_fails_the_report(tree, change, says):
    report = held_report()
    change(report)
    reports.write("made_up", report)
    assert any(says in p for p in reports.problems("made_up")), reports.problems("made_up")


def test_a_missing_report_names_the_command_that_writes_it(tree):
    assert reports.problems("made_up") == ["no report: run `make audit made_up`"]


def test_the_digest_is_written_by_the_writer_not_taken_from_the_caller(tree):
    _, audit = tree
    path = reports.write("made_up", {**held_report(), "digest": "forged"})
    assert json.loads(path.read_text())["digest"] == reports.digest(audit)


def test_the_audits_grade_record_holds_a_cell_only_at_its_expected_points():
    from audit_plugin import Grades

    grades = Grades()
    grades.student("right", {"a": 2.0, "b": 0.0}, {"a": 2.0, "b": 0.0})
    grades.student("wrong", {"a": 0.0, "b": 3.0}, {"a": 2.0, "b": 0.0})
    grades.student("held", {"a": 0.0}, {"a": 2.0}, held={"a": True}, pending={"a": 2.0})
    assert [c["held"] for c in grades.students["right"]["cells"].values()] == [True, True]
    assert [c["held"] for c in grades.students["wrong"]["cells"].values()] == [False, False]
    assert grades.students["held"]["cells"]["a"]["held"] and grades.students["held"]["pending"] == {"a": 2.0}
    with pytest.raises(ValueError, match="needs `held`"):  # a verdict in words must say whether it came out
        grades.student("words", {"a": 0.0}, {"a": "0 or held pending"})
