"""Same grades (issue 47): grade fixed classes with the real pipeline, and compare two such gradings.

    python -m autograder.audit.same_grades grade OUT [--classes tiny,lab1,lab2] [--work DIR] [--contention X]
    python -m autograder.audit.same_grades compare DIR_A DIR_B

A refactor of the grading code that claims "behaviour unchanged" is held to it by grading the same
classes before and after it and comparing the results file by file.

`grade` grades three classes with `grade_class` (the sandbox on, 2 workers, never --unsafe):
- `tiny`: the tiny lab's class exactly as tests/autograder/pipeline/test_grade.py's `graded` fixture
  builds it (its `_variants`, read from that file, and its LIMITS, with the machine's contention
  fixed at --contention, default 2.0, so the limits do not depend on how busy the machine is);
- `lab1`: Lab 1's reference (`reference`) and every mutant of autograder/audit/mutants/lab1.py
  (`mutant_<name>`), built by `make_submission` from the lab's release, default limits;
- `lab2`: the same for Lab 2.
Every class is graded under one FIXED run key (sha256(b"same_grades")), so the statistical checks draw the
same instances in both gradings: `Config(..., run_key=KEY)` when Config has that field, else the key
is put in `_RUN_KEYS[str(out)]` of the module that defines it before `grade_class(cfg)`. The pipeline
works in DIR (default OUT.work, beside OUT; wiped per class before it is graded), then the normalised
results go to OUT/<class>/<student>.json (json.dumps(sort_keys=True, indent=1)) and OUT/<class>/grades.csv.

Normalisation, and nothing else (every other byte is the pipeline's own):
1. the result's top-level keys `seconds`, `grader_version`, `bounds`, `bounds_timing`, `figures` and
   `timed_runs` are dropped (what records time, the code digest, or the machine's usage);
2. in every string (of the result and of grades.csv) the pipeline's working folder DIR is written
   `<WORK>` and the code root (the folder `autograder` was imported from) `<CODE>`, so that two gradings
   of two checkouts in two folders can be compared (a path is where the run happened, not a grade);
3. in the strings that belong to a TIMED cell (a grade id whose CellSpec's check declares `.timed = True`
   in autograder.checks.<lab>.CELLS, or was timed on 0c9fd13: lab1 test_batch_speed, lab2 test_speedup and
   test_bandwidth), each run of digits (with decimal points inside it, `\\d+(\\.\\d+)*`) is replaced by `#`:
   - a problem `<nb>.ipynb <gid>: ...` of a timed gid: everything after the `<nb>.ipynb <gid>: ` head
     (pending-point notes included: they are such problems);
   - each note of the result's `timing[<nb>][<gid>]` of a timed gid;
   - in grades.csv, the `timing` column whole, and in the `problems` column each of those problems.
   Scores, pending points and every untimed string are never masked.

`compare A B` compares every file under A and B: IDENTICAL, or a unified diff under one of
- TIMING VERDICT DIFFERS: the only differences are the verdicts of timed cells (their scores, pending
  points, timing notes and problems, and the totals they move): machine noise, not a grading change;
- DIFFERS: anything else (a grading change), or ONLY IN A / ONLY IN B.
It ends with "N files, M identical" and exits 1 when any file is not identical.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import dataclasses
import difflib
import hashlib
import importlib
import importlib.util
import io
import itertools
import json
import os
import re
import shutil
import sys
import time
import traceback
from pathlib import Path

import autograder

KEY = hashlib.sha256(b"same_grades").digest()
CODE_ROOT = Path(autograder.__file__).resolve().parents[1]
CLASSES = ("tiny", "lab1", "lab2")
DROPPED = ("seconds", "grader_version", "bounds", "bounds_timing", "figures", "timed_runs")
TIMED_TODAY = {"lab1": {"test_batch_speed"}, "lab2": {"test_speedup", "test_bandwidth"}, "tiny": set()}
NUMBER = re.compile(r"\d+(?:\.\d+)*")
HEAD = re.compile(r"(\S+\.ipynb (\S+): )")  # how a cell's problem starts: results.py, nbgrader.cell_problems
TINY_TEST = Path("tests") / "autograder" / "pipeline" / "test_grade.py"
SUPPORT = CODE_ROOT / "tests" / "support"


# ----------------------------------------------------------------------------- normalisation
def timed_cells(lab: str) -> set[str]:
    """The grade ids of lab's timed cells: those whose check declares `.timed = True`, and those of 0c9fd13."""
    out = set(TIMED_TODAY.get(lab, ()))
    try:
        module = importlib.import_module(f"autograder.checks.{lab}")
    except ImportError:
        return out
    for spec in getattr(module, "CELLS", ()):
        if getattr(spec.check, "timed", False) is True or getattr(spec, "timed", False) is True:
            out.add(spec.grade_id)
    return out


