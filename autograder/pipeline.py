"""Instructor pipeline: a folder (or zip) of submissions -> grades CSV, feedback HTML, summary.

Design (see autograder/README.md for the instructor's view):
- a template course is built once per lab (`nbgrader generate_assignment` into
  OUT/template): its gradebook lists the notebooks, grade cells and points;
- every student is graded in a scratch course of its own (OUT/work/<student>): a copy of
  the template gradebook, the student's notebooks, `nbgrader autograde` inside the sandbox
  (autograder.sandbox); feedback HTML is generated once from the merged gradebook. No two
  students share a process, a directory or a gradebook, so workers never write the same
  sqlite file; the lab's own cells are first put back as released (`normalise`);
- a clean re-check (autograder.replay) re-runs each notebook whose cells scored in a fresh
  interpreter with the course modules restored before every test cell; a graded cell keeps
  the lower of the two scores;
- the outcome of each student is written atomically to OUT/results/<student>.json; that
  file is the resume point (a student with a result for the same submission files is
  skipped unless force) and the only input of the merge;
- the merge (grades.csv, gradebook.db, summary) reads the result files in sorted order,
  so it is the same whatever the number of workers or the order they finished in.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from . import sandbox, verdict
from .sandbox import Limits

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STUDENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class Config:
    lab: str
    submissions: Path
    out: Path
    course_root: Path = REPO_ROOT
    workers: int = max(1, os.cpu_count() or 1)
    force: bool = False
    only: tuple[str, ...] = ()  # grade just these students (others keep their results)
    limits: Limits = field(default_factory=Limits)
    recheck: bool = True
    unsafe: bool = False  # grade without the sandbox (trusted submissions only; see README)


# ----------------------------------------------------------------------------- collect
def _unpack(submissions: Path, out: Path) -> Path:
    """A zip is extracted (member paths checked) under OUT/unpacked; a folder is used as is."""
    if submissions.is_dir():
        return submissions
    if not zipfile.is_zipfile(submissions):
        raise SystemExit(f"{submissions}: neither a folder nor a zip file")
    dest = out / "unpacked"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with zipfile.ZipFile(submissions) as zf:
        for info in zf.infolist():
            target = (dest / info.filename).resolve()
            if not str(target).startswith(str(dest.resolve()) + os.sep) or info.is_dir():
                continue  # absolute or ../ paths are dropped
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
    return dest


def collect(submissions: Path, lab: str, out: Path) -> dict[str, Path]:
    """student id -> folder holding that student's files for `lab`.

    Accepted layouts (folder or zip): nbgrader's `submitted/<student>/<lab>/...`,
    `<student>/<lab>/...`, `<student>/...`, and flat LMS files `<student>__<name>.ipynb`
    (everything before the first double underscore is the student id).
    """
    base = _unpack(Path(submissions), out)
    if (base / "submitted").is_dir():
        base = base / "submitted"
    found: dict[str, Path] = {}
    flat = sorted(p for p in base.glob("*__*") if p.is_file())
    for p in flat:
        student = p.name.split("__", 1)[0]
        dest = out / "collected" / student / lab
        if student not in found:
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
        shutil.copy2(p, dest / p.name.split("__", 1)[1])
        found[student] = dest
    for d in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
        if d.name.startswith(".") or d.name in ("collected", "unpacked"):
            continue
        found[d.name] = d / lab if (d / lab).is_dir() else d
    bad = [s for s in found if not STUDENT_RE.match(s)]
    if bad:
        raise SystemExit(f"student ids must match {STUDENT_RE.pattern}: {bad}")
    return dict(sorted(found.items()))


def submission_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            h.update(str(p.relative_to(folder)).encode() + b"\0")
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


# ----------------------------------------------------------------------------- template
def _course_config(root: Path, course_root: Path, limits: Limits | None) -> None:
    lines = ["c = get_config()", f"load_subconfig({str(course_root / 'nbgrader_config.py')!r})"]
    sub = course_root / "autograder" / "nbgrader_config.py"  # the root config loads it by a relative path
    if sub.exists():
        lines.append(f"load_subconfig({str(sub)!r})")
    lines += [
             f"c.CourseDirectory.root = {str(root)!r}"]
    if limits is not None:
        if limits.cell_timeout_s is not None:
            lines.append(f"c.Execute.timeout = {limits.cell_timeout_s}")
        lines += ["c.Execute.interrupt_on_timeout = True",
                  "c.Execute.execute_retries = 0",
                  "c.LimitOutput.max_lines = 1000",
                  "c.LimitOutput.max_traceback = 100"]
    (root / "nbgrader_config.py").write_text("\n".join(lines) + "\n")


def _env(root: Path) -> dict:
    """The grader's own nbgrader calls (release, feedback): its environment, Jupyter paths private."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON", "SPECLAB"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", HOME=str(root / "home"),
               TMPDIR=str(root / "tmp"), IPYTHONDIR=str(root / "ipython"), MPLBACKEND="Agg",
               MPLCONFIGDIR=str(root / "home"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               JUPYTER_DATA_DIR=str(root / "home" / "jupyter"), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def _code_root(cfg: Config) -> Path:
    """Where the `speclab` package and `autograder.checks` come from for this course."""
    return cfg.course_root if (cfg.course_root / "autograder").is_dir() else REPO_ROOT


def _student_env(cfg: Config, root: Path) -> dict:
    """A cleared environment for the sandbox: nothing of the grader's own reaches the student."""
    return sandbox.minimal_env(root / "home", PATH=f"{BIN}:/usr/local/bin:/usr/bin:/bin",
                               PYTHONPATH=str(_code_root(cfg)), IPYTHONDIR=str(root / "ipython"),
                               MPLCONFIGDIR=str(root / "home"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
                               JUPYTER_DATA_DIR=str(root / "home" / "jupyter"))


def course_mounts(cfg: Config) -> list[Path]:
    """What of the course a student's sandbox sees, read-only: the nbgrader configuration, the
    `speclab` package and the checks (plus the re-check runner). Not solutions/, not the
    rest of autograder/ (the Lab 2 reference lives there), not the grading output."""
    code = _code_root(cfg)
    here = Path(__file__).resolve().parent
    paths = [cfg.course_root / "nbgrader_config.py", cfg.course_root / "autograder" / "nbgrader_config.py",
             code / "speclab", code / "autograder" / "__init__.py", code / "autograder" / "checks",
             here / "replay.py", here / "verdict.py"]
    return [p for p in paths if p.exists()]


def build_template(cfg: Config) -> dict:
    """Release the lab once into OUT/template; return {notebook: {grade_id: max points}}."""
    root = cfg.out / "template"
    source = cfg.course_root / "solutions" / cfg.lab
    if not source.is_dir():
        raise SystemExit(f"no lab {cfg.lab!r}: {source} does not exist")
    digest = hashlib.sha256((submission_hash(source) + (cfg.course_root / "nbgrader_config.py").read_text())
                            .encode()).hexdigest()
    stamp = root / "source.sha256"
    if not (stamp.exists() and stamp.read_text() == digest and (root / "gradebook.db").exists()):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        (root / "solutions").symlink_to(cfg.course_root / "solutions", target_is_directory=True)
        _course_config(root, cfg.course_root, None)
        proc = subprocess.run([str(BIN / "nbgrader"), "generate_assignment", cfg.lab, "--force"], cwd=root,
                              env=_env(root), capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"nbgrader generate_assignment {cfg.lab} failed:\n{proc.stderr[-3000:]}")
        stamp.write_text(digest)
    return gradebook_layout(root / "gradebook.db", cfg.lab)


def gradebook_layout(db: Path, lab: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        a = gb.find_assignment(lab)
        return {nb.name: {g.name: float(g.max_score) for g in sorted(nb.grade_cells, key=lambda g: g.name)}
                for nb in sorted(a.notebooks, key=lambda n: n.name)}


# ----------------------------------------------------------------------------- one student
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


def _check_notebooks(folder: Path, expected: list[str], max_bytes: int) -> tuple[dict[str, Path], list[str]]:
    """Which expected notebooks are usable, and a line per problem found before grading."""
    problems: list[str] = []
    files = sorted(p for p in folder.rglob("*.ipynb") if p.is_file() and not p.is_symlink()
                   and ".ipynb_checkpoints" not in p.parts) if folder.is_dir() else []
    by_name = {p.name: p for p in files}
    usable: dict[str, Path] = {}
    for name in expected:
        path = by_name.get(f"{name}.ipynb")
        if path is None:
            others = [p for p in files if p.stem not in expected]
            if len(expected) == 1 and len(others) == 1:  # an LMS renamed it ("lab1 (2).ipynb")
                path = others[0]
                problems.append(f"{name}.ipynb: graded the only notebook handed in, {path.name}")
            else:
                problems.append(f"{name}.ipynb: missing (0 points for its cells)")
                continue
        if path.stat().st_size > max_bytes:
            problems.append(f"{name}.ipynb: larger than {max_bytes >> 20} MB, not graded (0 points)")
            continue
        try:
            nb = json.loads(path.read_bytes())
            if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
                raise ValueError("no list of cells")
        except (ValueError, UnicodeDecodeError) as err:
            problems.append(f"{name}.ipynb: not a valid notebook ({str(err)[:120]}); 0 points for its cells")
            continue
        usable[name] = path
    for p in files:
        if p.stem not in expected and p not in usable.values():
            problems.append(f"{p.name}: extra notebook, ignored")
    return usable, problems


def _nbgrader_scores(db: Path, lab: str, student: str, layout: dict) -> dict[str, dict[str, float]]:
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


def _why_failed(log: str) -> str:
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


def _cell_problems(nb_path: Path) -> list[str]:
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
                lines.append(f"cell {c.get('id', '?')}: {ename}: {str(o.get('evalue', ''))[:160]}".rstrip(": "))
                break
            if o.get("output_type") == "error" and graded:
                ename = o.get("ename", "")
                lines.append(f"{meta.get('grade_id')}: {ename}: {str(o.get('evalue', ''))[:160]}".rstrip(": "))
                break
    return lines


def grade_student(cfg: Config, layout: dict, student: str, folder: Path, slot: int) -> dict:
    """Grade one student in its own scratch course; write and return its result."""
    t0 = time.perf_counter()
    lim = cfg.limits
    root = cfg.out / "work" / student
    shutil.rmtree(root, ignore_errors=True)
    for sub in ("home", "tmp", "runtime", "ipython/profile_default/startup"):
        (root / sub).mkdir(parents=True)
    (root / "ipython/profile_default/startup/00-speclab-cap.py").write_text(CAP_STARTUP.format(kb=lim.output_kb))
    _course_config(root, cfg.course_root, lim)
    shutil.copy2(cfg.out / "template" / "gradebook.db", root / "gradebook.db")
    usable, problems = _check_notebooks(folder, list(layout), lim.file_mb << 20)
    dest = root / "submitted" / student / cfg.lab
    dest.mkdir(parents=True)
    pristine: dict[str, str] = {}  # the normalised notebooks, kept out of the students' reach
    for name, path in usable.items():
        release = json.loads((cfg.out / "template" / "labs" / cfg.lab / f"{name}.ipynb").read_text())
        fixed, lines = normalise(json.loads(path.read_bytes()), release)
        problems += [f"{name}.ipynb {line}" for line in lines]
        pristine[name] = json.dumps(fixed, indent=1)
        (dest / f"{name}.ipynb").write_text(pristine[name])
    uid = sandbox.student_uid(slot)
    sandbox.give_to(root, uid, _caps(cfg))
    scores = {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}
    env = _student_env(cfg, root)
    if usable:
        res = _sandboxed(cfg, [str(BIN / "nbgrader"), "autograde", cfg.lab, f"--student={student}", "--force"],
                         root, root, env, lim.notebook_timeout_s * len(usable) + 60, uid, "autograde.log")
        try:  # nbgrader's verdict, read once its sandbox is gone; the student may have altered it (see below)
            scores = _nbgrader_scores(root / "gradebook.db", cfg.lab, student, layout)
            db_ok = True
        except Exception:  # noqa: BLE001 - the notebook may have overwritten its scratch gradebook
            db_ok = False
        for name in usable:
            graded = root / "autograded" / student / cfg.lab / f"{name}.ipynb"
            if res.timed_out:
                problems.append(f"{name}.ipynb: grading stopped at the {lim.notebook_timeout_s} s notebook limit")
            nb_ok = graded.is_file() and not graded.is_symlink() and db_ok
            if nb_ok:
                problems += [f"{name}.ipynb {line}" for line in _cell_problems(graded)]
            # the grader's own verdict: checks run here, the student's functions in a fresh sandbox
            judged, unjudged = _judge(cfg, root, name, pristine[name], env, uid) if cfg.recheck or not nb_ok \
                else ({}, set(layout[name]))
            if not nb_ok:  # nbgrader gave up (the kernel died): what passed before that counts
                passed = _recheck(cfg, root, name, pristine[name], env, uid) if unjudged else {}
                passed.update(judged)
                scores[name] = {g: (pts if passed.get(g, (False, ""))[0] else 0.0) for g, pts in layout[name].items()}
                problems.append(f"{name}.ipynb: {_why_failed(res.log)}; only the test cells that passed before "
                                f"that count ({sum(scores[name].values()):g} points)")
                continue
            passed = dict(judged)
            if cfg.recheck and any(scores[name][g] for g in unjudged):
                passed.update({g: v for g, v in _recheck(cfg, root, name, pristine[name], env, uid).items()
                               if g in unjudged})
            for gid, score in scores[name].items():  # the lower of nbgrader's score and the grader's verdict
                if gid not in passed and (gid in unjudged or not cfg.recheck):
                    continue
                ok, err = passed.get(gid, (False, "not reached"))
                if score > 0 and not ok:
                    scores[name][gid] = 0.0
                    where = "the grader's own check" if gid in judged else "a clean re-run"
                    problems.append(f"{name}.ipynb {gid}: passed inside the notebook but fails {where} "
                                    f"({err[:160]}); 0 points")
    result = {
        "student": student, "lab": cfg.lab, "submission_sha256": submission_hash(folder),
        "scores": scores, "score": round(sum(sum(c.values()) for c in scores.values()), 6),
        "max_score": sum(sum(c.values()) for c in layout.values()), "problems": problems,
        "seconds": round(time.perf_counter() - t0, 1), "grader_version": grader_version(cfg),
        "sandbox": not cfg.unsafe,
    }
    _publish(cfg, root, student, result)  # the sandbox is gone: nothing of the student runs any more
    return result


def grader_version(cfg: Config) -> str:
    """A digest of everything that decides a grade: the grading code, the checks, the course
    package and the released lab. A result is reused only under the same version."""
    code = _code_root(cfg)
    h = hashlib.sha256()
    files = [*sorted(Path(__file__).parent.glob("*.py")), *sorted((code / "autograder" / "checks").glob("*.py")),
             *sorted((code / "speclab").glob("*.py"))]
    for p in files:
        h.update(str(p.name).encode() + b"\0" + p.read_bytes())
    stamp = cfg.out / "template" / "source.sha256"
    h.update(stamp.read_bytes() if stamp.exists() else b"")
    return h.hexdigest()[:16]


def _lab_timeout(lab: str) -> int:
    """The per-cell limit the course configures for this lab (autograder/nbgrader_config.py)."""
    try:
        text = (REPO_ROOT / "autograder" / "nbgrader_config.py").read_text()
        m = re.search(r"LAB_TIMEOUT = (\{[^}]*\})", text)
        table = json.loads(m.group(1).replace("'", '"')) if m else {}
        return int(table.get(lab, max(table.values(), default=120)))
    except (OSError, ValueError, AttributeError):
        return 120


def _recheck(cfg: Config, root: Path, name: str, notebook: str, env: dict, uid: int) -> dict[str, tuple[bool, str]]:
    """Clean re-run of a notebook (autograder/replay.py) for the cells the grader cannot judge
    itself: grade id -> (passed, error). It runs in the student's sandbox, so its answer is
    only ever used to LOWER nbgrader's score."""
    out = root / "tmp" / f"recheck-{name}.jsonl"
    copy = root / "tmp" / f"recheck-{name}.ipynb"
    (root / "tmp").mkdir(exist_ok=True)
    copy.unlink(missing_ok=True)
    out.unlink(missing_ok=True)
    copy.write_text(notebook)
    sandbox.give_to(root / "tmp", uid, _caps(cfg))
    lim = cfg.limits
    _sandboxed(cfg, [sys.executable, "-I", str(Path(__file__).with_name("replay.py")), str(copy), str(out),
                     "--root", str(_code_root(cfg)),
                     "--cell-timeout", str(lim.cell_timeout_s or _lab_timeout(cfg.lab))],
               copy.parent, root, env, lim.notebook_timeout_s, uid, "recheck.log")
    passed: dict[str, tuple[bool, str]] = {}
    if out.is_file() and not out.is_symlink():
        for line in out.read_text(errors="replace").splitlines()[:1000]:
            try:
                rec = json.loads(line)
                passed.setdefault(str(rec["grade_id"]), (bool(rec["passed"]), str(rec.get("error") or "")))
            except (ValueError, KeyError, TypeError):
                continue
    return passed


_SPECS: dict[str, dict] = {}


def _cell_specs(cfg: Config) -> dict:
    """grade id -> verdict.CellCheck for this lab's graded cells (from the template gradebook)."""
    db = cfg.out / "template" / "gradebook.db"
    key = f"{db}:{db.stat().st_mtime_ns}"
    if key not in _SPECS:
        _SPECS[key] = verdict.cell_checks(verdict.graded_sources(db, cfg.lab))
    return _SPECS[key]


def _judge(cfg: Config, root: Path, name: str, notebook: str, env: dict, uid: int):
    """The grader's own verdict on one notebook (autograder/verdict.py): (grade id -> (passed,
    error) for the cells judged here, set of the notebook's graded cells it could not judge)."""
    lim = cfg.limits
    specs = _cell_specs(cfg)
    cells = set(_layout_cells(cfg, name))
    judged: dict[str, tuple[bool, str]] = {}
    unportable: set[str] = set()
    if not cells & set(specs):
        return judged, cells
    work = root / "verdict"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    copy = work / f"{name}.ipynb"
    copy.write_text(notebook)
    sandbox.give_to(work, uid, _caps(cfg))
    timeout = lim.cell_timeout_s or _lab_timeout(cfg.lab)
    logs = cfg.out / "work" / ".logs"
    logs.mkdir(parents=True, exist_ok=True)
    session = sandbox.Session([sys.executable, "-I", str(Path(__file__).with_name("verdict.py")), "serve", str(copy),
                               "--cell-timeout", str(timeout)], work, root,
                              {**env, "SPECLAB_CODE_ROOT": str(_code_root(cfg))}, lim, uid,
                              logs / f"{root.name}.verdict.log", course_mounts(cfg), unsafe=cfg.unsafe)
    harness = verdict.Harness(session, {}, deadline=time.monotonic() + lim.notebook_timeout_s)
    gone = "the notebook ended before it"
    try:
        while (gid := harness.wait_at(lim.notebook_timeout_s)) is not None:
            if gid in specs and gid in cells and gid not in judged:
                try:
                    judged[gid] = verdict.run_check(harness, specs[gid], timeout)
                except verdict.Unportable:
                    unportable.add(gid)
            harness.next()
    except verdict.HarnessGone as err:
        gone = f"the notebook's process stopped answering: {err}"
    finally:
        session.close()
    for gid in (cells & set(specs)) - set(judged) - unportable:
        judged[gid] = (False, f"not reached ({gone})")
    return judged, (cells - set(specs)) | unportable


def _layout_cells(cfg: Config, name: str) -> list[str]:
    return list(gradebook_layout(cfg.out / "template" / "gradebook.db", cfg.lab).get(name, {}))


def _caps(cfg: Config) -> sandbox.Capabilities:
    return sandbox.Capabilities(None, os.geteuid() == 0) if cfg.unsafe else sandbox.capabilities()


def _sandboxed(cfg: Config, cmd: list[str], cwd: Path, scratch: Path, env: dict, timeout_s: float, uid: int,
               log_name: str) -> sandbox.Result:
    """One command of a student's grading in its sandbox (scratch = the student's course folder).
    The log is written outside the scratch folder, where the student cannot rewrite it."""
    logs = cfg.out / "work" / ".logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{scratch.name}.{log_name}"
    res = sandbox.run(cmd, cwd, scratch, env, timeout_s, cfg.limits, uid=uid, log_path=log,
                      ro=course_mounts(cfg), unsafe=cfg.unsafe)
    shutil.copyfile(log, scratch / log_name)  # where _publish collects it
    return res


def _publish(cfg: Config, root: Path, student: str, result: dict) -> None:
    """Feedback, autograded notebooks and logs out of the scratch course; then the result file."""
    for kind in ("autograded",):
        src = root / kind / student / cfg.lab
        dest = cfg.out / kind / student / cfg.lab
        shutil.rmtree(dest, ignore_errors=True)
        if src.is_dir():
            dest.mkdir(parents=True)
            for f in src.iterdir():
                if f.is_file() and not f.is_symlink() and f.suffix in (".html", ".ipynb"):
                    shutil.copyfile(f, dest / f.name)
    logs = cfg.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{student}.log", "w") as f:
        for log in ("autograde.log", "recheck.log"):
            if (root / log).exists():
                f.write(f"===== {log}\n" + (root / log).read_text(errors="replace")[-20000:] + "\n")
    results = cfg.out / "results"
    results.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=results, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    os.replace(tmp, results / f"{student}.json")  # atomic: a result exists whole or not at all
    shutil.rmtree(root, ignore_errors=True)


def _add_notes(html: Path, problems: list[str]) -> None:
    import html as htmllib

    if not problems:
        return
    notes = "".join(f"<li>{htmllib.escape(p)}</li>" for p in problems)
    block = f'<div id="grader-notes"><h2>Notes from the grader</h2><ul>{notes}</ul></div>'
    text = html.read_text(errors="replace")
    text = text.replace("<body>", "<body>" + block, 1) if "<body>" in text else block + text
    html.write_text(text)


# ----------------------------------------------------------------------------- the class
def load_result(cfg: Config, student: str) -> dict | None:
    path = cfg.out / "results" / f"{student}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def grade_class(cfg: Config, progress: bool = True) -> list[dict]:
    cfg.out = Path(cfg.out).resolve()
    cfg.out.mkdir(parents=True, exist_ok=True)
    students = collect(Path(cfg.submissions), cfg.lab, cfg.out)
    if cfg.only:
        unknown = set(cfg.only) - set(students)
        if unknown:
            raise SystemExit(f"no submission for {sorted(unknown)}")
    if not cfg.unsafe:
        try:
            sandbox.require()
        except sandbox.SandboxUnavailable as err:
            raise SystemExit(str(err)) from None
    layout = build_template(cfg)
    version = grader_version(cfg)
    todo = []
    for s, folder in students.items():
        old = load_result(cfg, s)
        if cfg.only and s not in cfg.only:
            continue
        if old and not cfg.force and old.get("submission_sha256") == submission_hash(folder) \
                and old.get("grader_version") == version and old.get("sandbox", False) >= (not cfg.unsafe):
            continue  # same submission, same grading code (and graded at least as safely): keep
        todo.append(s)
    slots = list(range(max(1, cfg.workers)))
    import threading

    lock = threading.Lock()

    def job(s: str) -> dict:
        with lock:
            slot = slots.pop()
        try:
            return grade_student(cfg, layout, s, students[s], slot)
        except Exception as err:  # noqa: BLE001 - one student's failure must not stop the class
            result = {"student": s, "lab": cfg.lab, "submission_sha256": "", "seconds": 0.0,
                      "scores": {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}, "score": 0.0,
                      "max_score": sum(sum(c.values()) for c in layout.values()),
                      "problems": [f"grading failed ({type(err).__name__}: {err}); grade this student again"]}
            _publish(cfg, cfg.out / "work" / s, s, result)
            return result
        finally:
            with lock:
                slots.append(slot)

    with ThreadPoolExecutor(max_workers=max(1, cfg.workers)) as pool:
        futures = [pool.submit(job, s) for s in todo]
        for fut in tqdm(as_completed(futures), total=len(futures), desc=f"grading {cfg.lab}", unit="student",
                        disable=not progress):
            fut.result()
    results = [r for s in students if (r := load_result(cfg, s)) is not None]
    merge(cfg, layout, results)
    return results


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
    _course_config(cfg.out, cfg.course_root, None)
    shutil.rmtree(cfg.out / "feedback", ignore_errors=True)
    if (cfg.out / "solutions").is_symlink():
        (cfg.out / "solutions").unlink()
    (cfg.out / "solutions").symlink_to(cfg.out / "template" / "solutions", target_is_directory=True)
    proc = subprocess.run([str(BIN / "nbgrader"), "generate_feedback", cfg.lab, "--force"], cwd=cfg.out,
                          env=_env(cfg.out), capture_output=True, text=True, timeout=3600)
    (cfg.out / "logs").mkdir(exist_ok=True)
    (cfg.out / "logs" / "generate_feedback.log").write_text(proc.stdout[-50000:] + proc.stderr[-50000:])
    for r in results:
        for html in (cfg.out / "feedback" / r["student"] / cfg.lab).glob("*.html"):
            _add_notes(html, r["problems"])


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
    if cfg.unsafe:
        lines.append("warning: graded WITHOUT the sandbox (--unsafe): students' code ran with the grader's "
                     "rights, could read the solutions and could forge its result")
    lines.append(f"grades: {cfg.out / 'grades.csv'}; feedback: {cfg.out / 'feedback'}/<student>/{cfg.lab}/")
    return "\n".join(lines)


def as_dict(cfg: Config) -> dict:
    d = asdict(cfg)
    return {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}


# ----------------------------------------------------------------------------- normalise
def _gid(cell: dict) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    return meta.get("grade_id") if isinstance(meta, dict) else None


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
        g = _gid(cell)
        if g in rel_by_gid:
            seen[g] = seen.get(g, 0) + 1
            rel = rel_by_gid[g]
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
    if not seen:
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
