"""Stage 1, collect (autograder/pipeline/collect.py): every accepted layout, and what is refused."""
from __future__ import annotations

import csv
import importlib
import json
import zipfile
from pathlib import Path

import pytest

from autograder.pipeline.collect import check_notebooks, collect, submission_hash

NB = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _write(path: Path, text: str = NB) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("layout", ["submitted/{s}/lab1/lab1.ipynb", "{s}/lab1/lab1.ipynb", "{s}/lab1.ipynb",
                                    "{s}__lab1.ipynb"])
def test_every_layout_gives_one_folder_per_student(tmp_path, layout):
    subs = tmp_path / "subs"
    for s in ("alice", "bob"):
        _write(subs / layout.format(s=s))
    found = collect(subs, "lab1", tmp_path / "out")
    assert list(found) == ["alice", "bob"]
    for folder in found.values():
        assert [p.name for p in folder.rglob("*.ipynb")] == ["lab1.ipynb"]


def test_a_zip_is_unpacked_and_paths_out_of_it_are_dropped(tmp_path):
    z = tmp_path / "class.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("alice__lab1.ipynb", NB)
        zf.writestr("../evil__lab1.ipynb", NB)
    found = collect(z, "lab1", tmp_path / "out")
    assert list(found) == ["alice"]
    assert not (tmp_path / "evil__lab1.ipynb").exists()


def test_a_name_that_cannot_be_a_folder_name_is_refused_alone_and_any_unicode_name_is_one(tmp_path):
    """`-rf` (an option) and a name with an escape character are refused, each named with why; `josé lópez`,
    `李雷` and `o'brien` are graded; one refused name never stops the class."""
    from autograder.pipeline.collect import collect_notes

    for s in ("-rf", "bad\x1b[2Jname", "josé lópez", "李雷", "o'brien"):
        _write(tmp_path / "subs" / s / "lab1.ipynb")
    out = tmp_path / "out"
    assert list(collect(tmp_path / "subs", "lab1", out)) == ["josé lópez", "o'brien", "李雷"]
    notes = collect_notes(out)
    assert len(notes) == 2 and all("cannot be a folder name" in n for n in notes), notes
    assert any(n.startswith("-rf:") and "starts with -" in n for n in notes)
    assert any("control character" in n for n in notes)


def test_a_class_whose_every_name_is_refused_stops_and_says_why(tmp_path):
    _write(tmp_path / "subs" / "-rf" / "lab1.ipynb")
    with pytest.raises(SystemExit, match="no student left to grade.*starts with -"):
        collect(tmp_path / "subs", "lab1", tmp_path / "out")


def test_the_hash_changes_with_any_file_and_only_then(tmp_path):
    folder = tmp_path / "alice"
    nb = _write(folder / "lab1.ipynb")
    first = submission_hash(folder)
    assert submission_hash(folder) == first
    nb.write_text(NB + " ")
    assert submission_hash(folder) != first


def test_check_notebooks_says_what_is_wrong(tmp_path):
    folder = tmp_path / "alice"
    _write(folder / "lab1 (2).ipynb")  # an LMS's renaming: graded, with a note
    usable, problems = check_notebooks(folder, ["lab1"], 1 << 20)
    assert list(usable) == ["lab1"] and "graded the only notebook handed in" in problems[0]
    _write(folder / "lab1.ipynb", "{not json")
    usable, problems = check_notebooks(folder, ["lab1"], 1 << 20)
    assert usable == {} and any("not a valid notebook" in p for p in problems)
    _write(folder / "lab1.ipynb", NB + " " * 2000)
    usable, problems = check_notebooks(folder, ["lab1"], 1000)
    assert usable == {} and any("larger than" in p for p in problems)
    usable, problems = check_notebooks(tmp_path / "nobody", ["lab1"], 1 << 20)
    assert usable == {} and problems == ["lab1.ipynb: missing (0 points for its cells)"]


