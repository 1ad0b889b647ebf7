"""Known-wrong implementations ("mutants") of the labs, and submissions built from them.

One catalog per lab, `autograder.mutants.<lab>.MUTANTS`. A mutant is a function of the lab's
reference solution plus a named small edit: `Mutant(name, part, replaces, doc, edits)` takes the
reference function `replaces` as `solutions/<lab>/<lab>.md` defines it (read through
`autograder.reference`, so the reference exists once) and applies `edits`, a sequence of
(old, new) text replacements, in order. The edits are the bug: a reviewer reads them, not a
copy of the whole function. `doc` says what is wrong, in one line.

Each `old` must occur exactly once in the source as edited so far (the reference's own for the
first edit). When the reference changes under an edit, building the mutant's source raises
`EditError` naming the mutant and the edit, rather than grading with a mutant that silently
became something else; tests/autograder/audit/test_mutants.py builds every one.

Mutants never run in this module: `namespace` runs one in a fresh copy of the reference solution,
`make_submission` puts one into a student notebook. Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

import ast
import functools
import re
import types
from dataclasses import dataclass, replace
from typing import Iterable

import nbformat

from autograder import reference
from autograder.reference import strip_markers  # noqa: F401 - re-exported for the tests

Edit = tuple[str, str]  # (old text, new text)


class EditError(ValueError):
    """A mutant's edit does not apply to the reference function as it now is."""


@dataclass(frozen=True)
class Mutant:
    name: str
    part: int  # the lab part whose test cells must lose points
    replaces: str  # the reference function it redefines
    doc: str  # what is wrong, one line
    edits: tuple[Edit, ...] = ()  # applied in order to the reference function's source
    lab: str = ""  # set by `catalog`

    def __post_init__(self) -> None:
        object.__setattr__(self, "edits", tuple((old, new) for old, new in self.edits))

    @property
    def source(self) -> str:
        """`def <replaces>(...)` (decorators kept): the reference function with the edits applied,
        as a student who made this mistake would hand it in."""
        return edited_source(self)


def catalog(lab: str, mutants: Iterable[Mutant]) -> list[Mutant]:
    """The lab's catalog: every mutant bound to lab, names unique."""
    out = [replace(m, lab=lab) for m in mutants]
    names = [m.name for m in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{lab}: mutant names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    for m in out:
        if not m.doc or "\n" in m.doc:
            raise ValueError(f"mutant {m.name} needs a one-line doc saying what is wrong")
        if not m.edits:
            raise ValueError(f"mutant {m.name} has no edit: it would be the reference")
    return out


def apply_edits(source: str, edits: Iterable[Edit], what: str) -> str:
    """source with each (old, new) replaced in turn; EditError unless old occurs exactly once."""
    edits = list(edits)
    for i, (old, new) in enumerate(edits, 1):
        if old == new:
            raise EditError(f"{what}: edit {i} of {len(edits)} changes nothing ({old!r})")
        count = source.count(old)
        if count != 1:
            raise EditError(f"{what}: edit {i} of {len(edits)} expects {old!r} exactly once in the source as "
                            f"edited so far, found it {count} times (did the reference change?)")
        source = source.replace(old, new)
    return source


@functools.cache
def edited_source(m: Mutant) -> str:
    """The mutant's function source, checked: it parses, defines `m.replaces` and differs from the reference."""
    if not m.lab:
        raise ValueError(f"mutant {m.name} belongs to no lab: build catalogs with autograder.mutants.catalog")
    original = reference.function_source(m.lab, m.replaces)
    what = f"mutant {m.name} of {m.lab}'s {m.replaces}"
    source = apply_edits(original, m.edits, what)
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise EditError(f"{what}: the edited source does not parse ({err.msg}, line {err.lineno})") from None
    defined = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    if defined != [m.replaces]:
        raise EditError(f"{what}: the edited source defines {defined}, expected [{m.replaces!r}]")
    if ast.dump(tree) == ast.dump(ast.parse(original)):
        raise EditError(f"{what}: the edits change only comments or layout; the mutant would be the reference")
    return source


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
