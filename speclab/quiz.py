"""Self-check quizzes for the book's chapters.

A quiz is a list of questions built in a code cell, so every numeric answer is computed by the
page (from ``speclab.theory`` or the chapter's own cells), never typed. :func:`show` displays it
twice:

* interactively, with ``jupyterquiz`` (answers are checked in the browser, feedback per choice);
* as plain HTML inside a ``<details>`` element: the questions and, folded under them, the
  answers with their explanations. This copy needs no JavaScript (it prints, and it reads in a
  notebook viewer or with scripts blocked).

How jupyterquiz checks a number (``js/numeric.js`` of jupyterquiz 2.9): when a question has a
``precision``, the reader's entry is first rounded to that many **significant figures**
(``Number(x).toPrecision(precision)``), and the rounded value is then tested against each
answer's half-open ``range`` ``[lo, hi)`` in order; the first range that holds it decides. A
range must therefore be built around the *rounded* values a reader can produce, not around the
exact answer: with ``precision = 2`` an entry of 3.69 becomes 3.7, which a range of
``[3.684, 3.694)`` rejects however exactly the reader computed. :class:`Numeric` does that
arithmetic once (:meth:`Numeric.accepted_range`), and :func:`jupyterquiz_accepts` replays the
browser's check in Python for the tests.

Multiple-choice options are shuffled with a seed taken from the question's text, so the right
option sits at a different letter from question to question but at the same letter in every
build (the text copy's answer key stays put), and jupyterquiz shuffles them again on screen.

Math in questions is written between ``\\(`` and ``\\)``, the delimiters MathJax typesets in
cell outputs.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import random
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["Choice", "MultipleChoice", "Numeric", "show", "to_jupyterquiz", "to_html", "round_sig",
           "format_sig", "jupyterquiz_accepts"]


def round_sig(x: float, sig: int) -> float:
    """``x`` rounded to ``sig`` significant figures (what JavaScript's toPrecision keeps)."""
    return float(f"{float(x):.{sig - 1}e}")


def _unit(x: float, sig: int) -> float:
    """One unit in the last significant place of ``x`` written with ``sig`` figures."""
    x = round_sig(x, sig)
    if x == 0:
        return 10.0 ** (1 - sig)
    return 10.0 ** (math.floor(math.log10(abs(x))) - sig + 1)


def _tidy(x: float) -> float:
    """A range end written with 12 significant figures (3.675, not 3.6750000000000003)."""
    return float(f"{x:.12g}")


def format_sig(x: float, sig: int) -> str:
    """``x`` written with ``sig`` significant figures and no exponent, e.g. 3.69 or 295."""
    r = round_sig(x, sig)
    if r == 0:
        return "0"
    decimals = max(0, sig - 1 - math.floor(math.log10(abs(r))))
    return f"{r:.{decimals}f}"


def jupyterquiz_accepts(entry: str, precision: int, answers: Sequence[dict]) -> dict | None:
    """The answer entry jupyterquiz's numeric check picks for a typed ``entry``, or None.

    A Python replay of ``check_numeric`` (jupyterquiz 2.9, ``js/numeric.js``): the entry is
    rounded to ``precision`` significant figures, then the first ``range`` ``[lo, hi)`` holding
    it wins. Used by the tests; the browser test checks the real thing.
    """
    value = float(entry)
    if precision > 0:
        value = round_sig(value, precision)
    for answer in answers:
        if "range" in answer and answer["range"][0] <= value < answer["range"][1]:
            return answer
    return None


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
        if len({c.why for c in self.choices}) != len(self.choices):
            raise ValueError(f"each choice needs its own feedback (it names the choice on the page): {self.question!r}")

    @property
    def shuffled(self) -> list[Choice]:
        """The choices in the order the page shows them: shuffled with a seed from the question's
        text, so the order changes from question to question but not from build to build."""
        seed = int.from_bytes(hashlib.sha256(self.question.encode()).digest()[:8], "big")
        order = list(self.choices)
        random.Random(seed).shuffle(order)
        return order


@dataclass(frozen=True)
class Numeric:
    """A question with a number for answer.

    ``answer`` must come from a computation in the page. The reader's entry is rounded to
    ``sig`` significant figures (as jupyterquiz does) and is right when that rounded value is
    within ``tolerance`` of ``answer`` (by default one unit in the last significant place, or
    none for a whole-number answer); ``answer`` rounded to ``sig`` figures is always right. ``wrong`` lists common wrong values
    with the feedback each deserves.
    """

    question: str
    answer: float
    explanation: str
    sig: int = 3
    tolerance: float | None = None
    wrong: Sequence[tuple[float, str]] = field(default_factory=tuple)

    def __post_init__(self):
        answer = float(self.answer)
        if not math.isfinite(answer):
            raise ValueError(f"the answer must be a finite number: {self.question!r}")
        if not (isinstance(self.sig, int) and 1 <= self.sig <= 12):
            raise ValueError(f"sig must be a whole number of significant figures, 1 to 12: {self.question!r}")
        if self.tolerance is not None and not self.tolerance >= 0:
            raise ValueError(f"the tolerance must be >= 0: {self.question!r}")
        lo, hi = self.accepted_range
        for value, _ in self.wrong:
            w_lo, w_hi = self.wrong_range(value)
            if w_lo < hi and lo < w_hi:
                raise ValueError(f"the wrong value {value} is accepted as right: {self.question!r}")

    @property
    def shown(self) -> str:
        """The answer as the page prints it (and as a reader may type it)."""
        if self.whole:
            return str(int(round(float(self.answer))))
        return format_sig(self.answer, self.sig)

    @property
    def whole(self) -> bool:
        """True when the answer is a whole number that ``sig`` figures write out in full."""
        a = float(self.answer)
        return a == round(a) and round_sig(a, self.sig) == a

    @property
    def accepted_range(self) -> tuple[float, float]:
        """The half-open range ``[lo, hi)`` of rounded entries that are right.

        Rounded entries are multiples of one unit ``u`` in the last significant place; the range
        runs half a unit beyond the smallest and the largest accepted multiple, so no rounded
        entry ever sits on its boundary.
        """
        answer, u = float(self.answer), _unit(self.answer, self.sig)
        if self.tolerance is not None:
            tol = float(self.tolerance)
        else:
            tol = 0.0 if self.whole else u
        shown = round_sig(answer, self.sig)
        lo_k = min(math.ceil((answer - tol) / u - 1e-9), round(shown / u))
        hi_k = max(math.floor((answer + tol) / u + 1e-9), round(shown / u))
        return _tidy((lo_k - 0.5) * u), _tidy((hi_k + 0.5) * u)

    def wrong_range(self, value: float) -> tuple[float, float]:
        """Entries that round to the same ``sig`` figures as a listed wrong value."""
        u = _unit(value, self.sig)
        centre = round_sig(value, self.sig)
        return _tidy(centre - 0.5 * u), _tidy(centre + 0.5 * u)

    @property
    def short(self) -> list[tuple[str, tuple[float, float]]]:
        """The answer written with fewer figures than asked, as a reader may type it, and the range of rounded
        entries that match it, for each number of figures below ``sig`` whose range is not already taken by
        the right answer or a listed wrong value (none for a whole-number answer)."""
        if self.whole:
            return []
        taken = self._listed_ranges
        out = []
        for figures in range(self.sig - 1, 0, -1):
            typed = format_sig(self.answer, figures)
            lo, hi = self.wrong_range(float(typed))
            if all(hi <= t_lo or t_hi <= lo for t_lo, t_hi in taken):
                out.append((typed, (lo, hi)))
                taken.append((lo, hi))
        return out

    @property
    def _listed_ranges(self) -> list[tuple[float, float]]:
        """The ranges of rounded entries the right answer and each listed wrong value take."""
        return [self.accepted_range] + [self.wrong_range(v) for v, _ in self.wrong]

    @property
    def short_feedback(self) -> str:
        return (f"Give {self.sig} significant figures: your entry has fewer, or is the answer rounded to fewer. "
                "Try again with more digits.")

    @property
    def miss(self) -> str:
        """A plainly wrong entry (none of the listed answers), for the tests' "not quite" case."""
        ranges = self._listed_ranges + [r for _, r in self.short]
        candidate = abs(float(self.answer)) * 1.37 + 1.3
        while any(lo <= round_sig(candidate, self.sig) < hi for lo, hi in ranges):
            candidate = candidate * 1.37 + 1.3
        return format_sig(candidate, self.sig)

    @property
    def prompt(self) -> str:
        """The question with the form of the answer it expects."""
        form = "a whole number" if self.whole else f"{self.sig} significant figure{'s' if self.sig > 1 else ''}"
        return f"{self.question} (Give {form}.)"


NOT_QUITE = "Not quite: try again, or open the answers below."


def to_jupyterquiz(questions: Sequence[MultipleChoice | Numeric]) -> list[dict]:
    """The questions in jupyterquiz's JSON format."""
    out = []
    for q in questions:
        if isinstance(q, MultipleChoice):
            out.append({
                "question": q.question,
                "type": "multiple_choice",
                "answers": [{"answer": c.text, "correct": c.correct, "feedback": c.why} for c in q.shuffled],
            })
        elif isinstance(q, Numeric):
            answers = [{"type": "range", "range": list(q.accepted_range), "correct": True,
                        "feedback": f"Right: {q.shown}. {q.explanation}"}]
            for value, why in q.wrong:
                answers.append({"type": "range", "range": list(q.wrong_range(value)), "correct": False,
                                "feedback": why})
            for _, short_range in q.short:
                answers.append({"type": "range", "range": list(short_range), "correct": False,
                                "feedback": q.short_feedback})
            answers.append({"type": "default", "feedback": NOT_QUITE})
            out.append({"question": q.prompt, "type": "numeric", "precision": q.sig, "answers": answers})
        else:
            raise TypeError(f"not a quiz question: {q!r}")
    return out


def answer_key(questions: Sequence[MultipleChoice | Numeric]) -> list[dict]:
    """What the browser test needs to answer each question: the entries a reader may type (or the
    feedback that names the right choice), the listed wrong values and a plainly wrong entry."""
    key = []
    for q in questions:
        if isinstance(q, MultipleChoice):
            key.append({"type": "multiple_choice", "right": next(c.why for c in q.choices if c.correct),
                        "wrong": [c.why for c in q.choices if not c.correct]})
        else:
            key.append({"type": "numeric", "typed": [q.shown, f"{float(q.answer):.10g}"],
                        "wrong": [format_sig(v, q.sig) for v, _ in q.wrong], "miss": q.miss,
                        "short": [typed for typed, _ in q.short], "short_feedback": q.short_feedback})
    return key


def to_html(questions: Sequence[MultipleChoice | Numeric]) -> str:
    """The quiz as static HTML: numbered questions, then the answers folded in a ``<details>``."""
    items, answers = [], []
    for q in questions:
        if isinstance(q, MultipleChoice):
            text = html.escape(q.question, quote=False)
            shown = q.shuffled
            options = "".join(f"<li>{html.escape(c.text, quote=False)}</li>" for c in shown)
            items.append(f"<li><p>{text}</p><ol type='a'>{options}</ol></li>")
            letter = "abcdefgh"[[c.correct for c in shown].index(True)]
            right = next(c for c in shown if c.correct)
            answers.append(f"<li>({letter}) {html.escape(right.text, quote=False)}. "
                           f"{html.escape(right.why, quote=False)}</li>")
        else:
            items.append(f"<li><p>{html.escape(q.prompt, quote=False)}</p></li>")
            answers.append(f"<li>{q.shown}. {html.escape(q.explanation, quote=False)}</li>")
    key = html.escape(json.dumps(answer_key(questions)), quote=True)
    return (
        f"<div class='speclab-quiz-static tex2jax_process mathjax_process' data-key=\"{key}\">"
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
    display_quiz(to_jupyterquiz(questions), shuffle_answers=True, max_width=760)
    display(Javascript(TYPESET_WHEN_READY))
    display(HTML(to_html(questions)))
