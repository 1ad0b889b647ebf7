"""Known-wrong implementations ("mutants") of the labs, and submissions built from them.

Notation: p = target distribution, q = draft distribution.

A mutant is a function written as a student would write it: it uses the notebook's
names (np, check_distribution, acceptance_prob, sample_from, ...) and is called
`<name>` here while replacing the student's function `replaces`. Its docstring's
first line says what is wrong. Mutant functions are never called from this module:
their source is injected into a notebook (or exec'd into a namespace holding the
reference solution), where the names they use exist.
"""
from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import Callable

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


@dataclass(frozen=True)
class Mutant:
    name: str
    part: int  # the lab part whose test cells must lose points
    replaces: str  # the student function it redefines
    doc: str  # what is wrong, one line
    source: str  # `def <replaces>(...)`: the wrong implementation


def mutant(part: int, replaces: str, registry: list[Mutant]) -> Callable:
    """Decorator that records a function as a mutant of `replaces` in registry."""

    def record(fn: Callable) -> Callable:
        lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
        lines = [ln for ln in lines if not ln.startswith("@")]
        source = re.sub(rf"^def {fn.__name__}\(", f"def {replaces}(", "\n".join(lines), count=1)
        doc = (fn.__doc__ or "").strip().splitlines()
        if not doc:
            raise ValueError(f"mutant {fn.__name__} needs a docstring saying what is wrong")
        registry.append(Mutant(fn.__name__, part, replaces, doc[0], source))
        return fn

    return record


def strip_markers(source: str) -> str:
    """A solution cell's source as a student who solved it would hand it in."""
    return "\n".join(ln for ln in source.splitlines() if ln.strip() not in (BEGIN, END))


def reference_namespace(source_nb: nbformat.NotebookNode) -> dict:
    """Execute the set-up and solution cells of a source notebook: the reference functions."""
    ns: dict = {"__name__": "reference"}
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade_id") == "setup"):
            exec(compile(strip_markers(cell.source), f"<{meta.get('grade_id')}>", "exec"), ns)  # noqa: S102
    return ns


def mutant_namespace(source_nb: nbformat.NotebookNode, m: Mutant | None) -> dict:
    """The reference namespace with one function replaced by the mutant."""
    ns = reference_namespace(source_nb)
    if m is not None:
        exec(compile(m.source, f"<mutant {m.name}>", "exec"), ns)  # noqa: S102
    return ns


def make_submission(release_nb: nbformat.NotebookNode, source_nb: nbformat.NotebookNode,
                    m: Mutant | None = None) -> nbformat.NotebookNode:
    """A student's notebook: the release version with every solution cell filled in.

    The reference code goes in; with a mutant, its source is appended to the solution
    cell that defines `m.replaces`, so the wrong version is the one that counts.
    """
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source_nb.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.from_dict(release_nb)  # deep copy
    placed = m is None
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in solutions:
            cell.source = strip_markers(solutions[grade_id])
            if m is not None and re.search(rf"^def {m.replaces}\(", cell.source, flags=re.M):
                cell.source += f"\n\n\n# injected mutant {m.name}\n{m.source}\n"
                placed = True
    if not placed:
        raise ValueError(f"no solution cell defines {m.replaces} for mutant {m.name}")
    return nb
