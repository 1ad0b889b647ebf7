"""Everything that runs inside a student's sandbox, and only that: the sandbox mounts this folder.

- `nbgrader_config.py`: the course's nbgrader configuration (also what `make labs` uses);
- `timeouts.py`: each lab's per-cell time limit;
- `nbgrader_cmd.py`: `nbgrader ...` without a slow import it never needs;
- `harness.py`: the verdict's harness, serving the student's functions to the grader;
- `wire.py`: the plain values that cross between the harness and the grader (both ends use it);
- `protect.py`: snapshot and restore of the modules a graded cell relies on;
- `recheck.py`: the clean re-run of a notebook in a plain interpreter.

Modules here import only the standard library, `autograder.checks`, `speclab` and each other;
never the grader's pipeline, the authoring tools or the audits (which are not mounted).
"""
from __future__ import annotations

import sys

# `python -I -c LAUNCH ROOT MODULE ARGS...`: run MODULE.main(ARGS) with ROOT, the course's code, first
# on sys.path. Isolated mode (-I) puts neither the working directory (the student's scratch folder) nor
# PYTHONPATH nor the user's site-packages on sys.path, so nothing the student wrote shadows a module.
LAUNCH = ("import sys, importlib\n"
          "root, module = sys.argv[1], sys.argv[2]\n"
          "sys.path.insert(0, root)\n"
          "sys.exit(importlib.import_module(module).main(sys.argv[3:]))\n")


def launch(root, module: str, *args: str, python: str = sys.executable) -> list[str]:
    """The command that runs `module.main(args)` in a fresh isolated interpreter, code from root."""
    return [python, "-I", "-c", LAUNCH, str(root), module, *map(str, args)]
