"""Known-wrong implementations ("mutants") of the labs, and submissions built from them.

One registry per lab, `autograder.audit.mutants.<lab>.MUTANTS`. A mutant is a plain Python
function written as a student would write it: it uses the notebook's names (np,
check_distribution, process_logits, ...), is called `<name>` here and replaces the
reference function `replaces` (the `@mutant(part, replaces, registry)` decorator records
it). Its docstring's first line says what is wrong. Mutants never run in this module:
`namespace` runs one in a fresh copy of the reference solution (`autograder.authoring.reference`),
`make_submission` puts one into a student notebook. Notation: see the `speclab` package
docstring.
"""
from __future__ import annotations

import inspect
import re
import textwrap
import types
from dataclasses import dataclass
from typing import Callable

import nbformat

from autograder.authoring import reference
from autograder.authoring.reference import strip_markers  # noqa: F401 - re-exported for the tests


@dataclass(frozen=True)
class Mutant:
    name: str
    part: int  # the lab part whose test cells must lose points
    replaces: str  # the reference function it redefines
    doc: str  # what is wrong, one line
    fn: Callable  # the wrong implementation, as written in the catalog

    @property
    def source(self) -> str:
        """`def <replaces>(...)`: the function's source under the name it replaces (decorators kept)."""
        lines = textwrap.dedent(inspect.getsource(self.fn)).splitlines()
        lines = [ln for ln in lines if not ln.startswith("@mutant(")]
        return re.sub(rf"^def {self.name}\(", f"def {self.replaces}(", "\n".join(lines), count=1, flags=re.M)


def mutant(part: int, replaces: str, registry: list[Mutant]) -> Callable:
    """Decorator that records a function as a mutant of `replaces` in registry."""

    def record(fn: Callable) -> Callable:
        doc = (fn.__doc__ or "").strip().splitlines()
        if not doc:
            raise ValueError(f"mutant {fn.__name__} needs a docstring saying what is wrong")
        name = getattr(fn, "__wrapped__", fn).__name__
        registry.append(Mutant(name, part, replaces, doc[0], fn))
        return fn

    return record


def namespace(lab: str, m: Mutant | None = None) -> types.ModuleType:
    """A fresh reference solution of lab with, if given, one function replaced by the mutant."""
    module = reference.fresh(lab)
    if m is not None:
        if not hasattr(module, m.replaces):
            raise ValueError(f"mutant {m.name} replaces {m.replaces}, which the {lab} reference does not define")
        exec(compile(m.source, f"<mutant {m.name}>", "exec"), module.__dict__)  # noqa: S102
    return module


def make_submission(lab: str, release_nb: nbformat.NotebookNode, m: Mutant | None = None) -> nbformat.NotebookNode:
    """A student's notebook: the release version with every solution cell filled in.

    The reference code goes in; with a mutant, its source is appended to the solution
    cell that defines `m.replaces`, so the wrong version is the one that counts.
    """
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in reference.read_source(lab).cells
                 if c.metadata["nbgrader"].get("solution")}
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
