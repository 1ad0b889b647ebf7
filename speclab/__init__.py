"""speclab: the code the book, the labs and the grader share.

Notation used in every module: p = target distribution, q = draft distribution,
k = draft length, alpha = acceptance rate, c = T_target / T_draft.
"""

__version__ = "0.1.0"