def mask(text: str) -> str:
    return NUMBER.sub("#", text)


def timed_head(text: str, timed: set[str]) -> str | None:
    """The `<nb>.ipynb <gid>: ` head of a problem of a timed cell, else None."""
    m = HEAD.match(text)
    return m.group(1) if m and m.group(2) in timed else None


def mask_problem(text: str, timed: set[str]) -> str:
    head = timed_head(text, timed)
    return text if head is None else head + mask(text[len(head):])


class Paths:
    """Rule 2: the working folder and the code root, written <WORK> and <CODE>."""

    def __init__(self, work: Path):
        pairs = {}
        for path, name in ((work, "<WORK>"), (CODE_ROOT, "<CODE>")):
            for p in {str(path), str(path.resolve()), os.path.realpath(path)}:
                pairs[p] = name
        self.pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))  # the longest first
        self.count = 0

    def __call__(self, value):
        if isinstance(value, str):
            for path, name in self.pairs:
                if path in value:
                    self.count += value.count(path)
                    value = value.replace(path, name)
            return value
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        return value


def normalise_result(result: dict, timed: set[str], paths: Paths) -> dict:
    r = paths({k: v for k, v in result.items() if k not in DROPPED})
    if isinstance(r.get("problems"), list):
        r["problems"] = [mask_problem(p, timed) if isinstance(p, str) else p for p in r["problems"]]
    for cells in (r.get("timing") or {}).values():
        for gid in cells:
            if gid in timed:
                cells[gid] = [mask(n) if isinstance(n, str) else n for n in cells[gid]]
    return r


def normalise_csv(text: str, results: dict[str, dict], timed: set[str], paths: Paths) -> str:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    out = io.StringIO(newline="")
    w = csv.writer(out)
    w.writerow(header)
    for row in rows[1:]:
        row = [paths(c) for c in row]
        if "timing" in col:
            row[col["timing"]] = mask(row[col["timing"]])
        if "problems" in col and row and row[0] in results:
            cell = row[col["problems"]]
            for p in results[row[0]].get("problems", []):
                p = paths(p)
                if timed_head(p, timed) is not None:
                    cell = cell.replace(p, mask_problem(p, timed))
            row[col["problems"]] = cell
        w.writerow(row)
    return out.getvalue()


def read(path: Path) -> str:
    with open(path, newline="") as f:  # line ends as written (csv's are \r\n)
        return f.read()


def dumps(result: dict) -> str:
    return json.dumps(result, sort_keys=True, indent=1) + "\n"


# ----------------------------------------------------------------------------- the pipeline, as it is today or after
def pipeline():
    """(grade_class, build_template, Config, the module holding _RUN_KEYS or None, where grade_class lives)."""
    try:
        mod = importlib.import_module("autograder.pipeline.schedule")
        grade_class = mod.grade_class
    except (ImportError, AttributeError):
        mod = importlib.import_module("autograder.pipeline.grade")
        grade_class = mod.grade_class
    keys_mod = None
    for name in (mod.__name__, "autograder.pipeline.schedule", "autograder.pipeline.grade"):
        try:
            m = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(m, "_RUN_KEYS"):
            keys_mod = m
            break
    from autograder.pipeline.config import Config
    from autograder.pipeline.nbgrader import build_template

    return grade_class, build_template, Config, keys_mod, mod.__name__


def make_config(out: Path, **kw):
    """A Config under the fixed key: (cfg, how the key was given)."""
    _, _, Config, keys_mod, _ = pipeline()
    out = Path(out).resolve()
    if "run_key" in {f.name for f in dataclasses.fields(Config)}:
        return Config(out=out, run_key=KEY, **kw), "Config.run_key"
    if keys_mod is None:
        raise SystemExit("this pipeline has neither Config.run_key nor _RUN_KEYS: teach same_grades its key")
    keys_mod._RUN_KEYS[str(out)] = KEY
    return Config(out=out, **kw), f"{keys_mod.__name__}._RUN_KEYS"


