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
from pathlib import Path

from . import sandbox
from .collect import check_notebooks, submission_hash
from .course import lab_timeout
from .normalise import normalise
from .settings import BIN, REPO_ROOT, UID_BASE, Config, course_config, nbgrader_env

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
        course_config(root, cfg.course_root, None)
        proc = subprocess.run([str(BIN / "nbgrader"), "generate_assignment", cfg.lab, "--force"], cwd=root,
                              env=nbgrader_env(root), capture_output=True, text=True, timeout=600)
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
    uid = UID_BASE + slot
    sandbox.give_to(root, uid)
    scores = {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}
    env = nbgrader_env(root)
    if usable:
        res = sandbox.run([str(BIN / "nbgrader"), "autograde", cfg.lab, f"--student={student}", "--force"],
                          root, env, lim.notebook_timeout_s * len(usable) + 60, lim, uid,
                          log_path=root / "autograde.log")
        try:
            scores = _nbgrader_scores(root / "gradebook.db", cfg.lab, student, layout)
            db_ok = True
        except Exception:  # noqa: BLE001 - the notebook may have overwritten its scratch gradebook
            db_ok = False
        for name in usable:
            graded = root / "autograded" / student / cfg.lab / f"{name}.ipynb"
            if res.timed_out:
                problems.append(f"{name}.ipynb: grading stopped at the {lim.notebook_timeout_s} s notebook limit")
            if not graded.exists() or not db_ok:  # nbgrader gave up (the kernel died): score what ran, in a clean re-run
                shutil.rmtree(graded.parent, ignore_errors=True)
                graded.parent.mkdir(parents=True, exist_ok=True)
                graded.write_text(pristine[name])
                (root / "tmp").mkdir(exist_ok=True)
                passed = _recheck(cfg, root, graded, env, uid, name)
                scores[name] = {g: (pts if passed.get(g, (False, ""))[0] else 0.0) for g, pts in layout[name].items()}
                problems.append(f"{name}.ipynb: {_why_failed(res.log)}; only the test cells that passed before "
                                f"that count ({sum(scores[name].values()):g} points)")
                continue
            problems += [f"{name}.ipynb {line}" for line in _cell_problems(graded)]
            if cfg.recheck and any(scores[name].values()):
                passed = _recheck(cfg, root, graded, env, uid, name)
                for gid, score in scores[name].items():
                    ok, err = passed.get(gid, (False, "not reached in the clean re-run"))
                    if score > 0 and not ok:
                        scores[name][gid] = 0.0
                        problems.append(f"{name}.ipynb {gid}: passed inside the notebook but fails in a clean "
                                        f"re-run ({err[:160]}); 0 points (did the notebook tamper with grading?)")
    result = {
        "student": student, "lab": cfg.lab, "submission_sha256": submission_hash(folder),
        "scores": scores, "score": round(sum(sum(c.values()) for c in scores.values()), 6),
        "max_score": sum(sum(c.values()) for c in layout.values()), "problems": problems,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    publish(cfg, root, student, result)
    return result


def _recheck(cfg: Config, root: Path, graded: Path, env: dict, uid: int, name: str) -> dict[str, tuple[bool, str]]:
    """Clean re-run of a notebook (autograder/replay.py): grade id -> (passed, error)."""
    out = root / "tmp" / f"recheck-{name}.jsonl"
    copy = root / "tmp" / f"recheck-{name}.ipynb"
    shutil.copyfile(graded, copy)
    sandbox.give_to(root / "tmp", uid)
    lim = cfg.limits
    sandbox.run([sys.executable, "-I", str(Path(__file__).with_name("replay.py")), str(copy), str(out),
                 "--root", str(cfg.course_root if (cfg.course_root / "autograder").is_dir() else REPO_ROOT),
                 "--cell-timeout", str(lim.cell_timeout_s or lab_timeout(cfg.lab))],
                graded.parent, env, lim.notebook_timeout_s, lim, uid, log_path=root / "recheck.log")
    passed: dict[str, tuple[bool, str]] = {}
    if out.exists():
        for line in out.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
                passed.setdefault(rec["grade_id"], (bool(rec["passed"]), str(rec.get("error") or "")))
            except (ValueError, KeyError, TypeError):
                continue
    return passed


def publish(cfg: Config, root: Path, student: str, result: dict) -> None:
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


def add_notes(html: Path, problems: list[str]) -> None:
    import html as htmllib

    if not problems:
        return
    notes = "".join(f"<li>{htmllib.escape(p)}</li>" for p in problems)
    block = f'<div id="grader-notes"><h2>Notes from the grader</h2><ul>{notes}</ul></div>'
    text = html.read_text(errors="replace")
    text = text.replace("<body>", "<body>" + block, 1) if "<body>" in text else block + text
    html.write_text(text)


def load_result(cfg: Config, student: str) -> dict | None:
    path = cfg.out / "results" / f"{student}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
