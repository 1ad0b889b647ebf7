"""Build the labs from their one source: `python -m autograder.authoring.labs [--check] [LAB ...]`.

A lab is one MyST markdown notebook, `solutions/<lab>/<lab>.md` (read by jupytext, like
the book's chapters), plus one checks module, `autograder/checks/<lab>.py`. The markdown
holds the instructions, the set-up code, the reference solution between nbgrader's
solution markers and the test cells; every cell carries its nbgrader metadata (grade id,
points, locked, solution/grade) in its own options, and its grade id is its cell id.

This module turns the markdown into the nbgrader source notebook
`solutions/<lab>/<lab>.ipynb` (committed, so that `nbgrader generate_assignment` and a
course without jupytext read it) after checking it against the checks module: each
graded test cell must match the lab's `CELLS` entry (`autograder.checks.CellSpec`) in
grade id, order and points, and open (after its points line) with the hidden block
`hidden_tests` writes: the hidden check runs first, so a student whose code fails it
reads its explanatory message even when a visible assert further down would fail too.
`make labs` runs this, then `nbgrader generate_assignment` into `labs/<lab>/`.
With `--check` nothing is written: it exits 1 when a committed notebook is stale.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import sys
import textwrap
from pathlib import Path

import jupytext
import nbformat

from autograder.checks import HIDDEN_BEGIN, HIDDEN_END, CellSpec

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def all_labs() -> list[str]:
    """Every folder of solutions/ with a `<lab>/<lab>.md` source."""
    return sorted(p.parent.name for p in SOLUTIONS.glob("*/*.md") if p.stem == p.parent.name)


def source_path(lab: str, root: Path = ROOT) -> Path:
    return root / "solutions" / lab / f"{lab}.md"


def hidden_tests(lab: str, spec: CellSpec) -> str:
    """The hidden block that opens a graded test cell: import the lab's checks, call the cell's check."""
    return f"{HIDDEN_BEGIN}\nfrom autograder.checks import {lab} as _checks\n{spec.call()}\n{HIDDEN_END}"


RULES_HEAD = "# What the hidden tests check in this cell's functions (and nothing else costs points):"
RULES_END = "# " + "-" * 98


def defined_functions(source: str) -> list[str]:
    """Names of the functions a code cell defines at its top level (nbgrader's markers are comments)."""
    return [node.name for node in ast.parse(source).body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def rules_block(specs: list[CellSpec]) -> str:
    """The comment that opens a solution cell: every rule of every graded cell that calls its functions."""
    lines = [RULES_HEAD]
    for spec in specs:
        lines.append(f"# {spec.grade_id} (Part {spec.part}, {spec.points} point{'s' if spec.points != 1 else ''}):")
        for rule in spec.rules:
            lines += textwrap.wrap(rule.text, width=100, initial_indent="#   - ", subsequent_indent="#     ",
                                   break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines + [RULES_END])


def cells_of(source: str, cells: list[CellSpec]) -> list[CellSpec]:
    """The graded cells that call a function this solution cell defines."""
    names = set(defined_functions(source))
    return [spec for spec in cells if names & set(spec.args)]


def state_rules(nb: nbformat.NotebookNode, cells: list[CellSpec]) -> None:
    """Write each graded cell's rules at the top of the solution cells defining the functions it calls."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        specs = cells_of(cell.source, cells)
        if specs:
            cell.source = f"{rules_block(specs)}\n{cell.source}"


def _problems(lab: str, nb: nbformat.NotebookNode, cells: list[CellSpec]) -> list[str]:
    problems, seen = [], set()
    graded = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta is None or not meta.get("grade_id"):
            problems.append(f"cell {i} ({cell.source[:40]!r}...) has no nbgrader grade_id: every cell needs one")
            continue
        gid = meta["grade_id"]
        if gid in seen:
            problems.append(f"grade_id {gid!r} is used twice")
        seen.add(gid)
        if meta.get("grade"):
            graded.append((gid, meta, cell))
    specs = {s.grade_id: s for s in cells}
    if [g for g, _, _ in graded] != [s.grade_id for s in cells]:
        problems.append(f"graded cells {[g for g, _, _ in graded]} differ from checks.{lab}.CELLS "
                        f"{[s.grade_id for s in cells]} (the same ids, in the same order)")
    for gid, meta, cell in graded:
        spec = specs.get(gid)
        if spec is None:
            continue
        if meta.get("points") != spec.points:
            problems.append(f"{gid}: {meta.get('points')} points in the markdown, {spec.points} in checks.{lab}.CELLS")
        points = f"# {spec.points} point(s)\n"
        if not cell.source.startswith(points):
            problems.append(f"{gid}: the cell must start with '# {spec.points} point(s)'")
        elif not cell.source[len(points):].startswith(hidden_tests(lab, spec)):
            problems.append(f"{gid}: the cell must start with its points line and then\n{hidden_tests(lab, spec)}\n"
                            f"(the hidden check runs before the visible asserts)")
    return problems


def read_source(lab: str, root: Path = ROOT, cells: list[CellSpec] | None = None) -> nbformat.NotebookNode:
    """The lab's nbgrader source notebook, from its markdown, checked against its CELLS."""
    path = source_path(lab, root)
    if not path.exists():
        raise FileNotFoundError(f"no lab source {path}: a lab is solutions/<lab>/<lab>.md")
    nb = jupytext.read(path, fmt="md:myst")
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    if cells is None:
        cells = importlib.import_module(f"autograder.checks.{lab}").CELLS
    problems = _problems(lab, nb, cells)
    unstated = [s.grade_id for s in cells if not s.rules]
    if unstated:
        problems.append(f"graded cells without rules in checks.{lab}.CELLS: {unstated} (each states what it checks)")
    if problems:
        raise ValueError(f"{path}:\n  " + "\n  ".join(problems))
    state_rules(nb, cells)
    for cell in nb.cells:
        cell.metadata["nbgrader"].setdefault("schema_version", 3)
        cell["id"] = cell.metadata["nbgrader"]["grade_id"]  # stable: rebuilding never churns the ids
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(nb)
    return nb


def build(lab: str, check: bool = False, root: Path = ROOT, cells: list[CellSpec] | None = None) -> bool:
    """Write (or, with check, compare) solutions/<lab>/<lab>.ipynb; True when it was up to date."""
    text = nbformat.writes(read_source(lab, root, cells))
    out = root / "solutions" / lab / f"{lab}.ipynb"
    same = out.exists() and out.read_text() == text
    if not check and not same:
        out.write_text(text)
    return same


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labs", nargs="*", help="default: every solutions/<lab>/<lab>.md")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook is stale")
    args = parser.parse_args(argv)
    stale = []
    for lab in args.labs or all_labs():
        same = build(lab, check=args.check)
        rel = f"solutions/{lab}/{lab}.ipynb"
        print(f"{rel}: {'up to date' if same else ('STALE: run make labs' if args.check else 'written')}")
        stale += [] if same else [lab]
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