def check_key(cfg, how: str) -> None:
    if how.endswith("_RUN_KEYS"):
        _, _, _, keys_mod, _ = pipeline()
        if keys_mod._RUN_KEYS.get(str(Path(cfg.out).resolve())) != KEY:
            raise RuntimeError(f"the run did not grade under the fixed key ({how})")


@contextlib.contextmanager
def fixed_cell_ids(label: str):
    """nbformat's new cells get ids drawn from label and a counter, not uuid4: the same submissions every run
    (a cell the tests add has a new id, and a problem on it names it)."""
    from nbformat import validator
    from nbformat.corpus import words
    from nbformat.v4 import convert, nbbase

    counter = itertools.count()

    def next_id() -> str:
        return hashlib.sha256(f"same_grades {label} {next(counter)}".encode()).hexdigest()[:8]

    saved = [(m, a, getattr(m, a)) for m, a in ((words, "generate_corpus_id"), (nbbase, "random_cell_id"),
                                                 (convert, "random_cell_id"), (validator, "generate_corpus_id"))]
    for m, a, _ in saved:
        setattr(m, a, next_id)
    try:
        yield
    finally:
        for m, a, f in saved:
            setattr(m, a, f)


def write_notebook(nb, folder: Path, name: str) -> None:
    import nbformat

    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{name}.ipynb")


# ----------------------------------------------------------------------------- the classes
def tiny_test_module(contention: float) -> dict:
    """LIMITS, _idx, _variants and what they need, read from test_grade.py (its imports that fail are left out)."""
    import ast

    os.environ["SPECLAB_CONTENTION"] = repr(contention)  # load.scaled: limits as on a machine this busy
    for p in (str(SUPPORT), str(CODE_ROOT)):
        if p not in sys.path:
            sys.path.insert(0, p)
    path = CODE_ROOT / TINY_TEST
    tree = ast.parse(path.read_text())
    wanted = {"LIMITS", "FULL", "HALF_PTS", "SEGV", "PATCH_ALL", "_idx", "_variants"}
    ns: dict = {"__name__": "same_grades_tiny", "__file__": str(path)}
    for node in tree.body:
        keep = isinstance(node, (ast.Import, ast.ImportFrom))
        keep |= isinstance(node, ast.FunctionDef) and node.name in wanted
        keep |= isinstance(node, ast.Assign) and any(isinstance(n, ast.Name) and n.id in wanted
                                                    for t in node.targets for n in ast.walk(t))
        if not keep:
            continue
        code = compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec")
        try:
            exec(code, ns)  # noqa: S102 - the repository's own test code
        except ImportError as err:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                raise
            print(f"  (test_grade.py: {err}; not needed here)", file=sys.stderr)
    return ns


def build_tiny(work: Path, contention: float):
    """The tiny class as test_grade.py's `graded` fixture writes it: (cfg, how, {student: expected score})."""
    import nbformat

    ns = tiny_test_module(contention)
    F = importlib.import_module("grading_fixtures")
    _, build_template, _, _, _ = pipeline()
    course = F.make_course(work / "course")
    subs = work / "subs"
    cfg, how = make_config(work / "out", lab=F.LAB, submissions=subs, course_root=course, workers=2,
                           limits=ns["LIMITS"], lab_checks=F.LAB_CHECKS)
    build_template(cfg)
    rel = nbformat.read(cfg.out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    variants = ns["_variants"](rel)
    F.write_variants(subs, rel, variants)
    print(f"  tiny: limits {ns['LIMITS']}", file=sys.stderr)
    return cfg, how, {name: want for name, (_, want, _) in variants.items()}


def build_lab(lab: str, work: Path, course: Path):
    """Lab's reference and every catalog mutant as one class: (cfg, how, {student: expected} for the reference)."""
    import nbformat

    from autograder.audit.mutants import make_submission

    mutants = importlib.import_module(f"autograder.audit.mutants.{lab}").MUTANTS
    _, build_template, _, _, _ = pipeline()
    cfg, how = make_config(work / "out", lab=lab, submissions=work / "subs", course_root=course, workers=2)
    build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / lab / f"{lab}.ipynb", as_version=4)
    write_notebook(make_submission(lab, release), work / "subs" / "reference" / lab, lab)
    for m in mutants:
        write_notebook(make_submission(lab, release, m), work / "subs" / f"mutant_{m.name}" / lab, lab)
    return cfg, how, {"reference": None}, {f"mutant_{m.name}": m for m in mutants}


