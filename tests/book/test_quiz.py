"""The quiz helper: what a chapter's self-check shows, with and without JavaScript, and whether
jupyterquiz accepts the right answers.

jupyterquiz rounds a typed number to `precision` significant figures before testing it against
each answer's half-open range (its js/numeric.js); `quiz.jupyterquiz_accepts` replays that check
in Python. tests/book/test_quiz_browser.py checks the same answers in a real browser.
"""

from __future__ import annotations

import json
import re

import pytest

from speclab import quiz

MC = quiz.MultipleChoice("Which is \\(p\\)?", [
    quiz.Choice("the target", True, "p is the target."),
    quiz.Choice("the draft", False, "q is the draft."),
    quiz.Choice("the residual", False, "The residual is what a rejection samples from."),
])
NUM = quiz.Numeric("E[N] at alpha = 0.8, k = 5?", 3.68928, "(1 - 0.8^6)/0.2.", sig=3, wrong=[(3.36, "no bonus")])


def answers_of(question) -> list[dict]:
    (entry,) = quiz.to_jupyterquiz([question])
    return entry["answers"]


def test_jupyterquiz_format_marks_the_right_answers():
    mc, num = quiz.to_jupyterquiz([MC, NUM])
    assert mc["type"] == "multiple_choice" and sorted(a["correct"] for a in mc["answers"]) == [False, False, True]
    assert num["type"] == "numeric" and num["precision"] == 3
    right = [a for a in num["answers"] if a.get("correct")]
    assert len(right) == 1 and right[0]["range"][0] <= 3.68928 < right[0]["range"][1]
    wrong = [a for a in num["answers"] if a["type"] == "range" and not a["correct"]]
    assert wrong and not (wrong[0]["range"][0] <= 3.68928 < wrong[0]["range"][1])
    assert num["answers"][-1]["type"] == "default"


@pytest.mark.parametrize("entry", ["3.69", "3.689", "3.68928", "3.6892800000000006", "3.68"])
def test_every_way_of_typing_the_answer_is_accepted(entry):
    assert quiz.jupyterquiz_accepts(entry, 3, answers_of(NUM))["correct"] is True


@pytest.mark.parametrize("entry, feedback", [("3.36", "no bonus"), ("3.7", NUM.short_feedback),
                                             ("4", NUM.short_feedback), ("3.8", None), ("-3.69", None)])
def test_wrong_entries_are_refused(entry, feedback):
    picked = quiz.jupyterquiz_accepts(entry, 3, answers_of(NUM))
    assert picked is None or picked["correct"] is False
    assert (picked or {}).get("feedback") == feedback


def test_an_answer_with_too_few_figures_is_told_so():
    """Issue 51: 3.7 typed for 3.69 (asked with 3 figures) is told to give 3 figures, not only "Not quite"; a
    fewer-figures value that the right answer or a listed wrong value already covers keeps that feedback."""
    assert [typed for typed, _ in NUM.short] == ["3.7", "4"]
    assert NUM.short_feedback.startswith("Give 3 significant figures")
    near = quiz.Numeric("x?", 0.9996, "", sig=3)  # 2 and 1 figures both give 1.0, which 3 figures accept
    assert near.short == [] and quiz.jupyterquiz_accepts("1", 3, answers_of(near))["correct"] is True
    taken = quiz.Numeric("y?", 0.973, "", sig=3, wrong=[(0.97, "that is 0.97")])
    assert [typed for typed, _ in taken.short] == ["1"]
    assert quiz.jupyterquiz_accepts("0.97", 3, answers_of(taken))["feedback"] == "that is 0.97"
    assert quiz.Numeric("n?", 6, "", sig=1).short == []  # a whole number: figures are not the issue
    assert quiz.jupyterquiz_accepts(NUM.miss, 3, answers_of(NUM)) is None


