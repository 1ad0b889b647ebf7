"""nbgrader, as the pipeline runs it: the lab's template course, a student's scratch course, the
autograde command, and what nbgrader's run left behind (scores, errors, why it failed).

`build_template` releases the lab once (`nbgrader generate_assignment`) and reads its gradebook's
layout; `scratch_course` makes one student's private course (a copy of the template gradebook,
the output cap, the limits); `autograde` runs `nbgrader autograde` in the student's sandbox;
`nbgrader_scores`, `cell_problems`, `printed_undecided` and `why_failed` read its results once the
sandbox is gone.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

from autograder.checks.timing import UNDECIDED_MARK
from autograder.inside.nbgrader_cmd import nbgrader_command
from autograder.inside.recheck import capped
from autograder.sandbox import Limits, Result, StudentBox

from .collect import submission_hash
from .config import Config, nbgrader_env, write_course

# `nbgrader ...` without its slowest import (autograder/inside/nbgrader_cmd.py says which and why)
NBGRADER = nbgrader_command()


RELEASE_TIMEOUT_S = 600  # how long `nbgrader generate_assignment` may take to release the lab once per run


def build_template(cfg: Config, progress: bool = False) -> dict:
    """Release the lab once into OUT/template; return {notebook: {grade_id: max points}} in the
    order of the release notebook's cells (the lab's order: part 1's tests first)."""
    root = cfg.out / "template"
    source = cfg.course_root / "solutions" / cfg.lab
    if not source.is_dir():
        raise SystemExit(f"no lab {cfg.lab!r}: {source} does not exist")
    digest = hashlib.sha256((submission_hash(source) + (cfg.course_root / "nbgrader_config.py").read_text())
                            .encode()).hexdigest()
    stamp = root / "source.sha256"
    if not (stamp.exists() and stamp.read_text() == digest and (root / "gradebook.db").exists()):
        shutil.rmtree(root, ignore_errors=True)
        write_course(root, cfg.course_root, link_solutions=True)
        from tqdm import tqdm

        with tqdm(total=1, desc=f"releasing {cfg.lab} (nbgrader generate_assignment)", unit="lab",
                  disable=not progress) as bar:
            proc = subprocess.run([*NBGRADER, "generate_assignment", cfg.lab, "--force"], cwd=root,
                                  env=nbgrader_env(root), capture_output=True, text=True,
                                  timeout=RELEASE_TIMEOUT_S)
            bar.update()
        if proc.returncode != 0:
            raise SystemExit(f"nbgrader generate_assignment {cfg.lab} failed:\n{proc.stderr[-3000:]}")
        stamp.write_text(digest)
    return in_lab_order(gradebook_layout(root / "gradebook.db", cfg.lab), root / "labs" / cfg.lab)


def in_lab_order(layout: dict, release_dir: Path) -> dict:
    """The layout with each notebook's grade cells in the order they appear in the release."""
    ordered = {}
    for nb, cells in layout.items():
        try:
            rel = json.loads((release_dir / f"{nb}.ipynb").read_text())
            order = [((c.get("metadata") or {}).get("nbgrader") or {}).get("grade_id") for c in rel["cells"]]
        except (OSError, ValueError, KeyError):
            order = []
        rank = {g: i for i, g in enumerate(order) if g}
        ordered[nb] = {g: cells[g] for g in sorted(cells, key=lambda g: (rank.get(g, len(rank)), g))}
    return ordered