def looks_wrong(lab: str, student: str, r: dict, expected: dict, mutants: dict) -> str | None:
    """Why a result looks wrong (a reference short of full marks, a mutant keeping its part, a tiny student
    off the test's figure, a grading failure), or None."""
    if any(isinstance(p, str) and p.startswith("grading failed") for p in r.get("problems", [])):
        return "grading failed: " + r["problems"][0][:200]
    if student in expected:
        want = r["max_score"] if expected[student] is None else expected[student]
        if r["score"] != want or r.get("pending"):
            return f"score {r['score']:g} (pending {r.get('pending') or {}}), expected {want:g}"
    if student in mutants:
        part = mutants[student].part
        cells = {c.grade_id: c.points for c in importlib.import_module(f"autograder.checks.{lab}").CELLS
                 if c.part == part}
        got = {g: s for cs in r["scores"].values() for g, s in cs.items() if g in cells}
        if all(got.get(g, 0) >= p for g, p in cells.items()):
            return f"kept every point of part {part} ({got})"
    return None


def grade(out: Path, classes: list[str], work: Path, contention: float) -> int:
    import inspect

    from autograder.pipeline.config import find_course

    env = {"env_course": os.environ.get("SPECLAB_COURSE")}  # a find_course that no longer reads the environment
    course = find_course(**{k: v for k, v in env.items() if k in inspect.signature(find_course).parameters})
    grade_class, _, _, _, where = pipeline()
    print(f"same_grades: autograder from {CODE_ROOT}; course {course}; grade_class from {where}; "
          f"out {out}; work {work}", flush=True)
    if course != CODE_ROOT:
        print(f"  WARNING: the course ({course}) is not the code root ({CODE_ROOT})", flush=True)
    paths = Paths(work)
    failures, t_all = 0, time.perf_counter()
    for name in classes:
        t0 = time.perf_counter()
        cwork = work / name
        shutil.rmtree(cwork, ignore_errors=True)
        shutil.rmtree(out / name, ignore_errors=True)
        cwork.mkdir(parents=True)
        try:
            with fixed_cell_ids(name):
                if name == "tiny":
                    cfg, how, expected = build_tiny(cwork, contention)
                    mutants = {}
                else:
                    cfg, how, expected, mutants = build_lab(name, cwork, course)
            n = sum(1 for p in Path(cfg.submissions).iterdir() if p.is_dir())
            print(f"[{name}] {n} students, key by {how}; grading ...", flush=True)
            results = {r["student"]: r for r in grade_class(cfg, progress=True)}
            check_key(cfg, how)
        except Exception:  # noqa: BLE001 - the other classes still get graded
            failures += 1
            print(f"[{name}] FAILED after {time.perf_counter() - t0:.0f} s:\n{traceback.format_exc()}", flush=True)
            continue
        timed = timed_cells(cfg.lab)
        dest = out / name
        dest.mkdir(parents=True, exist_ok=True)
        for s, r in sorted(results.items()):
            (dest / f"{s}.json").write_text(dumps(normalise_result(r, timed, paths)))
            why = looks_wrong(cfg.lab, s, r, expected, mutants)
            print(f"  {s}: {r['score']:g}/{r['max_score']:g}" + (f"  <-- LOOKS WRONG: {why}" if why else ""),
                  flush=True)
        csv_text = read(Path(cfg.out) / "grades.csv")
        (dest / "grades.csv").write_text(normalise_csv(csv_text, results, timed, paths), newline="")
        if len(results) != n:
            failures += 1
            print(f"[{name}] {len(results)} results for {n} students", flush=True)
        print(f"[{name}] done: {len(results)} students in {time.perf_counter() - t0:.0f} s (timed cells: "
              f"{sorted(timed)})", flush=True)
    print(f"same_grades: {len(classes)} classes in {time.perf_counter() - t_all:.0f} s; {paths.count} path(s) "
          f"written <WORK>/<CODE>; {failures} failure(s)", flush=True)
    return 1 if failures else 0


# ----------------------------------------------------------------------------- compare
def _lab_of(rel: Path) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else ""


