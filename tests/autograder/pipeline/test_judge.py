"""The grader's own verdict on one cell (autograder/pipeline/judge.py `run_check`): what it hands on.

A check module written here (no sandbox, no nbgrader: these checks never call the student's
functions) stands for a lab. A failing check's message must come back whole, however long, and
cut only past the cap, with a line saying by how much; a timing the check could not decide
(autograder.checks.timing.undecided) must come back with that cell's verdict, pass or fail, and
only with it, and a check without one must come back with none.
"""
from __future__ import annotations

import types

import pytest

from autograder.checks import add_folder, timing
from autograder.inside.recheck import MESSAGE_CAP
from autograder.pipeline.judge import CellCheck, run_check

MODULE = "autograder.checks.judge_fake_lab"
LONG = "the sums differ. " + "Largest differences: " + "; ".join(f"token {i}: got 0.{i:04d}, expected 0.0100"
                                                                   for i in range(200))
CHECKS = f'''
from autograder.checks import timing

LONG = {LONG!r}


def check_long(f):
    raise AssertionError(LONG)


def check_huge(f):
    raise AssertionError("y" * {MESSAGE_CAP + 500})


def check_silent(f):
    assert False


def check_clear(f):
    pass


def check_keyed(f):
    from autograder.checks import hidden

    assert hidden.active() and hidden.seed("x", 1) != 1, "no key"


def check_unkeyed(f):
    from autograder.checks import hidden

    assert not hidden.active() and hidden.seed("x", 1) == 1, "a key"


def check_undecided(f):
    timing.undecided("no clear verdict after 22 paired rounds (median 1.21x)")


def check_undecided_then_fails(f):
    timing.undecided("first clause: no clear verdict after 22 paired rounds")
    raise timing.TimingFailure("second clause: 0.8x, clearly below the required 1.3x")
'''


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab_checks")
    (folder / "judge_fake_lab.py").write_text(CHECKS)
    add_folder(folder)
    return folder


def verdict(check: str, key: bytes | None = None) -> tuple[bool, str, list[str]]:
    harness = types.SimpleNamespace(refs={})  # the checks here never call the student's function
    return run_check(harness, CellCheck("test_x", MODULE, ((check, ("f",)),)), call_timeout_s=5, key=key)


def test_a_check_runs_under_the_students_key_and_only_there(lab):
    """Issue 31: the grading run's key (autograder/checks/hidden.py) reaches the check in the grader's process."""
    assert verdict("check_keyed", key=bytes(32)) == (True, "", [])
    assert verdict("check_unkeyed") == (True, "", [])
    assert verdict("check_keyed")[0] is False


def test_a_long_message_comes_back_whole(lab):
    ok, err, notes = verdict("check_long")
    assert len(LONG) > 5000
    assert (ok, err, notes) == (False, f"AssertionError: {LONG}", [])


def test_a_message_past_the_cap_is_cut_with_a_marker(lab):
    ok, err, _ = verdict("check_huge")
    whole = "AssertionError: " + "y" * (MESSAGE_CAP + 500)
    assert not ok and err == whole[:MESSAGE_CAP] + f"\n[... cut: {len(whole) - MESSAGE_CAP} more characters]"


def test_a_check_without_a_message_says_so(lab):
    assert verdict("check_silent") == (False, "AssertionError (the check gave no message)", [])


@pytest.mark.parametrize("check, want", [
    ("check_clear", (True, "", [])),
    ("check_undecided", (True, "", ["no clear verdict after 22 paired rounds (median 1.21x)"])),
    ("check_undecided_then_fails", (False, "TimingFailure: second clause: 0.8x, clearly below the required 1.3x",
                                    ["first clause: no clear verdict after 22 paired rounds"])),
])
def test_an_undecided_timing_comes_back_with_its_cell_only(lab, check, want, capsys):
    assert verdict(check) == want
    assert verdict("check_clear") == (True, "", [])  # the next cell starts with no notes
    assert "timing undecided" not in capsys.readouterr().out  # recorded, not printed under the progress bar
    timing.undecided("outside a check")  # and the record ended with the check
    assert capsys.readouterr().out == "timing undecided: outside a check\n"
