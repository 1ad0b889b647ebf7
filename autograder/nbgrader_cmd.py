"""`nbgrader ARGS...` without a slow import it never needs (run as a script: python nbgrader_cmd.py ARGS).

nbgrader imports nbformat, which imports jsonschema, which imports the optional package
`rfc3987_syntax` (for IRI format checks that notebook validation never uses) when it is
installed; that package compiles a Lark grammar at import, 2.5-3 s of CPU in every nbgrader
process, a large part of one Lab 1 student's grading cost. Marking it absent in sys.modules
makes jsonschema skip it (it imports it under `suppress(ImportError)`). The kernels that
nbgrader starts are separate processes and unaffected.
"""
import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # this folder's modules must not shadow top-level names
BLOCKED = ("rfc3987_syntax",)
for _name in BLOCKED:
    sys.modules.setdefault(_name, None)

if __name__ == "__main__":
    from nbgrader.apps.nbgraderapp import main

    sys.argv[0] = "nbgrader"
    sys.exit(main())