def gradebook_layout(db: Path, lab: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        a = gb.find_assignment(lab)
        return {nb.name: {g.name: float(g.max_score) for g in sorted(nb.grade_cells, key=lambda g: g.name)}
                for nb in sorted(a.notebooks, key=lambda n: n.name)}


CAP_STARTUP = '''\
# speclab grader: printed output beyond {kb} kB per stream is dropped (kept memory-bounded)
import sys as _sys


class _SpeclabCap:
    def __init__(self, inner, limit):
        self._inner, self._left, self._noted = inner, limit, False

    def write(self, text):
        text = str(text)
        if self._left <= 0:
            if not self._noted:
                self._noted = True
                _sys.__dict__["stdout"]._inner.write("\\n[grader: output beyond {kb} kB dropped]\\n")
            return len(text)
        self._left -= len(text)
        return self._inner.write(text[:max(0, self._left + len(text))])

    def __getattr__(self, name):
        return getattr(self._inner, name)


_sys.stdout = _SpeclabCap(_sys.stdout, {kb} * 1024)
_sys.stderr = _SpeclabCap(_sys.stderr, {kb} * 1024)
del _SpeclabCap
'''




def scratch_course(root: Path, course_root: Path, template: Path, limits: Limits) -> None:
    """A student's private nbgrader course at root (emptied first): the course's configuration with the
    limits, the output cap in the kernel's start-up, and a copy of the template's gradebook."""
    shutil.rmtree(root, ignore_errors=True)
    for sub in ("home", "tmp", "runtime", "ipython/profile_default/startup"):
        (root / sub).mkdir(parents=True)
    (root / "ipython/profile_default/startup/00-speclab-cap.py").write_text(CAP_STARTUP.format(kb=limits.output_kb))
    write_course(root, course_root, limits)
    shutil.copy2(template / "gradebook.db", root / "gradebook.db")


def autograde(box: StudentBox, root: Path, lab: str, student: str, env: dict, timeout_s: float) -> Result:
    """`nbgrader autograde` of one student in its sandbox (root: its scratch course)."""
    return box.run([*NBGRADER, "autograde", lab, f"--student={student}", "--force"], root, root, env, timeout_s,
                   "autograde.log")


def nbgrader_scores(db: Path, lab: str, student: str, layout: dict) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook, MissingEntry

    scores = {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}
    with Gradebook(f"sqlite:///{db}") as gb:
        for nb in layout:
            try:
                sub = gb.find_submission_notebook(nb, lab, student)
            except MissingEntry:
                continue
            for g in sub.grades:
                if g.name in scores[nb]:
                    scores[nb][g.name] = float(g.score or 0.0)
    return scores


def why_failed(log: str) -> str:
    if "DatabaseError" in log or "OperationalError" in log or "file is not a database" in log:
        return "the notebook damaged its grading directory (gradebook)"
    for pattern, why in ((r"DeadKernelError|Kernel died|kernel died", "the kernel died (crash, os._exit or memory)"),
                         (r"MemoryError", "ran out of memory"),
                         (r"CellTimeoutError|timed out|TimeoutError", "a cell ran past the time limit"),
                         (r"MissingEntry|missing grade cell|Missing grade cell", "graded cells are missing"),
                         (r"NotJSONError|Notebook does not appear to be JSON", "not valid JSON")):
        if re.search(pattern, log):
            return why
    return "nbgrader could not grade it"


def cell_problems(nb_path: Path) -> list[str]:
    """One line per graded cell whose output shows an error, timeout or dead kernel."""
    lines = []
    try:
        nb = json.loads(nb_path.read_bytes())
    except (OSError, ValueError):
        return lines
    for c in nb.get("cells", []):
        meta = c.get("metadata", {}).get("nbgrader", {})
        graded = meta.get("grade") and not meta.get("solution")
        for o in c.get("outputs", []):
            if o.get("output_type") == "error" and not graded and o.get("ename") not in ("NotImplementedError",):
                ename = "interrupted at the cell time limit" if o.get("ename") == "KeyboardInterrupt" else o.get("ename")
                lines.append(f"cell {c.get('id', '?')}: {ename}: {capped(str(o.get('evalue', '')))}".rstrip(": "))
                break
            if o.get("output_type") == "error" and graded:
                ename = o.get("ename", "")
                lines.append(f"{meta.get('grade_id')}: {ename}: {capped(str(o.get('evalue', '')))}".rstrip(": "))
                break
    return lines


PRINTED_PER_CELL = 5  # a cell's timed clauses; more such lines are the notebook's own printing


def printed_undecided(nb_path: Path, cells: set[str]) -> dict[str, list[str]]:
    """grade id -> the `timing undecided:` lines (autograder.checks.timing.undecided) that the given
    test cells printed in nbgrader's run: a timed check that ran in the notebook, not in the grader.
    Only for cells the grader did not judge itself (a notebook can print such a line; the grader's
    own record is the one kept where there is one)."""
    out: dict[str, list[str]] = {}
    try:
        nb = json.loads(nb_path.read_bytes())
    except (OSError, ValueError):
        return out
    for c in nb.get("cells", []) if isinstance(nb, dict) else []:
        meta = (c.get("metadata") or {}).get("nbgrader") or {}
        gid = meta.get("grade_id")
        if not (meta.get("grade") and not meta.get("solution") and gid in cells):
            continue
        for o in c.get("outputs", []):
            if o.get("output_type") != "stream":
                continue
            text = o.get("text", "")
            for line in ("".join(text) if isinstance(text, list) else str(text)).splitlines():
                if line.startswith(UNDECIDED_MARK) and len(out.setdefault(gid, [])) < PRINTED_PER_CELL:
                    out[gid].append(capped(line[len(UNDECIDED_MARK):].strip()))
    return {gid: notes for gid, notes in out.items() if notes}
