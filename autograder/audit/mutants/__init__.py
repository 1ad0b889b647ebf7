"""Known-wrong implementations ("mutants") of the labs, and submissions built from them.

One catalog per lab, `autograder.audit.mutants.<lab>.MUTANTS`. A mutant is a function of the lab's
reference solution plus a named small edit: `Mutant(name, part, replaces, doc, edits)` takes the
reference function `replaces` as `solutions/<lab>/<lab>.md` defines it (read through
`autograder.authoring.reference`, so the reference exists once) and applies `edits`. The edits are the bug:
a reviewer reads them, not a copy of the whole function. `doc` says what is wrong, in one line.

`edits` is written like the body of a unified diff, one or more hunks, each a run of "-" lines
(whole lines of the reference, indentation included) followed by the "+" lines that replace them
(none: the lines are deleted); a blank line, or a "-" line after a "+" line, starts the next hunk:

    -    return float(min(1.0, p[x] / q[x]))
    +    return float(min(1.0, q[x] / p[x])) if p[x] > 0 else 1.0

Hunks apply in order, each to the source as edited so far, and the "-" lines of each must occur
exactly once there. When the reference changes under a hunk, building the mutant's source raises
`EditError` naming the mutant and the hunk, rather than grading with a mutant that silently
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

from autograder.authoring import reference
from autograder.authoring.reference import strip_markers  # noqa: F401 - re-exported for the tests


class EditError(ValueError):
    """A mutant's edits are malformed or do not apply to the reference function as it now is."""


@dataclass(frozen=True)
class Mutant:
    name: str
    part: int  # the lab part whose test cells must lose points
    replaces: str  # the reference function it redefines
    doc: str  # what is wrong, one line
    edits: str  # hunks of "-" and "+" lines, applied in order to the reference function's source
    lab: str = ""  # set by `catalog`

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
        if not hunks(m.edits):
            raise ValueError(f"mutant {m.name} has no edit: it would be the reference")
    return out


def hunks(edits: str) -> list[tuple[list[str], list[str]]]:
    """[(lines to replace, lines that replace them), ...] of a diff-like edit text."""
    out: list[tuple[list[str], list[str]]] = []
    current = None
    for line in edits.splitlines():
        if not line.strip():
            current = None
            continue
        sign, text = line[0], line[1:]
        if sign not in "-+":
            raise EditError(f"every line of an edit starts with - or +, not {line!r}")
        if sign == "+" and current is None:
            raise EditError(f"{line!r} adds lines without a - line before it to say where")
        if sign == "-" and (current is None or current[1]):
            current = ([], [])
            out.append(current)
        current[0 if sign == "-" else 1].append(text)
    return out


def apply_edits(source: str, edits: str, what: str) -> str:
    """source with each hunk of edits applied in turn; EditError unless its "-" lines occur exactly once."""
    lines = source.split("\n")
    todo = hunks(edits)
    for i, (old, new) in enumerate(todo, 1):
        if old == new:
            raise EditError(f"{what}: hunk {i} of {len(todo)} changes nothing")
        at = [j for j in range(len(lines) - len(old) + 1) if lines[j : j + len(old)] == old]
        if len(at) != 1:
            shown = "\n".join("-" + line for line in old)
            raise EditError(f"{what}: hunk {i} of {len(todo)} expects its lines exactly once in the source as "
                            f"edited so far, found them {len(at)} times (did the reference change?):\n{shown}")
        lines[at[0] : at[0] + len(old)] = new
    return "\n".join(lines)


@functools.cache
def edited_source(m: Mutant) -> str:
    """The mutant's function source, checked: it parses, defines `m.replaces` and differs from the reference."""
    if not m.lab:
        raise ValueError(f"mutant {m.name} belongs to no lab: build catalogs with autograder.audit.mutants.catalog")
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
