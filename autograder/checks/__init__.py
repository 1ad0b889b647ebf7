"""Checks that the labs' hidden nbgrader test cells call.

`stats` holds the lab-independent statistics (total-variation tests with a
Bonferroni union bound, power lower bounds, readable failure messages);
`lab1`, `lab2`, ... hold one check function per graded test cell and a `CELLS`
list of `CellSpec`: the one description of a lab's graded cells, from which
`autograder.authoring.labs` checks the test cells of `solutions/<lab>/<lab>.md` and
`autograder.audit.power` computes false-failure bounds and mutant detection.
Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

# Set by the grading pipeline for its nbgrader run only; written by defer_value, read by deferred_names
DEFER_ENV = "SPECLAB_DEFER_CHECKS"
# Folders (os.pathsep-separated) holding check modules of labs that live outside this package: a course's
# own lab, or the test suite's tiny lab. The pipeline sets it in the sandbox for `Config.lab_checks`.
LAB_CHECKS_ENV = "SPECLAB_LAB_CHECKS"
# nbgrader's markers of a test cell's hidden tests (its ClearHiddenTests defaults, as a Python comment)
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def add_folder(folder) -> None:
    """Let `autograder.checks.<lab>` also find the module `<lab>.py` in folder (this process only)."""
    folder = os.path.abspath(str(folder))
    if folder not in __path__:
        __path__.append(folder)


for _folder in filter(None, os.environ.get(LAB_CHECKS_ENV, "").split(os.pathsep)):
    add_folder(_folder)


def defer_value(checks: dict[str, list[str]]) -> str:
    """DEFER_ENV's value naming checks (module -> check names): "module:check,check;module:check"."""
    return ";".join(f"{module}:{','.join(names)}" for module, names in checks.items())


def deferred_names(module: str, value: str | None = None) -> list[str]:
    """The check names that DEFER_ENV's value (default: this process's environment) names for module."""
    value = os.environ.get(DEFER_ENV, "") if value is None else value
    names: list[str] = []
    for item in value.split(";"):
        mod, _, listed = item.partition(":")
        if mod == module:
            names += filter(None, listed.split(","))
    return names


@dataclass(frozen=True)
class Rule:
    """One requirement a hidden check enforces, in the words the student reads.

    `make labs` writes every rule of a cell into the solution cell that defines the cell's
    functions (autograder/authoring/labs.py), and a check that fails says which rule it
    found broken (`under`), so a student never loses a point to a rule the notebook does not
    state. tests/autograder/authoring/test_rules.py holds the checks to this."""

    name: str  # a short handle, unique in its lab
    text: str  # one or two sentences, addressed to the student

    def __str__(self) -> str:
        return self.text


def rule_failure(rule: Rule, message: str) -> AssertionError:
    """The failure of a hidden check that found `rule` broken: a plain AssertionError (what nbgrader,
    the harness and the feedback know) whose message ends with the rule, and whose `rule` names it."""
    err = AssertionError(f"{message}\nThe rule: {rule.text}")
    err.rule = rule
    return err


@contextmanager
def under(rule: Rule) -> Iterator[None]:
    """Every assertion failing inside this block is a breach of `rule` (its `rule` attribute names it).
    A timing failure keeps its own class (the pipeline treats it apart) and gains the rule's text."""
    try:
        yield
    except AssertionError as err:
        if getattr(err, "rule", None) is not None:
            raise
        from .timing import TimingFailure

        if isinstance(err, TimingFailure):
            timed = type(err)(f"{err}\nThe rule: {rule.text}")
            timed.rule = rule
            raise timed from None
        raise rule_failure(rule, str(err)) from None


@dataclass(frozen=True)
class CellSpec:
    """One graded test cell, the one description every consumer reads (the judge, the feedback, the
    power report, the answer scan, `make labs`): what it checks, its points, its rules, its statistical
    cases (if any), how it is judged and its seed."""

    grade_id: str
    part: int
    points: int
    check: Callable
    args: tuple[str, ...]  # names of the student's functions passed to check, in order
    cases: Callable | None = None  # () -> list[stats.ExactnessCase]; None: a deterministic check
    seed: int | None = None  # its randomness's seed outside a grading run (in one, drawn from the run's key)
    rules: tuple[Rule, ...] = ()  # every rule the check enforces (and no other), stated to the student
    note: str = ""  # a cell without cases: why a correct implementation cannot fail it (the power report)
    timed: bool = False  # a timing: the pipeline judges it alone, after the class's other checks
    randomised: bool = False  # without cases, its verdict on a wrong solution still depends on chance
    in_grader: bool = True  # False: judged inside the notebook (it passes the student what cannot cross)
    seed_name: str = ""  # the label its seed is drawn under from a run's key (default: the grade id)

    def call(self) -> str:
        """The hidden test's call, in the notebook's names."""
        return f"_checks.{self.check.__name__}({', '.join(self.args)})"

    def draw_seed(self) -> int:
        """Its seed: `seed` outside a grading run, else drawn from the run's key (autograder/checks/hidden.py)."""
        from . import hidden

        if self.seed is None:
            raise ValueError(f"{self.grade_id} has no seed")
        return hidden.seed(self.seed_name or self.grade_id, self.seed)


def spec_of(cells: list[CellSpec], grade_id: str) -> CellSpec:
    """The cell of `cells` with this grade id."""
    for cell in cells:
        if cell.grade_id == grade_id:
            return cell
    raise KeyError(grade_id)


def defer_to_grader(namespace: dict) -> None:
    """Called at the end of each checks module, after its `CELLS`. In the grading pipeline's nbgrader
    run, the checks named in DEFER_ENV become no-ops when a notebook calls them: the grader runs each
    of them once, itself, with the student's functions in the sandbox (autograder/pipeline/judge.py),
    and keeps the lower of nbgrader's score and its own, so a no-op here only leaves the decision to
    the grader (and saves running every statistical check twice). A check whose cell says
    `in_grader=False` (it passes the student something that cannot cross the sandbox) is never
    deferred. Outside the pipeline (a student's notebook, a plain `nbgrader autograde`) nothing changes."""
    module = namespace["__name__"]
    kept = {cell.check.__name__ for cell in namespace.get("CELLS", ()) if not cell.in_grader}
    for name in deferred_names(module):
        check = namespace.get(name)
        if callable(check) and name.startswith("check_") and name not in kept:
            namespace[name] = _deferred(check, module)


def _deferred(check: Callable, module: str) -> Callable:
    def deferred(*args, **kwargs):
        if sys._getframe(1).f_globals.get("__name__") == module:  # another check of the module: the real one
            return check(*args, **kwargs)
        print(f"{check.__name__}: run by the grader outside this notebook; this cell's points are its verdict")
        return None
    deferred.__name__ = deferred.__qualname__ = check.__name__
    deferred.__doc__ = check.__doc__
    return deferred
