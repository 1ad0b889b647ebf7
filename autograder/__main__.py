"""Instructor commands (see autograder/README.md).

- `speclab-grade LAB SUBMISSIONS [options]` (installed with the package; the same as
  `python -m autograder grade ...`): grade a class, from any folder;
- `python -m autograder gradescope LAB [--zip F]`: a Gradescope autograder zip for one lab;
- `python -m autograder student-release [--dest DIR] [--book PDF]`: the student edition (folder + zip);
- `python -m autograder grade LAB SUBMISSIONS --out OUT --shard I/N`: grade shard I of N of the class;
  `python -m autograder merge OUT`: merge the finished shards into one class's output (pipeline/shards.py);
- `python -m autograder cluster slurm|kubernetes ...`: the scripts or manifests that grade a class in shards on
  a cluster (export/cluster.py);
- `python -m autograder clean OUT`: remove what a stopped run left behind (pipeline/cleanup.py).

The environment variables the grader honours (SPECLAB_COURSE, SPECLAB_SANDBOX, SPECLAB_BWRAP,
SPECLAB_LAB_CHECKS) are read here, once, into the run's Config; nothing below the command line reads them.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .checks import LAB_CHECKS_ENV
from .pipeline.config import ENV as COURSE_ENV
from .pipeline.config import find_course
from .sandbox.bwrap import BWRAP_ENV, MODE_ENV


def _course(explicit: Path | None) -> Path:
    return find_course(explicit, env_course=os.environ.get(COURSE_ENV))


def _grade_options(g: argparse.ArgumentParser) -> None:
    from .sandbox import Limits

    g.add_argument("lab", help="assignment id, e.g. lab1 (a folder of solutions/)")
    g.add_argument("submissions", type=Path, help="folder or zip (layouts: see autograder/README.md)")
    g.add_argument("--course", "--course-root", dest="course", type=Path, default=None,
                   help="the instructor repository (default: where autograder is installed from, "
                        "$SPECLAB_COURSE, or the working directory or a parent)")
    g.add_argument("--out", type=Path, default=None, help="output folder (default COURSE/grading/<lab>)")
    g.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    g.add_argument("--force", action="store_true", help="grade again students that already have a result")
    g.add_argument("--student", action="append", default=[], help="grade only this student (repeatable)")
    g.add_argument("--cell-timeout", type=int, default=None, help="seconds per cell (default: the lab's LAB_TIMEOUT)")
    g.add_argument("--notebook-timeout", type=int, default=Limits.notebook_timeout_s, help="seconds per notebook")
    g.add_argument("--memory-mb", type=int, default=Limits.memory_mb, help="address-space limit per student")
    g.add_argument("--output-kb", type=int, default=Limits.output_kb, help="printed output kept per stream")
    g.add_argument("--no-recheck", action="store_true", help="skip the clean re-run of scored notebooks")
    g.add_argument("--retime", action="store_true",
                   help="grade again, one at a time, the students whose timed points are pending (a timing with "
                        "no clear verdict); with --student, only those")
    g.add_argument("--shard", default=None, metavar="I/N",
                   help="grade only shard I of N of the class (0-based), in OUT/shards/I-of-N; once every shard is "
                        "done, `python -m autograder merge OUT` writes the class's grades (see autograder/README.md)")
    g.add_argument("--timing-parallel", action="store_true",
                   help="time several students at once, each on a core of its own (a cpuset of its control group "
                        "and of the grader timing it); needs control groups with the cpuset controller")
    g.add_argument("--unsafe", action="store_true",
                   help="DANGER: grade without the sandbox when the machine cannot provide one. Students' code "
                        "then runs with your rights: it can read the solutions, change the course and forge its "
                        "grade. Only for submissions you trust (see autograder/README.md)")


def _grade(a: argparse.Namespace) -> int:
    from .inside.nbgrader_cmd import skip_slow_imports

    skip_slow_imports()  # the grader imports nbformat too (autograder/inside/nbgrader_cmd.py)
    from .pipeline import Config, build_template, grade_class, summary
    from .sandbox import Limits

    course = _course(a.course)
    if not (course / "solutions" / a.lab).is_dir():
        labs = sorted(p.name for p in (course / "solutions").iterdir() if p.is_dir())
        raise SystemExit(f"no lab {a.lab!r} in {course / 'solutions'} (labs: {', '.join(labs) or 'none'})")
    if not a.submissions.exists():
        raise SystemExit(f"{a.submissions}: no such folder or zip")
    limits = Limits(a.cell_timeout, a.notebook_timeout, a.memory_mb, Limits.file_mb, a.output_kb)
    shard = None
    if a.shard is not None:
        from .pipeline.shards import parse

        try:
            shard = parse(a.shard)
        except ValueError as err:
            raise SystemExit(str(err)) from None
    lab_checks = tuple(Path(p).resolve() for p in os.environ.get(LAB_CHECKS_ENV, "").split(os.pathsep) if p)
    cfg = Config(a.lab, a.submissions.resolve(), (a.out or course / "grading" / a.lab).resolve(), course,
                 max(1, a.workers), a.force or bool(a.student), tuple(a.student), limits, not a.no_recheck,
                 a.unsafe, lab_checks=lab_checks, retime=a.retime, sandbox_mode=os.environ.get(MODE_ENV) or None,
                 bwrap=os.environ.get(BWRAP_ENV) or None, shard=shard, timing_parallel=a.timing_parallel)
    if a.unsafe:
        print("WARNING: --unsafe: grading without the sandbox; students' code runs with your rights",
              file=sys.stderr)
    from .pipeline.spawn import Stopped

    try:
        results = grade_class(cfg, progress=True)
    except Stopped as why:
        done = len(list((cfg.out / "results").glob("*.json"))) if (cfg.out / "results").is_dir() else 0
        print(f"\nstopped ({why}): {done} result file(s) in {cfg.out / 'results'}; the students in flight were "
              f"not recorded, and what they left was removed. Run the same command again to grade the rest.",
              file=sys.stderr)
        return 130 if str(why) == "SIGINT" else 143
    if shard is not None:
        from .pipeline.shards import shard_out
        from .pipeline.untrusted import visible

        problems = sum(bool(r["problems"]) for r in results)
        print(f"shard {shard[0]} of {shard[1]}: {len(results)} student(s) graded, {problems} with problems, in "
              f"{visible(shard_out(cfg.out, *shard))}. Once every shard is done: python -m autograder merge "
              f"{visible(cfg.out)}")
        return 0
    print(summary(cfg, build_template(cfg), results))
    return 0


def _merge(a: argparse.Namespace) -> int:
    from .inside.nbgrader_cmd import skip_slow_imports

    skip_slow_imports()
    from .pipeline import summary
    from .pipeline.shards import merge_shards

    if not a.out.is_dir():
        raise SystemExit(f"{a.out}: no such folder")
    cfg, layout, results = merge_shards(a.out, _course(a.course), progress=True)
    print(summary(cfg, layout, results))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder")
    sub = ap.add_subparsers(dest="command", required=True)
    _grade_options(sub.add_parser("grade", help="autograde a folder or zip of submissions"))
    gs = sub.add_parser("gradescope", help="write a Gradescope autograder zip for one lab")
    gs.add_argument("lab")
    gs.add_argument("--course", type=Path, default=None)
    gs.add_argument("--zip", type=Path, default=None, help="default COURSE/dist/gradescope-<lab>.zip")
    gs.add_argument("--visibility", default="visible", choices=("hidden", "after_due_date", "after_published",
                                                                 "visible"),
                    help="when students see the per-test results (Gradescope's visibility)")
    mg = sub.add_parser("merge", help="merge the finished shards of a class (grade --shard I/N) into its grades, "
                                      "feedback and exports")
    mg.add_argument("out", type=Path, help="the class's output folder (--out of every shard)")
    mg.add_argument("--course", type=Path, default=None)
    sub.add_parser("cluster", help="the Slurm scripts or Kubernetes manifests that grade a class in shards "
                                   "(python -m autograder cluster slurm|kubernetes --help)", add_help=False)
    cl = sub.add_parser("clean", help="remove what a stopped grading run left behind (control groups of graders "
                                      "that are gone, scratch mounts nobody grades in)")
    cl.add_argument("out", type=Path, help="the run's output folder (--out of `grade`)")
    sr = sub.add_parser("student-release", help="write the student edition (folder and zip)")
    sr.add_argument("--course", type=Path, default=None)
    sr.add_argument("--dest", type=Path, default=None, help="default COURSE/dist/student (+ .zip beside it)")
    sr.add_argument("--book", type=Path, default=None,
                    help="the book's PDF to carry (default: the one `make pdf` writes, COURSE/_build/html/speclab.pdf)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["cluster"]:  # its own options (export/cluster.py)
        from .export.cluster import main as cluster

        return cluster(argv[1:])
    a = ap.parse_args(argv)
    if a.command == "merge":
        return _merge(a)
    if a.command == "grade":
        return _grade(a)
    if a.command == "clean":
        from .pipeline.cleanup import sweep

        if not a.out.is_dir():
            raise SystemExit(f"{a.out}: no such folder")
        from .pipeline.untrusted import visible

        lines = sweep(a.out)
        print("\n".join(map(visible, lines)) if lines else f"{visible(a.out)}: nothing left behind")
        return 0
    if a.command == "gradescope":
        from .export.gradescope import build_zip

        course = _course(a.course)
        path = build_zip(course, a.lab, a.zip or course / "dist" / f"gradescope-{a.lab}.zip", a.visibility)
        print(f"Gradescope autograder for {a.lab}: {path}")
        return 0
    from .export.student_release import build_release

    course = _course(a.course)
    folder, archive = build_release(course, a.dest or course / "dist" / "student", a.book)
    print(f"student edition: {folder} and {archive}")
    return 0


def console() -> int:
    """`speclab-grade LAB SUBMISSIONS [options]` (the console command of the installed package)."""
    ap = argparse.ArgumentParser(prog="speclab-grade", description="Autograde a class of one lab "
                                 "(see autograder/README.md in the instructor repository).")
    _grade_options(ap)
    return _grade(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