def test_the_old_decimal_places_reading_refused_the_exact_answer():
    """The bug of issue 29: `precision=digits` meant decimal places to the page and significant
    figures to jupyterquiz, so 2.9412 typed for 2.9412 became 2.9, outside [2.9362, 2.9462)."""
    old = [{"type": "range", "range": [2.9412 - 0.005, 2.9412 + 0.005], "correct": True}]
    assert quiz.jupyterquiz_accepts("2.9412", 2, old) is None
    new = quiz.Numeric("S?", 2.9412, "", sig=3)
    assert quiz.jupyterquiz_accepts("2.9412", new.sig, answers_of(new))["correct"] is True


@pytest.mark.parametrize("answer, sig", [(2.9412, 3), (3.68928, 2), (295.22, 3), (0.0999, 2), (9.996, 3),
                                         (1e-4 * 3.3333, 2), (1234567.0, 4), (-0.4375, 3), (6, 1), (20, 2)])
def test_the_shown_answer_and_the_exact_one_are_accepted_at_any_magnitude(answer, sig):
    q = quiz.Numeric("?", answer, "", sig=sig)
    for entry in (q.shown, repr(float(answer))):
        assert quiz.jupyterquiz_accepts(entry, sig, answers_of(q))["correct"] is True, (entry, q.accepted_range)
    assert quiz.jupyterquiz_accepts(q.miss, sig, answers_of(q)) is None


def test_the_prompt_says_what_form_the_answer_takes():
    assert NUM.prompt == "E[N] at alpha = 0.8, k = 5? (Give 3 significant figures.)"


def test_a_whole_number_answer_accepts_only_itself():
    q = quiz.Numeric("k*?", 6, "", sig=1)
    assert q.prompt.endswith("(Give a whole number.)")
    assert [e for e in ("5", "6", "7") if quiz.jupyterquiz_accepts(e, 1, answers_of(q))] == ["6"]


def test_text_copy_holds_every_question_and_answer_without_script():
    text = quiz.to_html([MC, NUM])
    assert "<script" not in text
    assert "Which is \\(p\\)?" in text and "E[N] at alpha = 0.8" in text
    letter = "abc"[[c.correct for c in MC.shuffled].index(True)]
    assert f"({letter}) the target" in text and "3.69" in text
    assert text.count("<details>") == 2  # questions folded once, the answers folded again inside
    key = json.loads(re.search(r'data-key="([^"]*)"', text).group(1).replace("&quot;", '"'))
    assert key[0] == {"type": "multiple_choice", "right": "p is the target.",
                      "wrong": ["q is the draft.", "The residual is what a rejection samples from."]}
    assert key[1]["typed"][0] == "3.69" and key[1]["wrong"] == ["3.36"]


def test_choices_are_shuffled_the_same_way_in_every_build_and_differently_across_questions():
    def mc(question):
        return quiz.MultipleChoice(question, [quiz.Choice(str(i), i == 0, f"why {i}") for i in range(4)])

    assert [c.text for c in mc("same").shuffled] == [c.text for c in mc("same").shuffled]
    positions = {[c.correct for c in mc(f"question {i}").shuffled].index(True) for i in range(40)}
    assert positions == {0, 1, 2, 3}


@pytest.mark.parametrize("make", [
    lambda: quiz.MultipleChoice("two right", [quiz.Choice("a", True, "x"), quiz.Choice("b", True, "y")]),
    lambda: quiz.MultipleChoice("none right", [quiz.Choice("a", False, "x"), quiz.Choice("b", False, "y")]),
    lambda: quiz.MultipleChoice("one choice", [quiz.Choice("a", True, "x")]),
    lambda: quiz.MultipleChoice("same feedback", [quiz.Choice("a", True, "x"), quiz.Choice("b", False, "x")]),
    lambda: quiz.Numeric("nan", float("nan"), ""),
    lambda: quiz.Numeric("negative tolerance", 1.0, "", tolerance=-0.1),
    lambda: quiz.Numeric("no figures", 1.0, "", sig=0),
    lambda: quiz.Numeric("wrong value accepted", 1.0, "", sig=2, wrong=[(1.04, "rounds to 1.0")]),
])
def test_malformed_questions_are_refused(make):
    with pytest.raises(ValueError):
        make()
