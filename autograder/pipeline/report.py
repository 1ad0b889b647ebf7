"""Stage 4, report: the class's grades.csv and gradebook.db, the feedback pages and the summary table.

Everything here reads the per-student result files only, in student order, so the
output is the same whatever the number of workers or the order they finished in.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil

from tqdm import tqdm

from autograder.checks.timing import UNDECIDED_MARK

from .collect import collect_notes
from .config import Config
from .nbgrader import gradebook_layout, in_lab_order
from .results import pending_column, timing_column, timing_notes
from .untrusted import csv_writer, visible

def merge(cfg: Config, layout: dict, results: list[dict], progress: bool = False) -> None:
    """grades.csv and a class gradebook.db from the result files, in student order; columns in
    the lab's order. Skipped when neither the results nor the lab changed since the last merge."""
    import warnings

    results = sorted(results, key=lambda r: r["student"])
    stamp = cfg.out / "merged.sha256"
    digest = hashlib.sha256(json.dumps([layout, results]).encode()
                            + (cfg.out / "template" / "gradebook.db").read_bytes()).hexdigest()
    if (stamp.exists() and stamp.read_text() == digest and (cfg.out / "grades.csv").exists()
            and (cfg.out / "gradebook.db").exists()):
        feedback(cfg, results, layout, progress)
        return
    cols = [(nb, g) for nb in layout for g in layout[nb]]
    tmp = cfg.out / "grades.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv_writer(f)
        w.writerow(["student", "score", "max_score", "percent", *[f"{nb}:{g}" for nb, g in cols], "timing",
                    "pending", "problems"])
        for r in results:
            pct = 100 * r["score"] / r["max_score"] if r["max_score"] else 0.0
            w.writerow([r["student"], f"{r['score']:g}", f"{r['max_score']:g}", f"{pct:.1f}",
                        *[f"{r['scores'].get(nb, {}).get(g, 0.0):g}" for nb, g in cols], timing_column(r),
                        pending_column(r), " | ".join(r["problems"])])
    os.replace(tmp, cfg.out / "grades.csv")
    from .lms import write_exports

    write_exports(cfg.out, cfg.lab, results)  # Canvas's and Moodle's import files, when the class came from them
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    db = cfg.out / "gradebook.db"
    tmpdb = cfg.out / "gradebook.db.tmp"
    shutil.copyfile(cfg.out / "template" / "gradebook.db", tmpdb)
    with Gradebook(f"sqlite:///{tmpdb}") as gb, warnings.catch_warnings():
        # nbgrader 0.9's add_submission trips SQLAlchemy 2's autoflush check ("Object of type
        # <SubmittedAssignment> not in session"): harmless, the rows are added; not the instructor's concern
        warnings.filterwarnings("ignore", category=SAWarning, message=r"Object of type <Submitted")
        for r in tqdm(results, desc="gradebook", unit="student", disable=not progress or len(results) < 50):
            gb.update_or_create_student(r["student"])
            gb.add_submission(cfg.lab, r["student"])
            for nb, cells in r["scores"].items():
                sub = gb.find_submission_notebook(nb, cfg.lab, r["student"])
                for g in sub.grades:
                    if g.name in cells:
                        g.auto_score = cells[g.name]
        gb.db.commit()
    os.replace(tmpdb, db)
    stamp.write_text(digest)
    feedback(cfg, results, layout, progress)


def feedback(cfg: Config, results: list[dict], layout: dict | None = None, progress: bool = False) -> int:
    """OUT/feedback/<student>/<lab>/<notebook>.html (autograder/pipeline/feedback.py): readable offline,
    the points and the grader's notes in a box at the top, hidden tests not shown. Pages whose
    result and graded notebook did not change are kept. Renders notebooks, runs no student code."""
    from .feedback import write_feedback

    if layout is None:
        layout = in_lab_order(gradebook_layout(cfg.out / "template" / "gradebook.db", cfg.lab),
                              cfg.out / "template" / "labs" / cfg.lab)
    return write_feedback(cfg.out, cfg.course_root, cfg.lab, layout, results, progress, cfg.limits.kept_mb)


