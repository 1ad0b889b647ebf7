"""Stage 1, collect: a folder or zip of submissions -> one folder of files per student.

`collect` accepts nbgrader's tree, one folder per student, or flat LMS files;
`submission_hash` identifies what a student handed in (the resume key);
`check_notebooks` says which of the lab's notebooks a student's folder holds usably.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lms import Record

NAME_BYTES = 200  # a student's name is a folder name (and part of longer ones): at most this many UTF-8 bytes


def name_problem(name: str) -> str:
    """Why `name` cannot be a student's folder name here ('' when it can): any Unicode name an LMS allows is
    one, spaces and accents included, unless it holds a slash, a NUL or another control character, is `.` or
    `..`, starts with `-` or `.` (an option, a hidden file), or is longer than NAME_BYTES bytes."""
    import unicodedata

    if not name or name in (".", ".."):
        return "an empty name, or . or .."
    if "/" in name or "\0" in name:
        return "a slash or NUL in it"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        return "a control character in it"
    if name[0] in "-.":
        return "it starts with - or ."
    if len(name.encode("utf-8")) > NAME_BYTES:
        return f"longer than {NAME_BYTES} bytes"
    return ""


UNPACK_MAX_BYTES = 4 << 30  # a class's zip unpacks to at most 4 GiB (its entries' declared sizes, then counted)
UNPACK_MAX_ENTRIES = 100_000  # and at most this many entries
NOTES = "collect_notes.json"  # what collecting refused, per entry, for the summary and lms.csv


class ZipTooLarge(SystemExit):
    """A zip that would unpack past the bounds: refused before anything is written (or, when an entry's
    header lies about its size, as soon as it writes more than it declared)."""


def _unpack(submissions: Path, out: Path, max_bytes: int = UNPACK_MAX_BYTES,
            max_entries: int = UNPACK_MAX_ENTRIES) -> tuple[Path, list[dict]]:
    """A zip is extracted under OUT/unpacked, within max_bytes and max_entries; a folder is used as is.
    (where the submissions now are, the entries refused: {"entry", "student", "why"} each)."""
    if submissions.is_dir():
        return submissions, []
    if not zipfile.is_zipfile(submissions):
        raise SystemExit(f"{submissions}: neither a folder nor a zip file")
    dest = out / "unpacked"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    refused = []
    with zipfile.ZipFile(submissions) as zf:
        infos = zf.infolist()
        declared = sum(i.file_size for i in infos)
        if len(infos) > max_entries or declared > max_bytes:
            raise ZipTooLarge(f"{submissions}: refused, nothing unpacked: {len(infos)} entries that would unpack to "
                              f"{declared / 2**20:.0f} MB, over the bounds of {max_entries} entries and "
                              f"{max_bytes / 2**20:.0f} MB. Unpack it yourself if it is genuine, and grade the folder")
        root = dest.resolve()
        for info in infos:
            target = (dest / info.filename).resolve()
            if not target.is_relative_to(root) or target == root:
                refused.append({"entry": info.filename, "student": _student_of_entry(info.filename),
                                "why": "its path leaves the submissions' folder (absolute, or with ..)"})
                continue
            if info.is_dir():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                left = info.file_size
                while chunk := src.read(min(1 << 20, left + 1)):
                    left -= len(chunk)
                    if left < 0:  # more bytes than the header declared
                        raise ZipTooLarge(f"{submissions}: refused: entry {info.filename!r} unpacks to more than "
                                          f"the {info.file_size} bytes it declares")
                    dst.write(chunk)
    return dest, refused


def _student_of_entry(name: str) -> str:
    """Whose an archive entry is, as its path says: its first folder, else its file's name before `__`."""
    parts = [p for p in re.split(r"[/\\]", name) if p not in ("", ".", "..")]
    if len(parts) > 1:
        return parts[0]
    return parts[0].split("__", 1)[0] if parts else ""


