"""The quiz helper: what a chapter's self-check shows, with and without JavaScript."""

from __future__ import annotations

import pytest

from speclab import quiz

MC = quiz.MultipleChoice("Which is \\(p\\)?", [
    quiz.Choice("the target", True, "p is the target."),
    quiz.Choice("the draft", False, "q is the draft."),
])
NUM = quiz.Numeric("E[N] at alpha = 0.8, k = 5?", 3.68928, 0.005, "(1 - 0.8^6)/0.2.", wrong=[(3.36, "no bonus")])


def test_jupyterquiz_format_marks_the_right_answers():
    mc, num = quiz.to_jupyterquiz([MC, NUM])
    assert mc["type"] == "multiple_choice" and [a["correct"] for a in mc["answers"]] == [True, False]
    assert num["type"] == "numeric"
    right = [a for a in num["answers"] if a.get("correct")]
    assert len(right) == 1 and right[0]["range"][0] <= 3.68928 <= right[0]["range"][1]
    wrong = [a for a in num["answers"] if a["type"] == "range" and not a["correct"]]
    assert wrong and not (wrong[0]["range"][0] <= 3.68928 <= wrong[0]["range"][1])
    assert num["answers"][-1]["type"] == "default"


def test_text_copy_holds_every_question_and_answer_without_script():
    text = quiz.to_html([MC, NUM])
    assert "<script" not in text
    assert "Which is \\(p\\)?" in text and "E[N] at alpha = 0.8" in text
    assert "(a) the target" in text and "3.69" in text
    assert text.count("<details>") == 2  # questions folded once, the answers folded again inside


@pytest.mark.parametrize("make", [
    lambda: quiz.MultipleChoice("two right", [quiz.Choice("a", True, ""), quiz.Choice("b", True, "")]),
    lambda: quiz.MultipleChoice("none right", [quiz.Choice("a", False, ""), quiz.Choice("b", False, "")]),
    lambda: quiz.MultipleChoice("one choice", [quiz.Choice("a", True, "")]),
    lambda: quiz.Numeric("nan", float("nan"), 0.1, ""),
    lambda: quiz.Numeric("no tolerance", 1.0, 0.0, ""),
    lambda: quiz.Numeric("wrong value accepted", 1.0, 0.1, "", wrong=[(1.05, "too close")]),
])
def test_malformed_questions_are_refused(make):
    with pytest.raises(ValueError):
        make()
