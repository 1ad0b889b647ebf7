"""Stage 3, grade: the template course, then one student graded in a scratch course of its own.

`build_template` releases the lab once (`nbgrader generate_assignment`) and reads its
gradebook's layout; `grade_student` checks and normalises the student's notebooks,
runs `nbgrader autograde` in the sandbox, re-checks in a clean interpreter
(autograder/replay.py), keeps the lower score per cell, and `publish`es the result file.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import sandbox, verdict
from .checks import DEFER_ENV, defer_value, timing
from .collect import check_notebooks, submission_hash
from .course import lab_timeout
from .nbgrader_cmd import nbgrader_command
from .normalise import normalise
from .settings import BIN, REPO_ROOT, Config, course_config, nbgrader_env


def _code_root(cfg: Config) -> Path:
    """Where the `speclab` package and `autograder.checks` come from for this course."""
    return cfg.course_root if (cfg.course_root / "autograder").is_dir() else REPO_ROOT


def student_env(cfg: Config, root: Path) -> dict:
    """A cleared environment for the sandbox: nothing of the grader's own reaches the student."""
    return sandbox.minimal_env(root / "home", PATH=f"{BIN}:/usr/local/bin:/usr/bin:/bin",
                               PYTHONPATH=str(_code_root(cfg)), IPYTHONDIR=str(root / "ipython"),
                               MPLCONFIGDIR=str(root / "home"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
                               JUPYTER_DATA_DIR=str(root / "home" / "jupyter"))


def course_mounts(cfg: Config) -> list[Path]:
    """What of the course a student's sandbox sees, read-only: the nbgrader configuration, the
    `speclab` package and the checks (plus the re-check runner). Not solutions/, not the
    rest of autograder/ (the reference loader, the mutants), not the grading output."""
    code = _code_root(cfg)
    here = Path(__file__).resolve().parent
    paths = [cfg.course_root / "nbgrader_config.py", cfg.course_root / "autograder" / "nbgrader_config.py",
             code / "speclab", code / "autograder" / "__init__.py", code / "autograder" / "course.py",
             code / "autograder" / "checks",
             here / "replay.py", here / "verdict.py"]
    return [p for p in paths if p.exists()]

# `nbgrader ...` without its slowest import (autograder/nbgrader_cmd.py says which and why)
NBGRADER = nbgrader_command()


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
        root.mkdir(parents=True)
        (root / "solutions").symlink_to(cfg.course_root / "solutions", target_is_directory=True)
        course_config(root, cfg.course_root, None)
        from tqdm import tqdm

        with tqdm(total=1, desc=f"releasing {cfg.lab} (nbgrader generate_assignment)", unit="lab",
                  disable=not progress) as bar:
            proc = subprocess.run([*NBGRADER, "generate_assignment", cfg.lab, "--force"], cwd=root,
                                  env=nbgrader_env(root), capture_output=True, text=True, timeout=600)
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
    course_config(root, cfg.course_root, lim)
    shutil.copy2(cfg.out / "template" / "gradebook.db", root / "gradebook.db")
    usable, problems = check_notebooks(folder, list(layout), lim.file_mb << 20)
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
    env = student_env(cfg, root)
    env[timing.LOCK_ENV] = str(_timing_lock_file(cfg))  # one student timed at a time, across workers
    deferred = _deferred_checks(cfg) if cfg.recheck else {}
    if usable:
        named: dict[str, list[str]] = {}
        for spec in deferred.values():
            named.setdefault(spec.module, []).extend(check for check, _ in spec.calls)
        nb_env = dict(env, **{DEFER_ENV: defer_value(named)})
        # nbgrader and the grader's own verdict run side by side: they share nothing (the verdict
        # has a scratch folder outside nbgrader's and a uid of its own), and nothing nbgrader
        # wrote is read before both are over
        with ThreadPoolExecutor(max_workers=1) as beside:
            autograde = beside.submit(
                _sandboxed, cfg, [*NBGRADER, "autograde", cfg.lab, f"--student={student}", "--force"],
                root, root, nb_env, lim.notebook_timeout_s * len(usable) + 60, uid, "autograde.log")
            verdicts = {name: _judge(cfg, root, name, pristine[name], slot) for name in usable} if cfg.recheck else {}
            res = autograde.result()
        try:  # nbgrader's verdict, read once its sandbox is gone; the student may have altered it (see below)
            if not (root / "gradebook.db").is_file() or not _no_links(root, root / "gradebook.db"):
                raise OSError("the scratch gradebook was replaced")
            scores = _nbgrader_scores(root / "gradebook.db", cfg.lab, student, layout)
            db_ok = True
        except Exception:  # noqa: BLE001 - the notebook may have overwritten its scratch gradebook
            db_ok = False
        for name in usable:
            graded = root / "autograded" / student / cfg.lab / f"{name}.ipynb"
            if res.timed_out:
                problems.append(f"{name}.ipynb: grading stopped at the {lim.notebook_timeout_s} s notebook limit")
            nb_ok = graded.is_file() and _no_links(root, graded) and db_ok
            if nb_ok:
                problems += [f"{name}.ipynb {line}" for line in _cell_problems(graded)]
            # the grader's own verdict: checks run here, the student's functions in a fresh sandbox
            if name in verdicts:
                judged, unjudged = verdicts[name]
            elif not nb_ok:
                judged, unjudged = _judge(cfg, root, name, pristine[name], slot)
            else:
                judged, unjudged = {}, set(layout[name])
            if not nb_ok:  # nbgrader gave up (the kernel died): what passed before that counts
                scratch_path(root, "autograded", student, cfg.lab).mkdir(parents=True, exist_ok=True)
                scratch_path(root, "autograded", student, cfg.lab, f"{name}.ipynb").write_text(pristine[name])
                passed = _recheck(cfg, root, name, pristine[name], env, uid, unjudged) if unjudged else {}
                passed.update(judged)
                scores[name] = {g: (pts if passed.get(g, (False, ""))[0] else 0.0) for g, pts in layout[name].items()}
                problems.append(f"{name}.ipynb: {_why_failed(res.log)}; only the test cells that passed before "
                                f"that count ({sum(scores[name].values()):g} points)")
                continue
            passed = dict(judged)
            if cfg.recheck and any(scores[name][g] for g in unjudged):
                passed.update({g: v for g, v in _recheck(cfg, root, name, pristine[name], env, uid,
                                                         {g for g in unjudged if scores[name][g]}).items()
                               if g in unjudged})
            for gid, score in scores[name].items():  # the lower of nbgrader's score and the grader's verdict
                if gid not in passed and (gid in unjudged or not cfg.recheck):
                    continue
                ok, err = passed.get(gid, (False, "not reached"))
                if score > 0 and not ok:
                    scores[name][gid] = 0.0
                    if gid in judged and gid in deferred:  # nbgrader left this check to the grader
                        problems.append(f"{name}.ipynb {gid}: {err[:600]}; 0 points")
                    elif gid in judged:
                        problems.append(f"{name}.ipynb {gid}: passed inside the notebook but fails the grader's "
                                        f"own check ({err[:160]}); 0 points")
                    elif gid in deferred:  # deferred, then not judgeable after all: the clean re-run decided
                        problems.append(f"{name}.ipynb {gid}: {err[:600]} (checked in a clean re-run); 0 points")
                    else:
                        problems.append(recheck_problem(name, gid, err))
    result = {
        "student": student, "lab": cfg.lab, "submission_sha256": submission_hash(folder),
        "scores": scores, "score": round(sum(sum(c.values()) for c in scores.values()), 6),
        "max_score": sum(sum(c.values()) for c in layout.values()), "problems": problems,
        "seconds": round(time.perf_counter() - t0, 1), "grader_version": grader_version(cfg),
        "sandbox": not cfg.unsafe,
    }
    publish(cfg, root, student, result)  # the sandbox is gone: nothing of the student runs any more
    return result


def recheck_problem(name: str, gid: str, err: str) -> str:
    """The note for a cell that scored in nbgrader's run and failed the clean re-run. A timed check
    that failed on a clear timing verdict is a measurement of the machine, never a tampering sign."""
    if err.startswith(timing.TimingFailure.__name__):
        return (f"{name}.ipynb {gid}: the timing of the clean re-run gave a clear verdict against it "
                f"({err[:300]}); 0 points for this timed cell")
    return (f"{name}.ipynb {gid}: passed inside the notebook but fails in a clean re-run ({err[:160]}); "
            f"0 points (did the notebook tamper with grading?)")


def _timing_lock_file(cfg: Config) -> Path:
    """The lock file every worker's timed checks share (autograder.checks.timing), writable by
    the sandbox users of all worker slots."""
    path = cfg.out / "timing.lock"
    path.touch(exist_ok=True)
    try:
        os.chmod(path, 0o666)
    except OSError:
        pass
    return path


def _recheck(cfg: Config, root: Path, name: str, notebook: str, env: dict, uid: int,
             only: set[str]) -> dict[str, tuple[bool, str]]:
    """Clean re-run of a notebook (autograder/replay.py) for the cells the grader cannot judge
    itself (`only`; the other test cells are skipped and the run stops after the last of these):
    grade id -> (passed, error). It runs in the student's sandbox, so its answer is only ever
    used to LOWER nbgrader's score."""
    scratch_path(root, "tmp").mkdir(exist_ok=True)
    out = scratch_path(root, "tmp", f"recheck-{name}.jsonl")
    copy = scratch_path(root, "tmp", f"recheck-{name}.ipynb")
    copy.unlink(missing_ok=True)
    out.unlink(missing_ok=True)
    copy.write_text(notebook)
    sandbox.give_to(root / "tmp", uid, _caps(cfg))
    lim = cfg.limits
    _sandboxed(cfg, [sys.executable, "-I", str(Path(__file__).with_name("replay.py")), str(copy), str(out),
                     "--root", str(_code_root(cfg)),
                     "--cell-timeout", str(lim.cell_timeout_s or lab_timeout(cfg.lab)),
                     "--only", ",".join(sorted(only))],
               copy.parent, root, env, lim.notebook_timeout_s, uid, "recheck.log")
    passed: dict[str, tuple[bool, str]] = {}
    if out.is_file() and _no_links(root, out):
        for line in out.read_text(errors="replace").splitlines()[:1000]:
            try:
                rec = json.loads(line)
                passed.setdefault(str(rec["grade_id"]), (bool(rec["passed"]), str(rec.get("error") or "")))
            except (ValueError, KeyError, TypeError):
                continue
    return passed


_SPECS: dict[str, dict] = {}


def _deferred_checks(cfg: Config) -> dict:
    """grade id -> verdict.CellCheck of the cells whose checks the pipeline's nbgrader run leaves to
    the grader's own verdict (autograder.checks.defer_to_grader): the cells the verdict judges whose
    every check can run in the grader (none declares in_grader = False)."""
    import importlib

    out = {}
    for gid, spec in _cell_specs(cfg).items():
        try:
            module = importlib.import_module(spec.module)
        except Exception:  # noqa: BLE001 - a course without that module: nothing deferred
            continue
        if all(getattr(getattr(module, check, None), "in_grader", True) for check, _ in spec.calls):
            out[gid] = spec
    return out


def _cell_specs(cfg: Config) -> dict:
    """grade id -> verdict.CellCheck for this lab's graded cells (from the template gradebook)."""
    db = cfg.out / "template" / "gradebook.db"
    key = f"{db}:{db.stat().st_mtime_ns}"
    if key not in _SPECS:
        _SPECS[key] = verdict.cell_checks(verdict.graded_sources(db, cfg.lab))
    return _SPECS[key]


VERDICT_SLOTS = 32  # uids student_uid(slot) for nbgrader and the re-check, student_uid(32 + slot) for the verdict


def verdict_uid(slot: int) -> int:
    """The uid of a worker slot's verdict harness: not nbgrader's, so that the two sandboxes, run
    side by side, neither share a process count nor end each other (closing a sandbox ends every
    process of its uid)."""
    if not 0 <= slot < VERDICT_SLOTS:
        raise ValueError(f"worker slot {slot} out of range: at most {VERDICT_SLOTS} workers")
    return sandbox.student_uid(VERDICT_SLOTS + slot)


def verdict_root(cfg: Config, student: str) -> Path:
    """The verdict harness's scratch folder: beside the student's course folder, not in it, so
    the notebook nbgrader runs at the same time can neither read nor replace it."""
    return cfg.out / "work" / ".verdict" / student


def _judge(cfg: Config, root: Path, name: str, notebook: str, slot: int):
    """The grader's own verdict on one notebook (autograder/verdict.py): (grade id -> (passed,
    error) for the cells judged here, set of the notebook's graded cells it could not judge)."""
    lim = cfg.limits
    specs = _cell_specs(cfg)
    cells = set(_layout_cells(cfg, name))
    judged: dict[str, tuple[bool, str]] = {}
    unportable: set[str] = set()
    if not cells & set(specs):
        return judged, cells
    scratch = verdict_root(cfg, root.name)
    shutil.rmtree(scratch, ignore_errors=True)
    for sub in ("home", "runtime", "ipython"):
        (scratch / sub).mkdir(parents=True)
    work = scratch / "verdict"
    work.mkdir()
    copy = work / f"{name}.ipynb"
    copy.write_text(notebook)
    uid = verdict_uid(slot)
    sandbox.give_to(scratch, uid, _caps(cfg))
    env = student_env(cfg, scratch)
    env[timing.LOCK_ENV] = str(_timing_lock_file(cfg))
    timeout = lim.cell_timeout_s or lab_timeout(cfg.lab)
    logs = cfg.out / "work" / ".logs"
    logs.mkdir(parents=True, exist_ok=True)
    session = sandbox.Session([sys.executable, "-I", str(Path(__file__).with_name("verdict.py")), "serve", str(copy),
                               "--cell-timeout", str(timeout)], work, scratch,
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
        shutil.rmtree(scratch, ignore_errors=True)
    for gid in (cells & set(specs)) - set(judged) - unportable:
        judged[gid] = (False, f"not reached ({gone})")
    return judged, (cells - set(specs)) | unportable


def _layout_cells(cfg: Config, name: str) -> list[str]:
    return list(gradebook_layout(cfg.out / "template" / "gradebook.db", cfg.lab).get(name, {}))


def scratch_path(root: Path, *parts: str) -> Path:
    """root/parts, safe for the grader to create or write once the student's sandbox is gone:
    any component the student turned into a symbolic link (to the course, another student's
    results, a system file) is removed, so the grader never writes or reads through it."""
    p = root
    for part in parts:
        p = p / part
        if p.is_symlink():
            p.unlink()
    return p


def _no_links(root: Path, path: Path) -> bool:
    """path lies under root with no symbolic link on the way (what the grader may read from scratch)."""
    p = path
    while p != root:
        if p.is_symlink() or p == p.parent:
            return False
        p = p.parent
    return True


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
                      ro=course_mounts(cfg), unsafe=cfg.unsafe, shared=[_timing_lock_file(cfg)])
    return res


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


def publish(cfg: Config, root: Path, student: str, result: dict) -> None:
    """Feedback, autograded notebooks and logs out of the scratch course; then the result file."""
    for kind in ("autograded",):
        src = root / kind / student / cfg.lab
        dest = cfg.out / kind / student / cfg.lab
        shutil.rmtree(dest, ignore_errors=True)
        if src.is_dir() and _no_links(root, src):
            dest.mkdir(parents=True)
            for f in src.iterdir():
                if f.is_file() and not f.is_symlink() and f.suffix in (".html", ".ipynb"):
                    shutil.copyfile(f, dest / f.name)
    logs = cfg.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{student}.log", "w") as f:
        for log in ("autograde.log", "verdict.log", "recheck.log"):  # written outside the student's reach
            path = cfg.out / "work" / ".logs" / f"{student}.{log}"
            if path.is_file():
                f.write(f"===== {log}\n" + path.read_text(errors="replace")[-20000:] + "\n")
    results = cfg.out / "results"
    results.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=results, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    os.replace(tmp, results / f"{student}.json")  # atomic: a result exists whole or not at all
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(verdict_root(cfg, student), ignore_errors=True)


def load_result(cfg: Config, student: str) -> dict | None:
    path = cfg.out / "results" / f"{student}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
