"""The rules of Lab 1's hidden checks (autograder/checks/lab1.py), in the words the student reads.

Every requirement a check enforces: `make labs` writes each cell's rules into the solution cell that
defines its functions (autograder/authoring/labs.py); a failing check names the rule it found broken
(`autograder.checks.under`).
"""
from __future__ import annotations

from speclab import speedtest

from . import Rule
from .lab1_cases import BIG_CHUNK, PAIR_ROWS
from .lab1_ranks import VOCAB

R_ACCEPT = Rule("acceptance value", "`acceptance_prob(p, q, x)` returns min(1, p[x] / q[x]) as one number "
                "(within 1e-9), for every token x with q[x] > 0.")
R_NEVER_DRAFTED = Rule("never drafted", "`acceptance_prob(p, q, x)` raises `ValueError` when q[x] = 0 "
                       "(the draft never proposes x).")
R_RESIDUAL = Rule("residual value", "`residual_distribution(p, q)` returns max(p - q, 0) divided by its sum: "
                  "a vector as long as p, each entry within 1e-9.")
R_NO_RESIDUAL = Rule("no residual", "`residual_distribution(p, q)` raises `ValueError` when p = q "
                     "(the residual has no mass).")
R_VALIDATE = Rule("validate", "`acceptance_prob` and `residual_distribution` raise `ValueError` when p or q is "
                  "not a probability vector (not 1-D, empty, different lengths, a negative, NaN or infinite "
                  "entry, however small, or a sum further than TOL = 1e-6 from 1), and accept a vector whose "
                  "sum is within TOL of 1 as it is; "
                  "`acceptance_prob` raises `ValueError` (or `TypeError`, `IndexError`) for a token x that is "
                  "not an integer in [0, V).")
R_SAMPLER_RNG = Rule("sampler rng", "`speculative_sample` takes every random number from `rng`: two calls with "
                     "generators seeded alike return the same token, and the global `np.random` state is never "
                     "touched.")
R_SAMPLER_REFUSE = Rule("sampler refuses", "`speculative_sample` raises `ValueError` when p or q is not a "
                        "probability vector or their lengths differ.")
R_SAMPLER_LAW = Rule("sampler law", "`speculative_sample(p, q, rng)` (drafting its own token from q) returns a "
                     "token (an integer in [0, V)) that follows p exactly, on every pair: a one-hot p, a draft "
                     f"close to the target, a 1000-token vocabulary, and a vocabulary of real-model size ({VOCAB:,} "
                     "tokens, where the grader counts how often your tokens fall beyond the top 32, 256, 1024, ... "
                     "entries of p, q and the residual: a sampler that keeps only a distribution's largest entries, "
                     "or drops entries below a threshold, fails there); successive calls are independent (tested "
                     "on one stream of 66,000 calls: draws that repeat at any distance fail).")
R_SAMPLER_COUPLING = Rule("sampler coupling", "`speculative_sample(p, q, rng, draft)`, given the draft model's token "
                          "`draft` = x drawn from q, runs the algorithm on that x: it emits x with probability "
                          "min(1, p[x] / q[x]) and otherwise a draw from the residual, so the pair (x, emitted token) "
                          "follows that joint law exactly, on every pair: p = q, disjoint supports, zeros in q, "
                          f"{VOCAB:,} tokens, ...")
R_BLOCK_RNG = Rule("block rng", "`verify_block` takes every random number from `rng`: generators seeded alike "
                   "give the same output, and the global `np.random` state is never touched.")
R_BLOCK_REFUSE = Rule("block refuses", "`verify_block` raises `ValueError` when k = 0, when a drafted token is "
                      "outside the vocabulary, when a row of `p_rows` or `q_rows` is not a probability vector, or "
                      "when the shapes are not (k,), (k + 1, V) and (k, V).")
R_BLOCK_SHAPE = Rule("block shape", "`verify_block` returns (tokens, n_accepted): the accepted drafts, then "
                     "exactly one more token (a residual draw from row i after a rejection at position i, or "
                     "the bonus token from `p_rows[k]` after k acceptances), and n_accepted, the number of "
                     "accepted drafts.")
R_BLOCK_LAW = Rule("block law", "The tokens `verify_block` emits follow the target's joint law exactly "
                   "(tested on every block of a toy model, k = 1 to 3).")
R_ALPHA = Rule("alpha value", "`estimate_alpha(n_accepted, k)` returns accepted drafts / verified drafts summed "
               "over all blocks (within 1e-9); k is one number or one per block.")
R_ALPHA_REFUSE = Rule("alpha refuses", "`estimate_alpha` raises `ValueError` for empty logs, k < 1, or a count "
                      "outside [0, k].")
R_BATCH_RNG = Rule("batch rng", "`speculative_sample_batch` takes every random number from `rng`: generators "
                   "seeded alike give the same tokens, and the global `np.random` state is never touched.")
R_BATCH_LAW = Rule("batch law", "`speculative_sample_batch(p, q, rng)` (drafting its own tokens) returns B "
                   "integer tokens, row b following p[b] exactly and independently of every other row, near or far, "
                   f"on vocabularies up to real-model size ({VOCAB:,} tokens, in calls of {BIG_CHUNK} rows: a "
                   "sampler that keeps only a distribution's largest entries, or drops entries below a threshold, "
                   "fails there); "
                   f"the grader compares every two of {PAIR_ROWS} identical rows over repeated calls, so rows that reuse "
                   "another row's random numbers fail, whichever rows they pair.")
R_BATCH_COUPLING = Rule("batch coupling", "`speculative_sample_batch(p, q, rng, drafts)`, given one drafted token "
                        "per row (`drafts[b]` drawn from q[b]), emits drafts[b] with probability "
                        "min(1, p[b, x] / q[b, x]) and otherwise a draw from row b's residual: the pair (draft, "
                        f"emitted token) of every row follows that joint law exactly, on up to {VOCAB:,} tokens.")
R_BATCH_SPEED = Rule("batch speed", f"`speculative_sample_batch` takes at most {1 / speedtest.BATCH_BAR:.0f} "
                     f"times as long as `speclab.speedtest.draws_vectorised` on the same rows (its speed, the "
                     f"figure, is at least {speedtest.BATCH_BAR:g} of that baseline's; the baseline makes only the "
                     f"two random draws of a one-position sampler, vectorised over the rows), timed by the grader with "
                     f"`speclab.speedtest.batch_speedup` on {speedtest.BATCH_ROWS} rows of one pair (building the rows "
                     f"counts, on both sides: in the grader they arrive through the sandbox's wire). Each timed "
                     f"call gets a pair it has not seen, in arrays of its own; every timed output is checked "
                     f"against that pair's law: "
                     f"it must be fresh draws from that call's p. Both sides are timed by the CPU time they "
                     f"worked (your sampler's: every process of yours, as the kernel counts it). Points are lost "
                     f"only on a clear failing "
                     f"verdict of its sign test; a timing it cannot decide is timed again alone at the end of the "
                     f"class's grading, and if it is still unclear its point is held, neither given nor taken, until "
                     f"your instructor times it again; your feedback says which.")
