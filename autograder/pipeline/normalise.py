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


def normalise(student_nb: dict, release_nb: dict) -> tuple[dict, list[str]]:
    """The student's notebook rebuilt on the release notebook's skeleton; lines saying what was fixed.

    The lab's own cells (instructions, set-up, tests: everything that is not a solution cell)
    are the instructor's: each is put back as released, in its place, whatever the student
    did to it (deleted, edited, moved, duplicated, turned into markdown, metadata stripped).
    Each solution cell is the student's (its first copy); the student's other cells keep
    their order and follow the lab cell they followed in the submission. The student's code
    therefore runs in the order they wrote it, and the tests run exactly as released.
    """
    import copy

    release_cells = release_nb["cells"]
    rel_by_gid = {_gid(c): c for c in release_cells if _gid(c)}
    # every lab cell's id is its grade id: a cell whose nbgrader metadata was stripped is still recognised
    id_to_gid = {c.get("id"): _gid(c) for c in release_cells if _gid(c) and c.get("id")}
    solution_ids = {g for g, c in rel_by_gid.items() if c["metadata"]["nbgrader"].get("solution")}
    graded_ids = {g for g, c in rel_by_gid.items() if c["metadata"]["nbgrader"].get("grade")
                  and not c["metadata"]["nbgrader"].get("solution")}
    lines: list[str] = []
    groups: dict[str | None, list[dict]] = {None: []}
    solutions: dict[str, dict] = {}
    seen: dict[str, int] = {}
    anchor = None
    for cell in student_nb.get("cells", []):
        if not isinstance(cell, dict):
            continue
        cell = _readable(cell, lines)
        g = _gid(cell) or id_to_gid.get(cell.get("id"))
        if g in rel_by_gid:
            seen[g] = seen.get(g, 0) + 1
            rel = rel_by_gid[g]
            if _gid(cell) is None:  # recognised by its id: it gets its nbgrader metadata back
                cell = copy.deepcopy(cell)
                cell.setdefault("metadata", {})["nbgrader"] = copy.deepcopy(rel["metadata"]["nbgrader"])
            if g in solution_ids and g not in solutions and cell.get("cell_type") == rel["cell_type"]:
                solutions[g] = cell
                anchor = g
                continue
            if g in solution_ids:  # a second copy of a solution cell: kept as the student's own code
                cell = copy.deepcopy(cell)
                cell["metadata"].pop("nbgrader", None)
                groups.setdefault(anchor, []).append(cell)
                continue
            if seen[g] > 1:
                if g in graded_ids:
                    lines.append(f"{g}: duplicated; the copy was removed")
                continue
            if g in graded_ids:
                if cell.get("cell_type") != "code":
                    lines.append(f"{g}: turned into {cell.get('cell_type')}; restored as released")
                elif "".join(cell.get("source", "")) != "".join(rel.get("source", "")):
                    lines.append(f"{g}: edited; restored as released")
            anchor = g
            continue
        groups.setdefault(anchor, []).append(cell)
    order = [_gid(c) for c in release_cells]
    if [g for g in order if g in seen] != list(seen):
        lines.append("lab cells were moved; put back in their places")
    for g in sorted(graded_ids - set(seen)):
        lines.append(f"{g}: deleted; restored as released")
    raw_ids = [c.get("id") for c in student_nb.get("cells", []) if isinstance(c, dict) and c.get("id")]
    if len(raw_ids) != len(set(raw_ids)):
        lines.append("duplicated cell ids; renumbered")
    if not any(_gid(c) for c in student_nb.get("cells", []) if isinstance(c, dict)):
        lines.append("no nbgrader metadata: the lab's cells were put back around the student's cells")
    cells: list[dict] = list(groups[None])
    for rc in release_cells:
        g = _gid(rc)
        cells.append(copy.deepcopy(solutions.get(g, rc)) if g in solution_ids else copy.deepcopy(rc))
        cells += groups.get(g, []) if g else []
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
    out = copy.deepcopy(release_nb)
    out["cells"] = cells
    return out, lines
