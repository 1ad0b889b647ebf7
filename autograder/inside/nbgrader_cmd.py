"""`nbgrader ARGS...` without a slow import it never needs.

nbgrader imports nbformat, which imports jsonschema, which imports the optional package
`rfc3987_syntax` (for IRI format checks that notebook validation never uses) when it is
installed; that package compiles a Lark grammar at import: 2.5-3 s of CPU in every nbgrader
process (measured: `nbgrader --version` 3.9 s of CPU, 1.6 s without it), a large part of one
Lab 1 student's grading cost. Marking it absent in sys.modules makes jsonschema skip it (it
imports it under `suppress(ImportError)`). The kernels nbgrader starts are other processes.

The command is `python -c CODE ARGS` rather than a script file so that it needs no file of
this package inside a sandbox that hides the course; the working directory (a scratch course
the student's code can write into) is taken off sys.path before anything is imported.
"""
from __future__ import annotations

import sys

BLOCKED = ("rfc3987_syntax",)

_CODE = (
    "import sys\n"
    "if sys.path and sys.path[0] in ('', '.'):\n"
    "    del sys.path[0]\n"
    f"for _name in {BLOCKED!r}:\n"
    "    sys.modules.setdefault(_name, None)\n"
    "from nbgrader.apps.nbgraderapp import main\n"
    "sys.argv[0] = 'nbgrader'\n"
    "sys.exit(main())\n"
)


def nbgrader_command(python: str = sys.executable) -> list[str]:
    """The argv prefix that runs `nbgrader` (append the subcommand and its options)."""
    return [python, "-c", _CODE]


def skip_slow_imports() -> None:
    """The same in this process (the grader imports nbformat through nbgrader.api and nbconvert)."""
    for name in BLOCKED:
        sys.modules.setdefault(name, None)
