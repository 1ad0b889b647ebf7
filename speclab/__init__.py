"""speclab: the code the book, the labs and the grader share.

Notation, the same in the book (book/notation.md), the labs, the code and the tests; every
module of speclab and autograder points here instead of repeating it:

- ``p``: the **target** distribution (the one the output must follow exactly),
- ``q``: the **draft** distribution (the cheap proposal),
- ``k``: draft length, the number of tokens the draft proposes per step,
- ``alpha``: acceptance rate, the probability that one drafted token is accepted,
  ``alpha = sum_x min(p(x), q(x))``,
- ``c``: cost ratio ``T_target / T_draft`` of one forward pass of each model
  (``rho = 1 / c = T_draft / T_target`` is the convention of some papers),
- ``N``: tokens emitted by one speculative step (``1 <= N <= k + 1`` with the bonus token),
- ``S``: speedup, tokens per unit time relative to decoding with the target alone.
"""

__version__ = "0.1.0"
