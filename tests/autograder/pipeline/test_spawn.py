"""A grading step in a grader process of its own (autograder/pipeline/spawn.py): the steps it may run are
named, one by one. The processes themselves are started by every class graded in
tests/autograder/pipeline/test_grade.py and test_isolation.py."""
from __future__ import annotations

import pytest

from autograder.pipeline import grade, spawn
from autograder.pipeline.config import Config


def test_the_steps_are_grade_s_own():
    assert spawn.STEPS == {"grade_untimed": grade.grade_untimed, "time_student": grade.time_student}


@pytest.mark.parametrize("what", ["grade_class", "globals", "in_own_process"])
def test_no_other_name_starts_a_process(tmp_path, what):
    with pytest.raises(ValueError, match="no grading step"):
        spawn.in_own_process(what, Config("lab1", tmp_path, tmp_path), {}, "ada", tmp_path, 0, b"k", limit_s=5)
