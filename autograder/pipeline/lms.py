"""Learning platforms in and out: submissions downloaded from Canvas or Moodle, grades back to them.

In (`recognise`, `moodle_folder`, called by collect.py):
- **Canvas** ("Download submissions") gives one flat file per submission,
  `<name>[_late]_<user id>_<submission id>_<file as uploaded>`, where a re-submission of `lab1.ipynb`
  comes as `lab1-1.ipynb`, `lab1-2.ipynb`, ...: the student is `<name>_<user id>`, the notebook keeps
  its released name, the latest re-submission wins, and the late flag is kept.
- **Moodle** ("Download all submissions") gives one folder per submission,
  `<Full Name>_<participant id>_assignsubmission_file_`: the student is the name in lower case,
  letters and digits only, then `_<participant id>`.

What collect learned is written to OUT/lms.json (student -> platform, id, name, late, files).

Out (`write_exports`, called by report.merge): `grades_canvas.csv` in Canvas's gradebook import format
(Student, ID, SIS User ID, SIS Login ID, Section, then one column named after the lab, and a
"Points Possible" row), `grades_moodle.csv` in Moodle's grading-worksheet format (Identifier
"Participant <id>", Full name, Grade, Maximum Grade), and `lms.csv` (student, platform, id, name,
late, files): the record of where each notebook came from, late flags included, which neither
import format carries.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .collect import refused_entries
from .untrusted import csv_writer

CANVAS_RE = re.compile(r"^(?P<name>[a-z][a-z0-9]*)_(?P<late>late_)?(?P<user>\d+)_(?P<sub>\d+)_(?P<file>.+)$",
                       re.IGNORECASE)
RESUBMISSION_RE = re.compile(r"^(?P<stem>.+?)-(?P<n>\d+)(?P<ext>\.[A-Za-z0-9]+)$")
MOODLE_RE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_(?:file|onlinetext)_?$")
RECORDS = "lms.json"


@dataclass
class Record:
    """Where one student's submission came from."""

    platform: str  # "canvas" or "moodle"
    lms_id: str  # Canvas user id, Moodle participant id
    name: str  # as the platform wrote it
    late: bool = False
    files: list[str] = field(default_factory=list)  # names as downloaded


@dataclass(frozen=True)
class CanvasFile:
    student: str
    user_id: str
    name: str
    late: bool
    submitted_as: str  # the file name as the student uploaded it, re-submission suffix removed
    attempt: int  # 0 for the first upload, N for "-N"


def recognise(filename: str, expected: set[str]) -> CanvasFile | None:
    """A Canvas download's file, or None. `expected` are the lab's notebook names (lab1.ipynb): a
    re-submission suffix is removed only when what remains is one of them."""
    m = CANVAS_RE.match(filename)
    if not m:
        return None
    submitted, attempt = m["file"], 0
    r = RESUBMISSION_RE.match(submitted)
    if r and f"{r['stem']}{r['ext']}" in expected and submitted not in expected:
        submitted, attempt = f"{r['stem']}{r['ext']}", int(r["n"])
    return CanvasFile(f"{m['name'].lower()}_{m['user']}", m["user"], m["name"], bool(m["late"]), submitted, attempt)


def moodle_folder(dirname: str) -> tuple[str, Record] | None:
    """(student, record) of a Moodle submission folder, or None."""
    m = MOODLE_RE.match(dirname)
    if not m:
        return None
    slug = re.sub(r"[^a-z0-9]+", "", m["name"].lower()) or "student"
    return f"{slug[:40]}_{m['id']}", Record("moodle", m["id"], m["name"], files=[dirname])


def save(out: Path, records: dict[str, Record]) -> None:
    (out / RECORDS).write_text(json.dumps({s: asdict(r) for s, r in sorted(records.items())}, indent=1) + "\n")


def load(out: Path) -> dict[str, Record]:
    path = out / RECORDS
    if not path.exists():
        return {}
    return {s: Record(**r) for s, r in json.loads(path.read_text()).items()}


def write_exports(out: Path, lab: str, results: list[dict]) -> list[Path]:
    """The import files of every platform the class came from (none when it came from none)."""
    records = load(out)
    if not records:
        for name in ("grades_canvas.csv", "grades_moodle.csv", "lms.csv"):
            (out / name).unlink(missing_ok=True)
        return []
    by_student = {r["student"]: r for r in results}
    written = []
    max_score = max((r["max_score"] for r in results), default=0)
    canvas = {s: rec for s, rec in records.items() if rec.platform == "canvas"}
    if canvas:
        path = out / "grades_canvas.csv"
        with open(path, "w", newline="") as f:
            w = csv_writer(f)
            w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", lab])
            w.writerow(["Points Possible", "", "", "", "", f"{max_score:g}"])
            for s, rec in sorted(canvas.items()):
                score = by_student.get(s, {}).get("score")
                w.writerow([rec.name, rec.lms_id, "", "", "", "" if score is None else f"{score:g}"])
        written.append(path)
    moodle = {s: rec for s, rec in records.items() if rec.platform == "moodle"}
    if moodle:
        path = out / "grades_moodle.csv"
        with open(path, "w", newline="") as f:
            w = csv_writer(f)
            w.writerow(["Identifier", "Full name", "Grade", "Maximum Grade"])
            for s, rec in sorted(moodle.items()):
                score = by_student.get(s, {}).get("score")
                w.writerow([f"Participant {rec.lms_id}", rec.name, "" if score is None else f"{score:g}",
                            f"{max_score:g}"])
        written.append(path)
    path = out / "lms.csv"
    with open(path, "w", newline="") as f:
        w = csv_writer(f)
        w.writerow(["student", "platform", "id", "name", "late", "files", "not graded"])
        dropped = refused_entries(out)
        for s, rec in sorted(records.items()):
            w.writerow([s, rec.platform, rec.lms_id, rec.name, "late" if rec.late else "", " ".join(rec.files),
                        "; ".join(dropped.get(s, []))])
    written.append(path)
    return written