def collect(submissions: Path, lab: str, out: Path) -> dict[str, Path]:
    """student id -> folder holding that student's files for `lab`.

    Accepted layouts (folder or zip): nbgrader's `submitted/<student>/<lab>/...`,
    `<student>/<lab>/...`, `<student>/...`, flat files `<student>__<name>.ipynb` (everything before the
    first double underscore is the student id), and the downloads of Canvas (flat files) and Moodle
    (one folder per submission) as they come (autograder/pipeline/lms.py; what they say about each
    student, late flags included, goes to OUT/lms.json). Anything else, or nothing at all, stops with
    a message saying what was found and how to lay it out.
    """
    from . import lms

    base, refused = _unpack(Path(submissions), out)
    if (base / "submitted").is_dir():
        base = base / "submitted"
    found: dict[str, Path] = {}
    records: dict[str, lms.Record] = {}
    canvas, unrecognised = _flat_files(base, lab, out, found)
    for student, items in canvas.items():
        found[student], records[student] = _canvas_files(items, out / "collected" / student / lab, refused)
    folders: dict[str, list[Path]] = {}
    for d in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
        if d.name.startswith(".") or d.name in ("collected", "unpacked"):
            continue
        moodle = lms.moodle_folder(d.name)
        student = d.name
        if moodle is not None:
            student, record = moodle
            if student in records:  # Moodle's second folder of one submission (its online text, say)
                records[student].files.append(d.name)
            else:
                records[student] = record
        folders.setdefault(student, []).append(d / lab if (d / lab).is_dir() else d)
    for student, candidates in folders.items():
        # the folder that holds a notebook is the submission; a folder beside it without one (Moodle's online
        # text) is not, and is named
        with_nb = [c for c in candidates if any(c.rglob("*.ipynb"))]
        chosen = (with_nb or candidates)[0]
        for other in candidates:
            if other != chosen:
                refused.append({"entry": str(other.relative_to(base)), "student": student,
                                "why": f"a second folder of this student's; graded {chosen.relative_to(base)}"
                                       + ("" if other not in with_nb else " (both hold a notebook: check which "
                                                                           "is the submission)")})
        if student in found:  # a flat file and a folder for one student
            refused.append({"entry": str(chosen.relative_to(base)), "student": student,
                            "why": "the student also handed in flat files; graded those"})
            continue
        found[student] = chosen
    _refuse_what_names_no_student(submissions, base, lab, found, unrecognised, refused)
    out.mkdir(parents=True, exist_ok=True)
    lms.save(out, records)
    (out / NOTES).write_text(json.dumps({"refused": refused}, indent=1) + "\n")
    return dict(sorted(found.items()))


def collect_notes(out: Path) -> list[str]:
    """What collecting refused, one line each, naming the student (for the summary)."""
    try:
        refused = json.loads((Path(out) / NOTES).read_text()).get("refused", [])
    except (OSError, ValueError):
        return []
    return [f"{r.get('student') or '(no student)'}: {r.get('entry')!r} not graded: {r.get('why')}" for r in refused]


def refused_entries(out: Path) -> dict[str, list[str]]:
    """student -> the entries of theirs collecting did not grade, each with why (for lms.csv)."""
    try:
        refused = json.loads((Path(out) / NOTES).read_text()).get("refused", [])
    except (OSError, ValueError):
        return {}
    by: dict[str, list[str]] = {}
    for r in refused:
        by.setdefault(str(r.get("student") or ""), []).append(f"{r.get('entry')} ({r.get('why')})")
    return by


def _flat_files(base: Path, lab: str, out: Path, found: dict[str, Path]) -> tuple[dict[str, list], list[str]]:
    """The files at the top of the submissions: `<student>__<name>` files are copied into their student's
    folder (added to `found`); returns (student -> the Canvas files of that student, the notebooks whose
    name names no student)."""
    from . import lms

    canvas: dict[str, list] = {}
    unrecognised = []
    for p in sorted(p for p in base.iterdir() if p.is_file() and not p.name.startswith(".")):
        cf = lms.recognise(p.name, {f"{lab}.ipynb"})
        if cf is not None:
            canvas.setdefault(cf.student, []).append((cf, p))
        elif "__" in p.name:
            student = p.name.split("__", 1)[0]
            dest = out / "collected" / student / lab
            if student not in found:
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir(parents=True)
            shutil.copy2(p, dest / p.name.split("__", 1)[1])
            found[student] = dest
        elif p.suffix == ".ipynb":
            unrecognised.append(p.name)
    return canvas, unrecognised


