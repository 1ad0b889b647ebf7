"""`python -m autograder grade LAB SUBMISSIONS`: grade a class (see autograder/README.md)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .pipeline import REPO_ROOT, Config, build_template, grade_class, summary
from .sandbox import Limits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder")
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="autograde a folder or zip of submissions")
    g.add_argument("lab", help="assignment id, e.g. lab1 (a folder of solutions/)")
    g.add_argument("submissions", type=Path, help="folder or zip (layouts: see autograder/README.md)")
    g.add_argument("--out", type=Path, default=None, help="output folder (default grading/<lab>)")
    g.add_argument("--course-root", type=Path, default=REPO_ROOT)
    g.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    g.add_argument("--force", action="store_true", help="grade again students that already have a result")
    g.add_argument("--student", action="append", default=[], help="grade only this student (repeatable)")
    g.add_argument("--cell-timeout", type=int, default=None, help="seconds per cell (default: the lab's LAB_TIMEOUT)")
    g.add_argument("--notebook-timeout", type=int, default=Limits.notebook_timeout_s, help="seconds per notebook")
    g.add_argument("--memory-mb", type=int, default=Limits.memory_mb, help="address-space limit per student")
    g.add_argument("--output-kb", type=int, default=Limits.output_kb, help="printed output kept per stream")
    g.add_argument("--no-recheck", action="store_true", help="skip the clean re-run of scored notebooks")
    g.add_argument("--unsafe", action="store_true",
                   help="DANGER: grade without the sandbox when the machine cannot provide one. Students' code "
                        "then runs with your rights: it can read the solutions, change the course and forge its "
                        "grade. Only for submissions you trust (see autograder/README.md)")
    a = ap.parse_args(argv)
    limits = Limits(a.cell_timeout, a.notebook_timeout, a.memory_mb, Limits.file_mb, a.output_kb)
    cfg = Config(a.lab, a.submissions, a.out or REPO_ROOT / "grading" / a.lab, a.course_root.resolve(),
                 max(1, a.workers), a.force or bool(a.student), tuple(a.student), limits, not a.no_recheck,
                 a.unsafe)
    if a.unsafe:
        print("WARNING: --unsafe: grading without the sandbox; students' code runs with your rights",
              file=sys.stderr)
    results = grade_class(cfg, progress=True)
    print(summary(cfg, build_template(cfg), results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
