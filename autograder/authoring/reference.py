"""The labs' reference solutions as importable code, extracted from their one source.

    from autograder.authoring import reference
    ref = reference.load("lab2")
    ref.speculative_decode(target, draft, prompt, 64, 4)

`load(lab)` executes the set-up cell (grade id `setup`) and the solution cells of
`solutions/<lab>/<lab>.md`, in order and without the solution markers, into a module
`reference_<lab>`: exactly the code a student who solved the lab hands in. Test cells,
prose and the demonstration cells (which load models or time things) are left out.
The module is cached; `fresh(lab)` builds a new one (to inject a mutant into).
`function_source(lab, name)` is one reference function's source, as the lab writes it (what
`autograder.audit.mutants` edits).
"""
from __future__ import annotations

import ast
import functools
import types

from autograder.authoring.labs import read_source, source_path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def strip_markers(source: str) -> str:
    """A solution cell's source as a student who solved it would hand it in."""
    return "\n".join(ln for ln in source.splitlines() if ln.strip() not in (BEGIN, END))


def reference_cells(lab: str) -> list[tuple[str, str]]:
    """(grade id, code) of the set-up and solution cells, in notebook order, markers removed."""
    out = []
    for cell in read_source(lab).cells:
        meta = cell.metadata["nbgrader"]
        if cell.cell_type == "code" and (meta.get("solution") or meta["grade_id"] == "setup"):
            out.append((meta["grade_id"], strip_markers(cell.source)))
    return out


@functools.cache
def function_source(lab: str, name: str) -> str:
    """The source of the reference's top-level function `name`, decorators included."""
    for _, code in reference_cells(lab):
        for node in ast.parse(code).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                return "\n".join(code.splitlines()[first - 1 : node.end_lineno])
    raise ValueError(f"the {lab} reference ({source_path(lab)}) defines no function {name!r}")


def fresh(lab: str) -> types.ModuleType:
    """A new module holding the lab's reference solution (not cached)."""
    module = types.ModuleType(f"reference_{lab}", f"Reference solution of {lab}, from {source_path(lab).name}")
    path = str(source_path(lab))
    for grade_id, code in reference_cells(lab):
        exec(compile(code, f"{path}:{grade_id}", "exec"), module.__dict__)  # noqa: S102 - the course's own code
    return module


@functools.cache
def load(lab: str) -> types.ModuleType:
    """The lab's reference solution, executed once per process."""
    return fresh(lab)