def _canvas_files(items: list, dest: Path, refused: list[dict]) -> tuple[Path, Record]:
    """One student's Canvas files (lms.recognise, path), the latest re-submission of each, copied into dest;
    (dest, the student's lms.Record). Each earlier re-submission is named in `refused`."""
    from . import lms

    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    latest: dict[str, tuple] = {}
    for cf, p in items:  # the latest re-submission of each file counts
        if cf.submitted_as not in latest or cf.attempt > latest[cf.submitted_as][0].attempt:
            latest[cf.submitted_as] = (cf, p)
    for name, (cf, p) in latest.items():
        shutil.copy2(p, dest / name)
    for cf, p in items:
        kept = latest[cf.submitted_as][1]
        if p != kept:
            refused.append({"entry": p.name, "student": cf.student,
                            "why": f"an earlier submission of {cf.submitted_as}; graded the latest, {kept.name}"})
    first = items[0][0]
    return dest, lms.Record("canvas", first.user_id, first.name, late=any(cf.late for cf, _ in latest.values()),
                            files=sorted(p.name for _, p in latest.values()))


def _refuse_what_names_no_student(submissions: Path, base: Path, lab: str, found: dict[str, Path],
                                  unrecognised: list[str], refused: list[dict]) -> None:
    """SystemExit, saying how to lay the submissions out, when a notebook names no student or when there is
    none at all; a student whose name cannot be a folder name is taken out of `found`, named in `refused`."""
    if unrecognised:
        raise SystemExit(
            f"{base}: {len(unrecognised)} notebook(s) whose file name names no student, e.g. {unrecognised[:3]}. "
            f"Accepted: <student>/{lab}.ipynb, <student>__{lab}.ipynb, or a Canvas or Moodle download as it comes "
            f"(autograder/README.md, 'From a learning platform'). To use each file's name as its student's id:\n"
            f"  cd '{base}' && for f in *.ipynb; do s=\"${{f%.ipynb}}\"; mkdir -p \"$s\"; mv \"$f\" \"$s/{lab}.ipynb\"; done")
    if not found:
        raise SystemExit(f"{submissions}: no submissions found (an empty folder or zip). Accepted layouts: "
                         f"<student>/{lab}.ipynb, <student>__{lab}.ipynb, nbgrader's submitted/<student>/{lab}/, "
                         f"or a Canvas or Moodle download as it comes")
    for s in [s for s in found if name_problem(s)]:  # refused one by one: the others are graded
        refused.append({"entry": s, "student": s, "why": f"this name cannot be a folder name here "
                                                        f"({name_problem(s)}); rename the folder and grade again"})
        del found[s]
    if not found:
        raise SystemExit(f"{submissions}: no student left to grade: every name was refused ({refused[-1]['why']})")


def submission_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            h.update(str(p.relative_to(folder)).encode() + b"\0")
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def check_notebooks(folder: Path, expected: list[str], max_bytes: int) -> tuple[dict[str, Path], list[str]]:
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
            if isinstance(nb, dict) and nb.get("nbformat") == 3:
                nb = read_notebook(path)  # converted, or an error saying why it cannot be
                problems.append(f"{name}.ipynb: saved in nbformat 3 (an old Jupyter); converted to nbformat 4 "
                                f"by nbformat to grade it")
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


def read_notebook(path: Path) -> dict:
    """The notebook at `path` as nbformat 4 JSON: as it is, or, saved in nbformat 3, converted by nbformat
    (`nbformat.reads(..., as_version=4)`, which upgrades it). ValueError when it cannot be read."""
    nb = json.loads(path.read_bytes())
    if isinstance(nb, dict) and nb.get("nbformat") == 3:
        import nbformat

        try:
            nb = json.loads(nbformat.writes(nbformat.reads(path.read_text(), as_version=4)))
        except Exception as err:  # noqa: BLE001 - nbformat's errors are many; each means "cannot convert"
            raise ValueError(f"an nbformat 3 notebook nbformat cannot convert: {err}") from None
    return nb
