"""Checks that the labs' hidden nbgrader test cells call.

`stats` holds the lab-independent statistics (total-variation tests with a
Bonferroni union bound, power lower bounds, readable failure messages);
`lab1`, `lab2`, ... hold one check function per graded test cell and a `CELLS`
list of `CellSpec`: the one description of a lab's graded cells, from which
`autograder.labs` checks the test cells of `solutions/<lab>/<lab>.md` and
`autograder.power` computes false-failure bounds and mutant detection.
Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class CellSpec:
    """One graded test cell: what it checks, its points, and its statistical cases (if any)."""

    grade_id: str
    part: int
    points: int
    check: Callable
    args: tuple[str, ...]  # names of the student's functions passed to check, in order
    cases: Callable | None = None  # () -> list[stats.ExactnessCase]; None: a deterministic check
    seed: int | None = None

    def call(self) -> str:
        """The hidden test's call, in the notebook's names."""
        return f"_checks.{self.check.__name__}({', '.join(self.args)})"
