"""autograder: nbgrader configuration, hidden-test checks, mutant catalog and grading tools.

Notation: see the `speclab` package docstring.
"""
