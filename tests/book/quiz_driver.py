"""Answer a built page's self-check quiz in a real browser, as a reader would.

Each quiz on a page is two copies made by `speclab.quiz.show`: jupyterquiz's interactive one
(the `div[data-shufflequestions]` of the cell's output) and the text copy
(`.speclab-quiz-static`), whose `data-key` holds the answer key. For every question the driver
works on the interactive copy:

* numeric: it types each entry the key says is right (the answer as printed, and the exact
  value), presses Enter and reads the feedback, which must be marked correct; then it types
  each listed wrong value and a plainly wrong one, which must be marked incorrect (the plainly
  wrong one with the "Not quite" feedback);
* multiple choice: it clicks the option whose feedback is the right choice's in the key (the
  options are shuffled on screen, so it finds them by their feedback, not by position), which
  must be marked correct, and then every other option, which must be marked incorrect.

`answer_page` returns one `Result` per question; nothing is asserted here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from browser import open_page


@dataclass
class Result:
    question: int  # position on the page, from 0
    kind: str
    right: bool = True  # every right entry (or the right choice) was marked correct
    wrong: bool = True  # every wrong entry (or choice) was marked incorrect
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.right and self.wrong


def _feedback(wrapper) -> tuple[bool, str]:
    fb = wrapper.locator(".Feedback")
    return "correct" in (fb.get_attribute("class") or "").split(), fb.inner_text().strip()


def _type(wrapper, entry: str) -> tuple[bool, str]:
    box = wrapper.locator("input.Input-text")
    box.click()  # jupyterquiz clears the box on focus
    box.press_sequentially(entry)
    box.press("Enter")
    return _feedback(wrapper)


def answer_page(page, path: Path) -> list[Result]:
    """Open a built page and answer every quiz question on it (see the module docstring)."""
    open_page(page, path)
    quizzes = page.locator(".cell_output:has(.speclab-quiz-static)")
    results: list[Result] = []
    for qi in range(quizzes.count()):
        output = quizzes.nth(qi)
        key = json.loads(output.locator(".speclab-quiz-static").get_attribute("data-key"))
        page.wait_for_function("([el, n]) => el.querySelectorAll('.Quiz').length >= n",
                               arg=[output.locator("div[data-shufflequestions]").element_handle(), len(key)])
        wrappers = output.locator("div[data-shufflequestions] .Quiz")
        for i, k in enumerate(key):
            wrapper = wrappers.nth(i)
            r = Result(len(results), k["type"])
            if k["type"] == "numeric":
                for entry in k["typed"]:
                    ok, text = _type(wrapper, entry)
                    if not ok:
                        r.right = False
                        r.problems.append(f"typed {entry!r}, the answer, and got {text!r}")
                for entry in k["wrong"] + [k["miss"]]:
                    ok, text = _type(wrapper, entry)
                    if ok:
                        r.wrong = False
                        r.problems.append(f"typed {entry!r}, a wrong value, and got {text!r}")
                    elif entry == k["miss"] and not text.startswith("Not quite"):
                        r.wrong = False
                        r.problems.append(f"typed {entry!r} and got {text!r}, not the 'Not quite' feedback")
                for entry in k["short"]:
                    ok, text = _type(wrapper, entry)
                    if ok or text != k["short_feedback"]:
                        r.wrong = False
                        r.problems.append(f"typed {entry!r}, the answer with too few figures, and got {text!r}")
            else:
                options = wrapper.locator("label.MCButton")
                by_feedback = {options.nth(j).get_attribute("data-feedback"): options.nth(j) for j in range(options.count())}
                if k["right"] not in by_feedback:
                    r.right = False
                    r.problems.append(f"no option on screen has the key's feedback {k['right']!r}")
                else:
                    by_feedback[k["right"]].click()
                    ok, text = _feedback(wrapper)
                    if not ok:
                        r.right = False
                        r.problems.append(f"clicked the key's right option and got {text!r}")
                for why in k["wrong"]:
                    if why in by_feedback:
                        by_feedback[why].click()
                        ok, text = _feedback(wrapper)
                        if ok:
                            r.wrong = False
                            r.problems.append(f"clicked a wrong option ({why!r}) and it was marked correct")
            results.append(r)
    return results