def test_a_canvas_download_is_graded_as_it_comes(tmp_path):
    """Canvas's flat files: the student is name_userid, a re-submission (lab1-1.ipynb) replaces the first
    upload and keeps the released name, the late flag is kept; the import file goes back in Canvas's format."""
    from autograder.pipeline import lms

    z = tmp_path / "submissions.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("lovelaceada_12345_6789012_lab1.ipynb", NB)
        zf.writestr("lovelaceada_12345_6789013_lab1-1.ipynb", NB + " ")  # the re-submission counts
        zf.writestr("turingalan_late_23456_6789014_lab1.ipynb", NB)
    out = tmp_path / "out"
    found = collect(z, "lab1", out)
    assert list(found) == ["lovelaceada_12345", "turingalan_23456"]
    assert [p.name for p in found["lovelaceada_12345"].iterdir()] == ["lab1.ipynb"]
    assert (found["lovelaceada_12345"] / "lab1.ipynb").read_text() == NB + " "
    from autograder.pipeline.collect import collect_notes  # the superseded upload is named, with the one graded

    assert collect_notes(out) == ["lovelaceada_12345: 'lovelaceada_12345_6789012_lab1.ipynb' not graded: an earlier "
                                  "submission of lab1.ipynb; graded the latest, lovelaceada_12345_6789013_lab1-1.ipynb"]
    records = lms.load(out)
    assert records["turingalan_23456"].late and not records["lovelaceada_12345"].late
    results = [{"student": "lovelaceada_12345", "score": 20.0, "max_score": 20.0},
               {"student": "turingalan_23456", "score": 17.5, "max_score": 20.0}]
    lms.write_exports(out, "lab1", results)
    rows = list(csv.reader(open(out / "grades_canvas.csv")))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "lab1"]
    assert rows[1][0] == "Points Possible" and rows[1][-1] == "20"
    assert rows[2] == ["lovelaceada", "12345", "", "", "", "20"] and rows[3][1:] == ["23456", "", "", "", "17.5"]
    lms_rows = list(csv.DictReader(open(out / "lms.csv")))
    assert [r["late"] for r in lms_rows] == ["", "late"]


def test_a_moodle_download_is_graded_as_it_comes(tmp_path):
    from autograder.pipeline import lms

    subs = tmp_path / "subs"
    _write(subs / "Ada Lovelace_101_assignsubmission_file_" / "lab1.ipynb")
    _write(subs / "Alan Turing_102_assignsubmission_file_" / "lab1.ipynb")
    out = tmp_path / "out"
    assert list(collect(subs, "lab1", out)) == ["adalovelace_101", "alanturing_102"]
    lms.write_exports(out, "lab1", [{"student": "adalovelace_101", "score": 23.0, "max_score": 23.0}])
    rows = list(csv.reader(open(out / "grades_moodle.csv")))
    assert rows[0] == ["Identifier", "Full name", "Grade", "Maximum Grade"]
    assert rows[1] == ["Participant 101", "Ada Lovelace", "23", "23"] and rows[2][2] == ""  # not graded: empty


def test_an_empty_class_is_an_error_not_a_silent_success(tmp_path):
    (tmp_path / "subs").mkdir()
    with pytest.raises(SystemExit, match="no submissions found"):
        collect(tmp_path / "subs", "lab1", tmp_path / "out")


def test_notebooks_that_name_no_student_are_refused_with_the_command_that_lays_them_out(tmp_path):
    import subprocess

    subs = tmp_path / "subs"
    _write(subs / "ada.ipynb")
    _write(subs / "alan.ipynb")
    with pytest.raises(SystemExit) as err:
        collect(subs, "lab1", tmp_path / "out")
    command = str(err.value).splitlines()[-1].strip()
    assert command.startswith(f"cd '{subs}'")
    subprocess.run(["bash", "-c", command], check=True)  # the command, as printed, fixes the folder
    assert list(collect(subs, "lab1", tmp_path / "out")) == ["ada", "alan"]


def test_a_class_not_from_a_platform_writes_no_import_files(tmp_path):
    from autograder.pipeline import lms

    _write(tmp_path / "subs" / "alice" / "lab1.ipynb")
    out = tmp_path / "out"
    collect(tmp_path / "subs", "lab1", out)
    assert lms.write_exports(out, "lab1", [{"student": "alice", "score": 1.0, "max_score": 20.0}]) == []
    assert not (out / "grades_canvas.csv").exists()


# ----------------------------------------------------------------------------- untrusted archives (issue 49)
def test_a_zip_bomb_is_refused_before_anything_is_written(tmp_path):
    """100 MB of zeros in one entry (about 100 KB compressed), against a bound of 50 MB: refused with the sizes and
    the bound, and OUT/unpacked holds nothing. The bound by default: 4 GiB and 100,000 entries."""
    C = importlib.import_module("autograder.pipeline.collect")

    bomb = tmp_path / "class.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("alice/lab1.ipynb", NB)
        z.writestr("bob/lab1.ipynb", b"\0" * (100 << 20))
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(C.ZipTooLarge, match="would unpack to 100 MB, over the bounds of .* 50 MB"):
        C._unpack(bomb, tmp_path / "out", max_bytes=50 << 20)
    assert not any((tmp_path / "out" / "unpacked").rglob("*"))
    assert C.UNPACK_MAX_BYTES == 4 << 30 and C.UNPACK_MAX_ENTRIES == 100_000


