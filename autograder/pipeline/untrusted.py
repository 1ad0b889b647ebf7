"""Text a student or an LMS controls, made inert where it goes: the instructor's terminal and spreadsheets.

A student writes its exception messages, its notebook's names and (through the LMS) its own name and file
names. All of it is data. Two destinations would otherwise read it as commands:

- a terminal obeys escape sequences (set the title, clear the screen, move the cursor, write the
  clipboard with OSC 52) and bidirectional overrides reorder what it shows: `visible(text)` writes every
  control or format character as an escape, so the terminal shows it and obeys none of it;
- a spreadsheet evaluates a cell that starts with `=`, `+`, `-` or `@` as a formula. `csv_writer(f)` is
  the `csv.writer` of defusedcsv (a maintained drop-in replacement of the standard module), which puts an
  apostrophe before a text cell starting with one of `= + - @ | %`; OWASP also lists a leading tab and
  carriage return, which defusedcsv leaves alone, so this writer gives those the same apostrophe. Numbers
  (a cell that is a number, or text that reads as one) are written as they are.
"""
from __future__ import annotations

import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROL = ("Cc", "Cf", "Zl", "Zp")  # controls (C0, DEL, C1), format (bidi overrides, zero-width), separators


def _escape(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def visible(text: str) -> str:
    """text with every control, format or line-separator character written as an escape (`\\x1b`,
    `\\u202e`, `\\n`): what a terminal prints of it is what was there, and nothing it can act on."""
    return "".join(_escape(c) if unicodedata.category(c) in _CONTROL else c for c in str(text))


class _Writer:
    def __init__(self, f, **fmtparams):
        from defusedcsv import csv as defused

        self._w = defused.writer(f, **fmtparams)

    def writerow(self, row) -> None:
        self._w.writerow(["'" + v if isinstance(v, str) and v.startswith(("\t", "\r")) else v for v in row])

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(f, **fmtparams) -> _Writer:
    """A csv writer for files a spreadsheet will open (module docstring): `writerow`, `writerows`."""
    return _Writer(f, **fmtparams)
