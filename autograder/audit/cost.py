"""What grading one student costs: `python -m autograder.audit.cost LAB SUBMISSIONS [--out DIR] [--repeats N]`.

`python -m autograder.audit.cost LAB SUBMISSIONS --class-size N [--workers W]` grades a class of
N copies of the first student, W at a time as `grade` does (default: one per core), and prints
the class's wall time divided by N: what a student costs when a class is graded.

`python -m autograder.audit.cost --throughput LAB [LAB ...] [--students N] [--workers W] [--cores C] [--hosts M]
[--class-size S]` grades N copies of each lab's reference as `grade --timing-parallel` does, and prints the
throughput table: students per hour here, each student's untimed worker-seconds and timed slot-seconds, and the
projected wall time of S students (default 500) on a host of C cores and on a cluster of M such hosts, one shard
each (`project` states the model). The `throughput` audit runs it on both labs.

`python -m autograder.audit.cost LAB --checks-only` prints the floor under that cost instead: every
check of the lab run once on the reference solution in this process, with no sandbox, no
nbgrader and no notebook, each with its wall and CPU time.

`python -m autograder.audit.cost LAB --nbgrader-only` times the REAL `nbgrader autograde` of the
reference submission alone, in a throw-away course (no sandbox, no second opinion), and prints its
scores per graded cell; it exits 1 unless the reference gets full marks.

Grades every student of SUBMISSIONS (a folder, as for `grade`) one after the other, with the
re-check on, and prints for each the wall time and the CPU time (user + system, of the grader
and of every process it waited for: nbgrader, the kernel it starts, the clean re-check) of
each sandboxed command and of the whole student. CPU time is what a quiet machine's wall time
would roughly be for these single-threaded processes (OMP_NUM_THREADS=1 in the sandbox); on a
loaded machine wall time grows with the load and CPU time much less. The template (the lab
released once) is built first and reported apart, as it is paid once per class.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def checks_only(lab: str) -> float:
    """Run every check of `lab` on the reference solution here; print and return the total wall time."""
    import importlib

    from autograder.authoring import reference
    from autograder.checks import DEFER_ENV

    os.environ.pop(DEFER_ENV, None)
    ns = vars(reference.load(lab))
    cells = importlib.import_module(f"autograder.checks.{lab}").CELLS
    total = 0.0
    for spec in cells:
        t0, c0 = time.perf_counter(), time.process_time()
        spec.check(*[ns[name] for name in spec.args])
        wall = time.perf_counter() - t0
        total += wall
        print(f"{spec.grade_id:<28} wall {wall:6.1f} s, cpu {time.process_time() - c0:6.1f} s", flush=True)
    print(f"every check of {lab} on the reference, in one process: {total:.1f} s")
    return total


def nbgrader_only(lab: str) -> int:
    """The wall time of the real `nbgrader autograde` of the reference submission alone, in a throw-away
    course (the course's configuration and solutions/); print it with the load average and the scores."""
    import subprocess
    import tempfile

    import nbformat
    from nbgrader.api import Gradebook

    from autograder.audit.mutants import make_submission
    from autograder.pipeline.config import BIN, REPO_ROOT, nbgrader_env, write_course

    def nbgrader(course: Path, *args: str) -> None:
        proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=nbgrader_env(course),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{proc.stderr[-3000:]}")

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        course = write_course(Path(tmp), REPO_ROOT, link_solutions=True)
        nbgrader(course, "generate_assignment", lab, "--force")
        release = nbformat.read(course / "labs" / lab / f"{lab}.ipynb", as_version=4)
        path = course / "submitted" / "reference" / lab / f"{lab}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(make_submission(lab, release), path)
        t0 = time.perf_counter()
        nbgrader(course, "autograde", lab, "--force", "--student=reference")
        seconds = time.perf_counter() - t0
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            nb = gb.find_submission_notebook(lab, lab, "reference")
            scores = {g.name: (float(g.score), float(g.max_score)) for g in nb.grades}
    got, top = sum(s for s, _ in scores.values()), sum(m for _, m in scores.values())
    print(f"{lab}: nbgrader autograde of the reference submission took {seconds:.1f} s "
          f"(load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} cores); "
          f"score {got:g} / {top:g}")
    for name, (sc, mx) in scores.items():
        print(f"  {name:28s} {sc:g} / {mx:g}")
    return 0 if got == top else 1


def whole_class(lab: str, submissions: Path, out: Path, course: Path, size: int, workers: int) -> int:
    """Grade `size` copies of the first submission of `submissions` as one class; print the
    per-student cost (the class's wall time / size) next to each student's own wall time."""
    import shutil

    from autograder.pipeline import Config, build_template, collect, grade_class

    student, first = next(iter(collect(submissions, lab, out / "collect-probe").items()))
    shutil.rmtree(out / "collect-probe", ignore_errors=True)
    copies = out / "class"
    shutil.rmtree(copies, ignore_errors=True)
    for i in range(size):
        shutil.copytree(first, copies / f"student{i:03d}" / lab)
    cfg = Config(lab, copies, out / "graded", course, workers=workers, force=True)
    build_template(cfg)  # paid once per class: not counted
    t0 = time.perf_counter()
    results = grade_class(cfg, progress=False)
    wall = time.perf_counter() - t0
    scores = sorted({f"{r['score']:g}/{r['max_score']:g}" for r in results})
    each = sorted(r["seconds"] for r in results)
    print(f"{lab}: a class of {size} copies of {student}, {workers} workers, "
          f"{os.cpu_count()} cores: wall {wall:.1f} s, {wall / size:.1f} s per student; "
          f"scores {', '.join(scores)}; one student's own time from {each[0]:.1f} to {each[-1]:.1f} s "
          f"(median {statistics.median(each):.1f} s); load average {os.getloadavg()[0]:.1f}")
    return 0


def grade_copies(lab: str, n: int, workers: int, parallel: bool, base: Path) -> dict:
    """Grade a class of n copies of the lab's reference, as `grade` does (workers at once, the timed phase with
    --timing-parallel when parallel); {wall, untimed and timed phase wall times, scores}. The template is built
    first and not counted: a class pays it once."""
    import nbformat

    from autograder.audit.mutants import make_submission
    from autograder.pipeline import Config, build_template, grade_class
    from autograder.pipeline.config import REPO_ROOT

    cfg = Config(lab, base / "subs", base / "out", REPO_ROOT, workers=workers, force=True, timing_parallel=parallel)
    layout = build_template(cfg)
    for nb in layout:  # each notebook of the release, its cells answered by the reference's
        release = nbformat.read(cfg.out / "template" / "labs" / lab / f"{nb}.ipynb", as_version=4)
        answered = make_submission(lab, release)
        for i in range(n):
            folder = cfg.submissions / f"student{i:03d}" / lab
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(answered, folder / f"{nb}.ipynb")
    t0 = time.time()
    results = grade_class(cfg, progress=False)
    wall = time.time() - t0
    spans = [(t["timed_from"], t["timed_to"]) for r in results if (t := r.get("bounds_timing")) and "timed_from" in t]
    timed = max(b for _, b in spans) - min(a for a, _ in spans) if spans else 0.0
    return {"students": n, "wall_s": round(wall, 1), "untimed_s": round(wall - timed, 1), "timed_s": round(timed, 1),
            "scores": sorted(r["score"] for r in results), "max_score": results[0]["max_score"] if results else 0,
            "pending": sum(bool(r.get("pending")) for r in results),
            "timing_cores": sorted({tuple(t.get("cores") or ()) for r in results if (t := r.get("bounds_timing"))})}


def project(m: dict, workers: int, slots: int, cores: int, hosts: int, size: int, cores_per_student: int) -> dict:
    """Throughput and projected wall times from one measured class `m` (graded here with `workers` workers and
    `slots` students timed at once). The model: a student's untimed checks cost untimed_s * workers / n
    worker-seconds and its timing timed_s * slots / n slot-seconds; a host of `cores` cores runs one worker per
    core and floor(cores / cores_per_student) timings at once; a cluster of `hosts` such hosts grades
    ceil(size / hosts) students each (a shard per host), all at once. It assumes work scales with cores, which
    a host whose memory bandwidth a whole class saturates will not quite do."""
    n = m["students"]
    untimed_each, timed_each = m["untimed_s"] * workers / n, m["timed_s"] * slots / n
    host_slots = max(1, cores // cores_per_student)

    def wall(students: int) -> float:
        return students * untimed_each / cores + students * timed_each / host_slots

    per_host = -(-size // hosts)
    return {"students_per_hour_here": round(3600 * n / m["wall_s"], 1),
            "untimed_worker_s_per_student": round(untimed_each, 1), "timed_slot_s_per_student": round(timed_each, 1),
            "host_cores": cores, "hosts": hosts, "class": size,
            "students_per_hour_one_host": round(3600 / (untimed_each / cores + timed_each / host_slots), 1),
            "one_host_h": round(wall(size) / 3600, 2), "cluster_h": round(wall(per_host) / 3600, 2)}


def table(rows: dict[str, dict]) -> list[str]:
    """The throughput table's lines, one row per lab (rows: lab -> `project`'s figures with `measured`)."""
    r0 = next(iter(rows.values()))
    lines = [f"throughput with --timing-parallel, measured here ({os.cpu_count()} cores, {r0['workers']} workers, "
             f"{r0['timing_slots']} students timed at once), projected for {r0['class']} students on a host of "
             f"{r0['host_cores']} cores and on {r0['hosts']} such hosts:",
             f"{'lab':<6} {'students/h here':>15} {'untimed s/student':>17} {'timed s/student':>15} "
             f"{'students/h, host':>16} {'one host':>9} {'cluster':>8}"]
    for lab, r in rows.items():
        lines.append(f"{lab:<6} {r['students_per_hour_here']:>15.1f} {r['untimed_worker_s_per_student']:>17.1f} "
                     f"{r['timed_slot_s_per_student']:>15.1f} {r['students_per_hour_one_host']:>16.1f} "
                     f"{r['one_host_h']:>8.2f}h {r['cluster_h']:>7.2f}h")
    return lines


def throughput(argv: list[str]) -> int:
    """`--throughput`: the throughput table (module docstring of the option)."""
    import json
    import tempfile

    from autograder.pipeline.schedule import timing_cores

    ap = argparse.ArgumentParser(prog="python -m autograder.audit.cost --throughput")
    ap.add_argument("labs", nargs="+")
    ap.add_argument("--students", type=int, default=4, help="copies of the reference graded per lab (default 4)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cores", type=int, default=32, help="cores of the host the projection is for (default 32)")
    ap.add_argument("--hosts", type=int, default=8, help="hosts of the cluster the projection is for (default 8)")
    ap.add_argument("--class-size", type=int, default=500, help="students of the projected class (default 500)")
    ap.add_argument("--json", type=Path, default=None, help="also write the table as JSON here")
    a = ap.parse_args(argv)
    from autograder.pipeline import Config

    probe = Config(a.labs[0], Path("."), Path("."), timing_parallel=True)
    slots = len([c for c in timing_cores(probe) if c]) or 1
    k = max(1, int(-(-probe.bounds.cpus // 1)))
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for lab in a.labs:
            m = grade_copies(lab, a.students, a.workers, True, Path(tmp) / lab)
            rows[lab] = {"measured": m, "workers": a.workers, "timing_slots": slots,
                         **project(m, a.workers, slots, a.cores, a.hosts, a.class_size, k)}
    print("\n".join(table(rows)))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if "--throughput" in argv:
        return throughput([x for x in argv if x != "--throughput"])
    if "--checks-only" in argv:
        (lab,) = [a for a in argv if a != "--checks-only"]
        checks_only(lab)
        return 0
    if "--nbgrader-only" in argv:
        (lab,) = [a for a in argv if a != "--nbgrader-only"]
        return nbgrader_only(lab)
    from autograder.inside.nbgrader_cmd import skip_slow_imports
    from autograder.sandbox import policy

    skip_slow_imports()
    from autograder.pipeline import Config, build_template, collect, find_course, grade_student

    ap = argparse.ArgumentParser(prog="python -m autograder.audit.cost")
    ap.add_argument("lab")
    ap.add_argument("submissions", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="default: a folder under /tmp")
    ap.add_argument("--course", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=1, help="grade every student this many times")
    ap.add_argument("--class-size", type=int, default=0, metavar="N",
                    help="instead: grade a class of N copies of the first student with --workers workers, as "
                         "`grade` does, and print the class's wall time divided by N")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="with --class-size (default: one per core)")
    a = ap.parse_args(argv)
    course = find_course(a.course, env_course=os.environ.get("SPECLAB_COURSE"))
    out = (a.out or Path("/tmp") / f"speclab-timing-{a.lab}-{os.getpid()}").resolve()
    if a.class_size:
        return whole_class(a.lab, a.submissions.resolve(), out, course, a.class_size, a.workers)
    cfg = Config(a.lab, a.submissions.resolve(), out, course, workers=1, force=True)
    out.mkdir(parents=True, exist_ok=True)
    phases: list[tuple[str, float, float]] = []

    @contextmanager
    def timed(cmd):
        t0, c0 = time.perf_counter(), cpu_seconds()
        yield
        joined = " ".join(map(str, cmd))
        name = ("re-check" if "autograder.inside.recheck" in joined else "nbgrader autograde" if "autograde" in joined
                else Path(str(cmd[0])).name)
        phases.append((name, time.perf_counter() - t0, cpu_seconds() - c0))

    with policy.around_each_command(timed):
        t0, c0 = time.perf_counter(), cpu_seconds()
        layout = build_template(cfg)
        print(f"template (once per class): wall {time.perf_counter() - t0:.1f} s, cpu {cpu_seconds() - c0:.1f} s")
        students = collect(cfg.submissions, cfg.lab, cfg.out)
        totals: dict[str, list[tuple[float, float]]] = {}
        for rep in range(a.repeats):
            for student, folder in students.items():
                phases.clear()
                t0, c0 = time.perf_counter(), cpu_seconds()
                result = grade_student(cfg, layout, student, folder, 0)
                wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
                totals.setdefault(student, []).append((wall, cpu))
                load = os.getloadavg()[0]
                print(f"{student} (run {rep + 1}): {result['score']:g}/{result['max_score']:g} points, "
                      f"wall {wall:.1f} s, cpu {cpu:.1f} s, load average {load:.1f}")
                for name, w, c in phases:
                    print(f"    {name}: wall {w:.1f} s, cpu {c:.1f} s")
        for student, runs in totals.items():
            print(f"{student}: median of {len(runs)} run(s): wall {statistics.median(w for w, _ in runs):.1f} s, "
                  f"cpu {statistics.median(c for _, c in runs):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