def test_an_entry_that_lies_about_its_size_stops_at_what_it_declared(tmp_path):
    C = importlib.import_module("autograder.pipeline.collect")

    liar = tmp_path / "class.zip"
    with zipfile.ZipFile(liar, "w", zipfile.ZIP_STORED) as z:
        z.writestr("bob/lab1.ipynb", b"x" * 4096)
    raw = bytearray(liar.read_bytes())
    # the central directory's "uncompressed size" of the one entry: say 16 bytes (the local header keeps 4096)
    cd = raw.rfind(b"PK\x01\x02")
    raw[cd + 24:cd + 28] = (16).to_bytes(4, "little")
    liar.write_bytes(bytes(raw))
    with pytest.raises((C.ZipTooLarge, zipfile.BadZipFile)):
        C._unpack(liar, tmp_path / "out")
    written = [p for p in (tmp_path / "out" / "unpacked").rglob("*") if p.is_file()]
    assert all(p.stat().st_size <= 16 for p in written)


def test_an_entry_whose_path_leaves_its_folder_is_refused_with_its_students_name(tmp_path):
    from autograder.pipeline.collect import collect_notes

    z = tmp_path / "class.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("alice/lab1.ipynb", NB)
        zf.writestr("../mallory__lab1.ipynb", NB)
        zf.writestr("/abs/eve/lab1.ipynb", NB)
    out = tmp_path / "out"
    assert list(collect(z, "lab1", out)) == ["alice"]  # the others are not graded...
    notes = collect_notes(out)
    assert len(notes) == 2 and any("mallory" in n for n in notes) and any("eve" in n for n in notes), notes
    assert all("not graded: its path leaves the submissions' folder" in n for n in notes)  # whose, and why
    assert not (tmp_path / "mallory__lab1.ipynb").exists()


def test_a_notebook_saved_in_nbformat_3_is_converted_and_said(tmp_path):
    from autograder.pipeline.collect import read_notebook

    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""},
          "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1", "language": "python", "outputs": [],
                                     "metadata": {}}], "metadata": {}}]}
    folder = tmp_path / "alice"
    _write(folder / "lab1.ipynb", json.dumps(v3))
    usable, problems = check_notebooks(folder, ["lab1"], 1 << 20)
    assert list(usable) == ["lab1"] and any("nbformat 3" in p and "converted" in p for p in problems), problems
    nb = read_notebook(usable["lab1"])
    assert nb["nbformat"] == 4 and ["".join(c["source"]) for c in nb["cells"]] == ["x = 1"]


def test_moodles_online_text_folder_beside_the_file_folder_is_named_not_graded(tmp_path):
    from autograder.pipeline.collect import collect_notes

    subs = tmp_path / "subs"
    _write(subs / "Ada Lovelace_101_assignsubmission_file_" / "lab1.ipynb")
    _write(subs / "Ada Lovelace_101_assignsubmission_onlinetext_" / "onlinetext.html", "<p>see my notebook</p>")
    out = tmp_path / "out"
    found = collect(subs, "lab1", out)
    assert list(found) == ["adalovelace_101"] and (found["adalovelace_101"] / "lab1.ipynb").is_file()
    notes = collect_notes(out)
    assert len(notes) == 1 and "onlinetext" in notes[0] and "adalovelace_101" in notes[0], notes
    from autograder.pipeline import lms

    lms.write_exports(out, "lab1", [{"student": "adalovelace_101", "score": 20.0, "max_score": 20.0}])
    (row,) = list(csv.DictReader(open(out / "lms.csv")))
    assert "onlinetext" in row["not graded"] and "a second folder" in row["not graded"], row


def test_a_flat_file_and_a_folder_for_one_student_say_which_was_graded(tmp_path):
    from autograder.pipeline.collect import collect_notes

    subs = tmp_path / "subs"
    _write(subs / "alice__lab1.ipynb")
    _write(subs / "alice" / "lab1.ipynb")
    out = tmp_path / "out"
    assert list(collect(subs, "lab1", out)) == ["alice"]
    assert any("alice" in n and "flat files" in n for n in collect_notes(out)), collect_notes(out)