def head(text: str, width: int = 160) -> str:
    """The first line of a note, at most about `width` characters (cut after a word), with a mark
    when there was more: the terminal's summary shows this, the feedback page the whole note."""
    first, _, more = text.partition("\n")
    if len(first) > width:
        first, more = first[:width].rsplit(" ", 1)[0], "more"
    return f"{first} [...]" if more else first


def summary(cfg: Config, layout: dict, results: list[dict]) -> str:
    """The table printed at the end of a run: each student's score and notes (first lines), then every
    timing that gave no clear verdict, with the student's name."""
    import statistics

    lines = []
    results = sorted(results, key=lambda r: r["student"])
    width = max([7] + [len(visible(r["student"])) for r in results])
    undecided = []  # (student, note) for each timed section that could not decide
    with_problems = 0
    lines.append(f"{'student':<{width}}  {'score':>7}  problems")
    for r in results:
        timed = {n for nb, cells in (r.get("timing") or {}).items() for n in timing_notes(nb, cells)}
        problems = [p for p in r["problems"] if p not in timed]
        undecided += [(r["student"], n) for n in r["problems"] if n in timed]
        with_problems += bool(problems)
        first = visible(head(problems[0])) if problems else ""
        lines.append(f"{visible(r['student']):<{width}}  {r['score']:>3g}/{r['max_score']:<3g}  {first}")
        lines += [f"{'':<{width}}  {'':>7}  {visible(head(p))}" for p in problems[1:]]
    if results:
        s = [r["score"] for r in results]
        lines.append(f"{len(results)} students graded; mean {statistics.mean(s):.2f}, min {min(s):g}, "
                     f"max {max(s):g} of {results[0]['max_score']:g}; "
                     f"{with_problems} with problems")
    if undecided:
        lines.append(f"{len(undecided)} timing{'s' if len(undecided) > 1 else ''} without a clear verdict (neither "
                     f"given nor taken; one with points at stake was timed again alone at the end of the run):")
        lines += [f"  {visible(student)}: {visible(head(note.replace(f'{UNDECIDED_MARK} ', ''), 200))}"
                  for student, note in undecided]
    held = [r for r in results if r.get("pending")]
    if held:
        total = sum(float(pending_column(r)) for r in held)
        lines.append(f"PENDING: {total:g} point{'s' if total != 1 else ''} of {len(held)} student"
                     f"{'s' if len(held) > 1 else ''} held back, the timing still unclear when timed again alone; "
                     f"neither given nor taken. Time them again on a quiet machine: python -m autograder grade "
                     f"{cfg.lab} {cfg.submissions} --retime")
        lines += [f"  {visible(r['student'])}: {pending_column(r)} pending ("
                  + ", ".join(g for cells in r["pending"].values() for g in cells) + ")" for r in held]
    refused = collect_notes(cfg.out)
    if refused:
        lines.append(f"{len(refused)} entr{'ies' if len(refused) > 1 else 'y'} of the submissions not graded "
                     f"(also in lms.csv for a class from a learning platform):")
        lines += [f"  {visible(line)}" for line in refused]
    if cfg.unsafe:
        lines.append("warning: graded WITHOUT the sandbox (--unsafe): students' code ran with the grader's "
                     "rights, could read the solutions and could forge its result")
    lines.append(f"grades: {cfg.out / 'grades.csv'}; feedback: {cfg.out / 'feedback'}/<student>/{cfg.lab}/")
    for name, what in (("grades_canvas.csv", "Canvas gradebook import"), ("grades_moodle.csv", "Moodle grading worksheet")):
        if (cfg.out / name).exists():
            lines.append(f"{what}: {cfg.out / name} (where each notebook came from, late flags included: "
                         f"{cfg.out / 'lms.csv'})")
    return "\n".join(lines)