def _json_timing_only(a: str, b: str, timed: set[str]) -> bool:
    """Both results agree once the verdicts of timed cells are left out, and those verdicts differ."""
    try:
        ra, rb = json.loads(a), json.loads(b)
    except ValueError:
        return False

    def untimed(r: dict) -> dict:
        r = copy.deepcopy(r)
        for key in ("score", "pending"):
            r.pop(key, None)
        for cells in list((r.get("scores") or {}).values()) + list((r.get("timing") or {}).values()):
            for gid in list(cells):
                if gid in timed:
                    del cells[gid]
        r["timing"] = {nb: c for nb, c in (r.get("timing") or {}).items() if c}
        r["problems"] = [p for p in r.get("problems", []) if not (isinstance(p, str) and timed_head(p, timed))]
        return r

    def verdict(r: dict) -> tuple:
        scores = {(nb, g): s for nb, cs in (r.get("scores") or {}).items() for g, s in cs.items() if g in timed}
        undecided = {(nb, g) for nb, cs in (r.get("timing") or {}).items() for g in cs if g in timed}
        return scores, r.get("pending"), undecided

    return untimed(ra) == untimed(rb) and verdict(ra) != verdict(rb)


def _csv_timing_only(a: str, b: str, timed: set[str]) -> bool:
    ra, rb = list(csv.reader(io.StringIO(a, newline=""))), list(csv.reader(io.StringIO(b, newline="")))
    if not ra or not rb or ra[0] != rb[0] or len(ra) != len(rb):
        return False
    header = ra[0]
    verdict_cols = {i for i, h in enumerate(header)
                    if h in ("score", "percent", "timing", "pending") or h.split(":")[-1] in timed}
    prob = header.index("problems") if "problems" in header else None

    def untimed(row):
        kept = [c for i, c in enumerate(row) if i not in verdict_cols and i != prob]
        if prob is not None and prob < len(row):
            kept.append([p for p in row[prob].split(" | ") if not timed_head(p, timed)])
        return kept

    def verdict(row):
        return [c for i, c in enumerate(row) if i in verdict_cols and header[i] != "percent"]

    return (all(untimed(x) == untimed(y) for x, y in zip(ra[1:], rb[1:]))
            and any(verdict(x) != verdict(y) for x, y in zip(ra[1:], rb[1:])))


def compare(a: Path, b: Path) -> int:
    files = sorted({p.relative_to(root) for root in (a, b) for p in root.rglob("*") if p.is_file()})
    counts = {"IDENTICAL": 0, "TIMING VERDICT DIFFERS": 0, "DIFFERS": 0}
    for rel in files:
        pa, pb = a / rel, b / rel
        if not pa.exists() or not pb.exists():
            print(f"{rel}: DIFFERS (ONLY IN {'B' if not pa.exists() else 'A'})")
            counts["DIFFERS"] += 1
            continue
        ta, tb = read(pa), read(pb)
        if ta == tb:
            print(f"{rel}: IDENTICAL")
            counts["IDENTICAL"] += 1
            continue
        timed = timed_cells(_lab_of(rel))
        only_timing = (_json_timing_only(ta, tb, timed) if rel.suffix == ".json"
                       else _csv_timing_only(ta, tb, timed) if rel.suffix == ".csv" else False)
        what = "TIMING VERDICT DIFFERS" if only_timing else "DIFFERS"
        counts[what] += 1
        print(f"{rel}: {what}")
        sys.stdout.writelines(difflib.unified_diff(ta.splitlines(keepends=True), tb.splitlines(keepends=True),
                                                   fromfile=str(pa), tofile=str(pb)))
        print()
    n, m = len(files), counts["IDENTICAL"]
    print(f"{n} files, {m} identical ({counts['TIMING VERDICT DIFFERS']} timing verdict differs, "
          f"{counts['DIFFERS']} differ)")
    return 0 if n == m and n else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.audit.same_grades",
                                 description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grade", help="grade the fixed classes into OUT (normalised)")
    g.add_argument("out", type=Path)
    g.add_argument("--classes", default=",".join(CLASSES), help=f"comma-separated, of {CLASSES}")
    g.add_argument("--work", type=Path, default=None, help="the pipeline's working folder (default OUT.work)")
    g.add_argument("--contention", type=float, default=2.0,
                   help="the contention the tiny class's limits are scaled for (tests/support/load.py)")
    c = sub.add_parser("compare", help="compare two folders written by grade")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "compare":
        return compare(args.a, args.b)
    out = args.out.resolve()
    classes = [x for x in args.classes.split(",") if x]
    unknown = set(classes) - set(CLASSES)
    if unknown:
        ap.error(f"unknown classes {sorted(unknown)}")
    work = (args.work or out.with_name(out.name + ".work")).resolve()
    return grade(out, classes, work, args.contention)


if __name__ == "__main__":
    sys.exit(main())
