"""Self-check quizzes for the book's chapters.

A quiz is a list of questions built in a code cell, so every numeric answer is computed by the
page (from ``speclab.theory`` or the chapter's own cells), never typed. :func:`show` displays it
twice:

* interactively, with ``jupyterquiz`` (answers are checked in the browser, feedback per choice);
* as plain HTML inside a ``<details>`` element: the questions and, folded under them, the
  answers with their explanations. This copy needs no JavaScript (it prints, and it reads in a
  notebook viewer or with scripts blocked).

Math in questions is written between ``\\(`` and ``\\)``, the delimiters MathJax typesets in
cell outputs.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["Choice", "MultipleChoice", "Numeric", "show", "to_jupyterquiz", "to_html"]


@dataclass(frozen=True)
class Choice:
    """One option of a multiple-choice question; ``why`` is the feedback shown once picked."""

    text: str
    correct: bool
    why: str


@dataclass(frozen=True)
class MultipleChoice:
    question: str
    choices: Sequence[Choice]

    def __post_init__(self):
        if len(self.choices) < 2:
            raise ValueError(f"a multiple-choice question needs at least two choices: {self.question!r}")
        if sum(c.correct for c in self.choices) != 1:
            raise ValueError(f"exactly one choice must be correct: {self.question!r}")


@dataclass(frozen=True)
class Numeric:
    """A question with a number for answer; any reply within ``tolerance`` of ``answer`` is right.

    ``answer`` must come from a computation in the page; ``digits`` is how it is printed.
    """

    question: str
    answer: float
    tolerance: float
    explanation: str
    digits: int = 2
    wrong: Sequence[tuple[float, str]] = field(default_factory=tuple)  # (a common wrong value, why)

    def __post_init__(self):
        answer = float(self.answer)
        if not math.isfinite(answer):
            raise ValueError(f"the answer must be a finite number: {self.question!r}")
        if not self.tolerance > 0:
            raise ValueError(f"the tolerance must be positive: {self.question!r}")
        for value, _ in self.wrong:
            if abs(float(value) - answer) <= self.tolerance:
                raise ValueError(f"the wrong value {value} is accepted as right: {self.question!r}")


def _fmt(x: float, digits: int) -> str:
    return f"{float(x):.{digits}f}"


def to_jupyterquiz(questions: Sequence[MultipleChoice | Numeric]) -> list[dict]:
    """The questions in jupyterquiz's JSON format."""
    out = []
    for q in questions:
        if isinstance(q, MultipleChoice):
            out.append({
                "question": q.question,
                "type": "multiple_choice",
                "answers": [{"answer": c.text, "correct": c.correct, "feedback": c.why} for c in q.choices],
            })
        elif isinstance(q, Numeric):
            answer = float(q.answer)
            answers = [{
                "type": "range",
                "range": [answer - q.tolerance, answer + q.tolerance],
                "correct": True,
                "feedback": f"Right: {_fmt(answer, q.digits)}. {q.explanation}",
            }]
            for value, why in q.wrong:
                half = q.tolerance / 2
                answers.append({"type": "range", "range": [float(value) - half, float(value) + half],
                                "correct": False, "feedback": why})
            answers.append({"type": "default", "feedback": "Not quite: try again, or open the answers below."})
            out.append({"question": q.question, "type": "numeric", "precision": q.digits, "answers": answers})
        else:
            raise TypeError(f"not a quiz question: {q!r}")
    return out


def to_html(questions: Sequence[MultipleChoice | Numeric]) -> str:
    """The quiz as static HTML: numbered questions, then the answers folded in a ``<details>``."""
    items, answers = [], []
    for q in questions:
        text = html.escape(q.question, quote=False)
        if isinstance(q, MultipleChoice):
            options = "".join(f"<li>{html.escape(c.text, quote=False)}</li>" for c in q.choices)
            items.append(f"<li><p>{text}</p><ol type='a'>{options}</ol></li>")
            letter = "abcdefgh"[[c.correct for c in q.choices].index(True)]
            right = next(c for c in q.choices if c.correct)
            answers.append(f"<li>({letter}) {html.escape(right.text, quote=False)}: {html.escape(right.why, quote=False)}</li>")
        else:
            items.append(f"<li><p>{text}</p></li>")
            answers.append(f"<li>{_fmt(q.answer, q.digits)} (within {q.tolerance:g}). "
                           f"{html.escape(q.explanation, quote=False)}</li>")
    return (
        "<div class='speclab-quiz-static tex2jax_process mathjax_process'>"
        "<details><summary>The quiz as text, with answers (no JavaScript needed)</summary>"
        f"<ol>{''.join(items)}</ol>"
        f"<details><summary>Answers</summary><ol>{''.join(answers)}</ol></details>"
        "</details></div>"
    )


# jupyterquiz typesets its math when it draws the quiz, which on a book page happens while the
# page is still loading, before the (deferred) MathJax script has run. This waits for MathJax
# and typesets every quiz on the page once it is ready.
TYPESET_WHEN_READY = """
(function typesetQuizzes(tries) {
  var mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
    mj.startup.promise.then(function () {
      return mj.typesetPromise(Array.prototype.slice.call(document.querySelectorAll('.Quiz')));
    });
  } else if (tries < 600) {
    setTimeout(function () { typesetQuizzes(tries + 1); }, 100);
  }
})(0);
"""


def show(questions: Sequence[MultipleChoice | Numeric]) -> None:
    """Display the interactive quiz and, under it, its static copy."""
    from IPython.display import HTML, Javascript, display
    from jupyterquiz import display_quiz

    if len(questions) < 1:
        raise ValueError("a quiz needs at least one question")
    display_quiz(to_jupyterquiz(questions), shuffle_answers=False, max_width=760)
    display(Javascript(TYPESET_WHEN_READY))
    display(HTML(to_html(questions)))
