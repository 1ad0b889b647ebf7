"""Stage 2, normalise: a student's notebook put back on the released skeleton.

Lab cells are recognised by their grade id, or by their cell id when the student's
editor stripped the nbgrader metadata (every lab cell's id is its grade id, see
autograder/authoring/labs.py).
"""
from __future__ import annotations

import copy
import uuid


def _gid(cell: dict) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    return meta.get("grade_id") if isinstance(meta, dict) else None


def _readable(cell: dict, lines: list[str]) -> dict:
    """The cell with what nbgrader and the feedback can read: a source that is a string or a list of
    strings (anything else becomes its text, and a line says so), a cell type Jupyter knows."""
    source = cell.get("source", "")
    if isinstance(source, str) and cell.get("cell_type") in ("code", "markdown", "raw"):
        return cell
    if isinstance(source, list) and all(isinstance(s, str) for s in source) and \
            cell.get("cell_type") in ("code", "markdown", "raw"):
        return cell
    fixed = copy.deepcopy(cell)
    if isinstance(source, list):
        fixed["source"] = "".join(s if isinstance(s, str) else str(s) for s in source)
    elif not isinstance(source, str):
        fixed["source"] = "" if source is None else str(source)
    if fixed.get("cell_type") not in ("code", "markdown", "raw"):
        fixed["cell_type"] = "raw"
        fixed.pop("outputs", None)
        fixed.pop("execution_count", None)
    lines.append(f"a cell nbgrader could not read (id {str(cell.get('id'))[:40]!r}) was made readable")
    return fixed


class _Release:
    """The release notebook's lab cells, by grade id (a cell whose nbgrader metadata was stripped is still
    recognised: every lab cell's id is its grade id)."""

    def __init__(self, release_nb: dict):
        self.cells = release_nb["cells"]
        self.by_gid = {_gid(c): c for c in self.cells if _gid(c)}
        self.id_to_gid = {c.get("id"): _gid(c) for c in self.cells if _gid(c) and c.get("id")}
        self.solutions = {g for g, c in self.by_gid.items() if c["metadata"]["nbgrader"].get("solution")}
        self.graded = {g for g, c in self.by_gid.items() if c["metadata"]["nbgrader"].get("grade")
                       and not c["metadata"]["nbgrader"].get("solution")}


def _sort(student_cells: list, rel: _Release, lines: list[str]) -> tuple[dict, dict, dict]:
    """(lab cell before which -> the student's own cells after it, grade id -> the student's solution cell,
    grade id -> how many copies of that lab cell the student's notebook has), in the student's order."""
    groups: dict[str | None, list[dict]] = {None: []}
    solutions: dict[str, dict] = {}
    seen: dict[str, int] = {}
    anchor = None
    for cell in student_cells:
        if not isinstance(cell, dict):
            continue
        cell = _readable(cell, lines)
        g = _gid(cell) or rel.id_to_gid.get(cell.get("id"))
        if g not in rel.by_gid:
            groups.setdefault(anchor, []).append(cell)
            continue
        seen[g] = seen.get(g, 0) + 1
        released = rel.by_gid[g]
        if _gid(cell) is None:  # recognised by its id: it gets its nbgrader metadata back
            cell = copy.deepcopy(cell)
            cell.setdefault("metadata", {})["nbgrader"] = copy.deepcopy(released["metadata"]["nbgrader"])
        if g in rel.solutions and g not in solutions and cell.get("cell_type") == released["cell_type"]:
            solutions[g] = cell
            anchor = g
            continue
        if g in rel.solutions:  # a second copy of a solution cell: kept as the student's own code
            cell = copy.deepcopy(cell)
            cell["metadata"].pop("nbgrader", None)
            groups.setdefault(anchor, []).append(cell)
            continue
        if seen[g] > 1:
            if g in rel.graded:
                lines.append(f"{g}: duplicated; the copy was removed")
            continue
        if g in rel.graded:
            if cell.get("cell_type") != "code":
                lines.append(f"{g}: turned into {cell.get('cell_type')}; restored as released")
            elif "".join(cell.get("source", "")) != "".join(released.get("source", "")):
                lines.append(f"{g}: edited; restored as released")
        anchor = g
    return groups, solutions, seen


def _what_moved(student_cells: list, rel: _Release, seen: dict) -> list[str]:
    """Lines on the notebook as a whole: lab cells moved or deleted, ids duplicated, metadata gone."""
    lines = []
    order = [_gid(c) for c in rel.cells]
    if [g for g in order if g in seen] != list(seen):
        lines.append("lab cells were moved; put back in their places")
    for g in sorted(rel.graded - set(seen)):
        lines.append(f"{g}: deleted; restored as released")
    raw_ids = [c.get("id") for c in student_cells if isinstance(c, dict) and c.get("id")]
    if len(raw_ids) != len(set(raw_ids)):
        lines.append("duplicated cell ids; renumbered")
    if not any(_gid(c) for c in student_cells if isinstance(c, dict)):
        lines.append("no nbgrader metadata: the lab's cells were put back around the student's cells")
    return lines


def _with_ids(cells: list[dict]) -> list[dict]:
    """The cells, each with the keys its type needs and an id of its own (a missing or repeated one is new)."""
    ids: set[str] = set()
    for c in cells:
        c.setdefault("metadata", {})
        if c.get("cell_type") == "code":
            c.setdefault("outputs", [])
            c.setdefault("execution_count", None)
        cid = c.get("id")
        if not isinstance(cid, str) or cid in ids:
            cid = uuid.uuid4().hex[:8]
            while cid in ids:
                cid = uuid.uuid4().hex[:8]
        c["id"] = cid
        ids.add(cid)
    return cells


def normalise(student_nb: dict, release_nb: dict) -> tuple[dict, list[str]]:
    """The student's notebook rebuilt on the release notebook's skeleton; lines saying what was fixed.

    The lab's own cells (instructions, set-up, tests: everything that is not a solution cell)
    are the instructor's: each is put back as released, in its place, whatever the student
    did to it (deleted, edited, moved, duplicated, turned into markdown, metadata stripped).
    Each solution cell is the student's (its first copy); the student's other cells keep
    their order and follow the lab cell they followed in the submission. The student's code
    therefore runs in the order they wrote it, and the tests run exactly as released.
    """
    rel = _Release(release_nb)
    student_cells = student_nb.get("cells", [])
    lines: list[str] = []
    groups, solutions, seen = _sort(student_cells, rel, lines)
    lines += _what_moved(student_cells, rel, seen)
    cells: list[dict] = list(groups[None])
    for rc in rel.cells:
        g = _gid(rc)
        cells.append(copy.deepcopy(solutions.get(g, rc)) if g in rel.solutions else copy.deepcopy(rc))
        cells += groups.get(g, []) if g else []
    out = copy.deepcopy(release_nb)
    out["cells"] = _with_ids(cells)
    return out, lines
