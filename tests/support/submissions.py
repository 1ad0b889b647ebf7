"""Students built from a lab's reference for the end-to-end tests: some parts solved, the others as released."""
from __future__ import annotations

import nbformat


def only_parts(nb, release, solved: set[int]) -> nbformat.NotebookNode:
    """A copy of nb whose solution cells of the parts not in `solved` are put back as released (the stubs)."""
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
             if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.from_dict(nb)
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.startswith("impl_part") and int(gid[len("impl_part"):]) not in solved:
            c.source = stubs[gid]
    return nb
