"""Stage 4, report: the class's grades.csv and gradebook.db, the feedback pages and the summary table.

Everything here reads the per-student result files only, in student order, so the
output is the same whatever the number of workers or the order they finished in.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from . import sandbox
from .grade import add_notes
from .settings import BIN, Config, course_config, nbgrader_env

def merge(cfg: Config, layout: dict, results: list[dict]) -> None:
    """grades.csv and a class gradebook.db from the result files, in student order."""
    import csv

    results = sorted(results, key=lambda r: r["student"])
    cols = [(nb, g) for nb in layout for g in layout[nb]]
    tmp = cfg.out / "grades.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "score", "max_score", "percent", *[f"{nb}:{g}" for nb, g in cols], "problems"])
        for r in results:
            pct = 100 * r["score"] / r["max_score"] if r["max_score"] else 0.0
            w.writerow([r["student"], f"{r['score']:g}", f"{r['max_score']:g}", f"{pct:.1f}",
                        *[f"{r['scores'].get(nb, {}).get(g, 0.0):g}" for nb, g in cols], " | ".join(r["problems"])])
    os.replace(tmp, cfg.out / "grades.csv")
    from nbgrader.api import Gradebook

    db = cfg.out / "gradebook.db"
    tmpdb = cfg.out / "gradebook.db.tmp"
    shutil.copyfile(cfg.out / "template" / "gradebook.db", tmpdb)
    with Gradebook(f"sqlite:///{tmpdb}") as gb:
        for r in results:
            gb.update_or_create_student(r["student"])
            gb.add_submission(cfg.lab, r["student"])
            for nb, cells in r["scores"].items():
                sub = gb.find_submission_notebook(nb, cfg.lab, r["student"])
                for g in sub.grades:
                    if g.name in cells:
                        g.auto_score = cells[g.name]
        gb.db.commit()
    os.replace(tmpdb, db)
    feedback(cfg, results)


def feedback(cfg: Config, results: list[dict]) -> None:
    """`nbgrader generate_feedback` once over OUT (a course whose gradebook is the merged one),
    then the grader's notes at the top of each student's page. It renders notebooks, runs
    no student code."""
    course_config(cfg.out, cfg.course_root, None)
    shutil.rmtree(cfg.out / "feedback", ignore_errors=True)
    if (cfg.out / "solutions").is_symlink():
        (cfg.out / "solutions").unlink()
    (cfg.out / "solutions").symlink_to(cfg.out / "template" / "solutions", target_is_directory=True)
    proc = subprocess.run([str(BIN / "nbgrader"), "generate_feedback", cfg.lab, "--force"], cwd=cfg.out,
                          env=nbgrader_env(cfg.out), capture_output=True, text=True, timeout=3600)
    (cfg.out / "logs").mkdir(exist_ok=True)
    (cfg.out / "logs" / "generate_feedback.log").write_text(proc.stdout[-50000:] + proc.stderr[-50000:])
    for r in results:
        for html in (cfg.out / "feedback" / r["student"] / cfg.lab).glob("*.html"):
            add_notes(html, r["problems"])


def summary(cfg: Config, layout: dict, results: list[dict]) -> str:
    """The table printed at the end of a run."""
    import statistics

    lines = []
    results = sorted(results, key=lambda r: r["student"])
    width = max([7] + [len(r["student"]) for r in results])
    lines.append(f"{'student':<{width}}  {'score':>7}  problems")
    for r in results:
        first = r["problems"][0] if r["problems"] else ""
        lines.append(f"{r['student']:<{width}}  {r['score']:>3g}/{r['max_score']:<3g}  {first}")
        lines += [f"{'':<{width}}  {'':>7}  {p}" for p in r["problems"][1:]]
    if results:
        s = [r["score"] for r in results]
        lines.append(f"{len(results)} students graded; mean {statistics.mean(s):.2f}, min {min(s):g}, "
                     f"max {max(s):g} of {results[0]['max_score']:g}; "
                     f"{sum(bool(r['problems']) for r in results)} with problems")
    for miss in sandbox.capabilities().missing:
        lines.append(f"warning: {miss}")
    lines.append(f"grades: {cfg.out / 'grades.csv'}; feedback: {cfg.out / 'feedback'}/<student>/{cfg.lab}/")
    return "\n".join(lines)
