"""autograder: nbgrader configuration, hidden-test checks, mutant catalog and grading tools.

Notation used in every module: p = target distribution, q = draft distribution,
k = draft length, alpha = acceptance rate.
"""
