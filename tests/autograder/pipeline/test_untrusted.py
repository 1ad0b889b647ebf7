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
