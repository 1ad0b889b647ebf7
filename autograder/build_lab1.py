"""Write the nbgrader source notebook of Lab 1: `python -m autograder.build_lab1`.

The notebook solutions/lab1/lab1.ipynb is generated from this file so that its
nbgrader metadata (solution cells, graded test cells with points, locked
markdown) is written in one place and reviewed as code. The graded test cells
and their points come from `autograder.checks.lab1.CELLS`.

Notation: p = target distribution, q = draft distribution, k = draft length,
alpha = acceptance rate.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from autograder.checks.lab1 import CELLS

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "solutions" / "lab1" / "lab1.ipynb"
BOOK = "../../book"  # relative link from labs/lab1/ and solutions/lab1/ to the book sources

SPEC = {cell.grade_id: cell for cell in CELLS}


def md(grade_id: str, text: str):
    cell = nbformat.v4.new_markdown_cell(text.strip())
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True,
                                 "grade_id": grade_id, "schema_version": 3}
    return cell


def code(text: str, grade_id: str | None = None, *, solution: bool = False, locked: bool = False):
    cell = nbformat.v4.new_code_cell(text.strip())
    if grade_id is not None:
        cell.metadata["nbgrader"] = {"grade": False, "solution": solution, "locked": locked,
                                     "grade_id": grade_id, "schema_version": 3}
    return cell


def set_stable_ids(cells: list) -> None:
    """Cell ids from grade ids (or the cell's index): rebuilding leaves the committed notebook diff-free."""
    for i, cell in enumerate(cells):
        cell["id"] = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell-{i}")


def sol(grade_id: str, text: str) -> nbformat.NotebookNode:
    """A solution cell: nbgrader replaces each BEGIN/END SOLUTION region by a stub in the student version."""
    return code(text, grade_id, solution=True)


def test(grade_id: str, visible: str) -> nbformat.NotebookNode:
    """A graded test cell: visible sanity asserts, then the hidden call into autograder.checks.lab1."""
    spec = SPEC[grade_id]
    args = ", ".join(spec.args)
    hidden = (f"### BEGIN HIDDEN TESTS\nfrom autograder.checks import lab1 as _checks\n"
              f"_checks.{spec.check.__name__}({args})\n### END HIDDEN TESTS")
    cell = nbformat.v4.new_code_cell(f"# {spec.points} point(s)\n{visible.strip()}\n{hidden}")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": spec.points,
                                 "grade_id": grade_id, "schema_version": 3}
    return cell


CELLS_SOURCE = [
    md("intro", f"""
# Lab 1: rejection sampling, exactly

In this lab you implement the acceptance rule of speculative decoding and convince yourself,
and a grader, that it is **exact**: the tokens it emits follow the target model's distribution
whatever the draft model is.

Notation (the same as in the book): **p** is the target distribution, **q** the draft
distribution, **k** the number of drafted tokens, **α** the acceptance rate.

Background: the book's chapters [The acceptance criterion]({BOOK}/02_acceptance.md),
[The residual distribution and exactness]({BOOK}/03_exactness.md) and
[Tokens per step]({BOOK}/05_tokens_per_step.md).

| Part | What you write | Points |
|---|---|---|
| 1 | `check_distribution`, `acceptance_prob`, `residual_distribution` | 5 |
| 2 | `speculative_sample`: one position, injectable random generator | 4 |
| 3 | `verify_block`: k drafted tokens, k + 1 target rows | 5 |
| 4 | `estimate_alpha`: pooled α from verification logs | 2 |
| 5 | `speculative_sample_batch`: vectorised, at least 50× faster than a loop | 4 |

Write your code between the `YOUR CODE HERE` markers only. The test cells contain a few visible
sanity checks; the grader adds hidden checks that compare your samplers' output with the exact
distributions by hypothesis tests whose false-failure probability is at most 10⁻⁶ per test cell,
so a correct implementation passes them (with fixed seeds, so the grade is reproducible).
Use the random generator you are given (`rng`) for every random draw, never the global `np.random`.
"""),
    code("""
import time

import numpy as np

TOL = 1e-6  # how far from 1 the sum of a probability vector may be


def sample_from(probs: np.ndarray, rng: np.random.Generator) -> int:
    \"\"\"One draw from a probability vector by inverting its CDF (faster than rng.choice).\"\"\"
    cdf = np.cumsum(probs)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(probs) - 1))
""", "setup", locked=True),
    md("part1", f"""
## Part 1: acceptance probability and residual distribution (5 points)

The draft proposes a token $x \\sim q$. The target accepts it with probability

$$ a(x) = \\min\\left(1, \\frac{{p(x)}}{{q(x)}}\\right), $$

and after a rejection it draws a replacement from the **residual distribution**

$$ r(y) = \\frac{{\\max(p(y) - q(y), 0)}}{{\\sum_z \\max(p(z) - q(z), 0)}}. $$

Why this is exact (see [The residual distribution and exactness]({BOOK}/03_exactness.md)):
the probability of emitting $y$ is $q(y)\\,a(y) + P(\\text{{reject}})\\, r(y) = \\min(p(y), q(y)) + \\max(p(y) - q(y), 0) = p(y)$,
because $P(\\text{{reject}}) = \\sum_x q(x)(1 - a(x)) = \\sum_z \\max(p(z) - q(z), 0)$ is exactly the normaliser of $r$.

Edge cases your code must handle:

* **A token with $q(x) = 0$** is never drafted, so $a(x)$ is undefined: `acceptance_prob` raises `ValueError`.
* **$p = q$**: the residual is all zeros and cannot be normalised. It is never needed, because then
  $a(x) = 1$ for every drafted token and a rejection has probability $\\sum_z \\max(p(z) - q(z), 0) = 0$.
  `residual_distribution` raises a `ValueError` saying so (when the residual mass is below `1e-12`), and your sampler must
  only ask for the residual after an actual rejection.
* **Inputs that are not distributions** (not 1-D, empty, different lengths, negative, NaN or infinite
  entries, a sum further than `TOL` from 1) raise a `ValueError` with a clear message. Write the checks once in
  `check_distribution` and call it from the other functions.
"""),
    sol("impl_part1", """
def check_distribution(v, name: str, size: int | None = None) -> np.ndarray:
    \"\"\"Return v as a float array after checking it is a probability vector (of length size, if given).\"\"\"
    ### BEGIN SOLUTION
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D vector, got shape {v.shape}")
    if size is not None and v.size != size:
        raise ValueError(f"{name} has {v.size} entries but the vocabulary has {size}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    if np.any(v < 0):
        raise ValueError(f"{name} has negative entries (smallest {v.min():.3g})")
    if abs(v.sum() - 1.0) > TOL:
        raise ValueError(f"{name} sums to {v.sum():.6g}, not 1")
    return v
    ### END SOLUTION


def acceptance_prob(p, q, x: int) -> float:
    \"\"\"Probability min(1, p[x] / q[x]) that the target accepts the drafted token x.\"\"\"
    ### BEGIN SOLUTION
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    if not isinstance(x, (int, np.integer)) or not 0 <= x < p.size:
        raise ValueError(f"token x = {x!r} is not an integer in [0, {p.size})")
    if q[x] == 0:
        raise ValueError(f"token {x} has draft probability q[{x}] = 0, so it is never drafted")
    return float(min(1.0, p[x] / q[x]))
    ### END SOLUTION


def residual_distribution(p, q) -> np.ndarray:
    \"\"\"The distribution max(p - q, 0) / sum(max(p - q, 0)) a rejected position is resampled from.\"\"\"
    ### BEGIN SOLUTION
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    diff = np.maximum(p - q, 0.0)
    mass = diff.sum()  # = P(reject) = total variation between p and q
    if mass <= 1e-12:
        raise ValueError("p == q: the residual has no mass; a rejection has probability 0, so it is never needed")
    return diff / mass
    ### END SOLUTION
"""),
    md("part1-sanity", "Sanity checks you can run (the grader runs more, hidden ones, in the same cells):"),
    test("test_acceptance_prob", """
p = np.array([0.1, 0.2, 0.3, 0.4])
q = np.array([0.4, 0.3, 0.2, 0.1])
assert abs(acceptance_prob(p, q, 0) - 0.25) < 1e-12
assert acceptance_prob(p, q, 3) == 1.0
"""),
    test("test_residual_distribution", """
r = residual_distribution(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1]))
assert np.allclose(r, [0.0, 0.0, 0.25, 0.75])
"""),
    test("test_input_validation", """
for bad in ([0.5, 0.6], [-0.5, 1.5], [np.nan, 1.0]):
    try:
        residual_distribution(np.array(bad), np.array([0.5, 0.5]))
        raise AssertionError(f"no ValueError for p = {bad}")
    except ValueError:
        pass
"""),
    md("part2", f"""
## Part 2: one position of speculative sampling (4 points)

Draw $x \\sim q$, then $u \\sim \\mathrm{{U}}[0, 1)$; emit $x$ if $u < a(x)$, otherwise emit a draw from $r$.
Take **every** random number from the generator `rng` you are given (so a seed reproduces your samples) and
use the helper `sample_from`. Part 1 shows that the output follows $p$ exactly; the hidden tests check this
on several pairs, among them $p = q$, disjoint supports, a $q$ with zeros, a one-hot $p$ and a 1000-token vocabulary.
See [The acceptance criterion]({BOOK}/02_acceptance.md).
"""),
    sol("impl_part2", """
def speculative_sample(p, q, rng: np.random.Generator) -> int:
    \"\"\"One token whose distribution is exactly p, using a draft from q and one accept/reject test.\"\"\"
    ### BEGIN SOLUTION
    q = np.asarray(q, dtype=float)
    x = sample_from(q, rng)
    if rng.random() < acceptance_prob(p, q, x):  # checks p and q before they are used
        return x
    return sample_from(residual_distribution(p, q), rng)
    ### END SOLUTION
"""),
    test("test_sampler_exactness", """
_rng = np.random.default_rng(0)
_p, _q = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
_freq = np.bincount([speculative_sample(_p, _q, _rng) for _ in range(4000)], minlength=4) / 4000
# 0.05 is more than 6 standard deviations of a frequency here
assert np.abs(_freq - _p).max() < 0.05, f"your frequencies {np.round(_freq, 3)} are far from p = {_p}"
"""),
    md("part3", f"""
## Part 3: verifying a block of k drafted tokens (5 points)

The draft proposes $x_1, \\dots, x_k$ autoregressively; one target forward pass gives the target
distributions at the $k + 1$ positions, `p_rows[i]` $= p(\\cdot \\mid \\text{{prefix}}, x_1, \\dots, x_i)$,
and the draft gave `q_rows[i]` $= q(\\cdot \\mid \\text{{prefix}}, x_1, \\dots, x_i)$ for $i < k$.
Verify the drafts **in order** with the rule of Part 2, using row $i$ of both for draft $x_{{i+1}}$:

* at the first rejection, at position $i$, emit a draw from the residual of `p_rows[i]` and `q_rows[i]` and **stop**:
  the later drafts were conditioned on a token that is not emitted;
* if all $k$ are accepted, emit one **bonus** token from `p_rows[k]`, the target's distribution after the last draft.

Return the emitted tokens (the accepted prefix plus one token, so between 1 and $k + 1$) and the number accepted.
By the argument of Part 1 applied position by position, the emitted sequence has exactly the
target's joint distribution; the hidden tests compare your output with that exact joint distribution,
enumerated over every possible block of a toy model. The count of emitted tokens is the subject of
[Tokens per step]({BOOK}/05_tokens_per_step.md).
"""),
    sol("impl_part3", """
def verify_block(draft_tokens, p_rows, q_rows, rng: np.random.Generator) -> tuple[list[int], int]:
    \"\"\"Verify k drafted tokens; return (emitted tokens, number of accepted drafts).

    draft_tokens: (k,) ints; p_rows: (k + 1, V) target rows; q_rows: (k, V) draft rows.
    \"\"\"
    ### BEGIN SOLUTION
    draft_tokens = np.asarray(draft_tokens)
    p_rows, q_rows = np.asarray(p_rows, dtype=float), np.asarray(q_rows, dtype=float)
    k = draft_tokens.shape[0]
    if draft_tokens.ndim != 1 or p_rows.ndim != 2 or q_rows.shape != (k, p_rows.shape[1]) or p_rows.shape[0] != k + 1:
        raise ValueError(f"shapes {draft_tokens.shape}, {p_rows.shape}, {q_rows.shape}: expected (k,), (k+1, V), (k, V)")
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, i
    emitted.append(sample_from(check_distribution(p_rows[k], "p_rows[k]"), rng))
    return emitted, k
    ### END SOLUTION
"""),
    test("test_block_structure", """
_tokens, _n = verify_block([2, 1], np.array([[0.2, 0.3, 0.5]] * 3), np.array([[0.2, 0.3, 0.5]] * 2),
                           np.random.default_rng(1))
assert _n == 2 and len(_tokens) == 3 and _tokens[:2] == [2, 1]  # p == q: everything is accepted
"""),
    test("test_block_exactness", """
_tokens, _n = verify_block([0], np.array([[0.0, 1.0], [0.5, 0.5]]), np.array([[1.0, 0.0]]), np.random.default_rng(2))
assert (_tokens, _n) == ([1], 0)  # the target never emits token 0 here, so the draft is rejected
"""),
    md("part4", f"""
## Part 4: estimating α from verification logs (2 points)

Every block logs how many of its $k$ drafts were accepted. A draft is *verified* when it is compared with the
target: in a block with $n < k$ accepted, $n + 1$ drafts were verified ($n$ accepted, one rejected); with $n = k$,
all $k$. Each verified draft is accepted with probability α, so the **pooled** estimate is

$$ \\hat\\alpha = \\frac{{\\sum_b n_b}}{{\\sum_b \\min(n_b + 1, k_b)}}. $$

The naive per-block average $\\frac{{1}}{{B}} \\sum_b n_b / k_b$ is biased low: drafts after a rejection are never
verified, yet it counts them as failures. Its mean is $\\frac{{\\alpha(1 - \\alpha^k)}}{{k(1 - \\alpha)}} < \\alpha$
(see [Tokens per step]({BOOK}/05_tokens_per_step.md)). `k` may be one number or one per block; raise `ValueError`
for empty logs, $k < 1$, or counts outside $[0, k]$.
"""),
    sol("impl_part4", """
def estimate_alpha(n_accepted, k) -> float:
    \"\"\"Pooled acceptance rate: accepted drafts / verified drafts over all logged blocks.\"\"\"
    ### BEGIN SOLUTION
    n = np.asarray(n_accepted)
    if n.ndim != 1 or n.size == 0:
        raise ValueError("n_accepted must be a non-empty 1-D sequence of counts")
    k = np.broadcast_to(np.asarray(k), n.shape)
    if np.any(k < 1) or np.any(n < 0) or np.any(n > k):
        raise ValueError("every block needs k >= 1 and 0 <= n_accepted <= k")
    verified = np.minimum(n + 1, k)
    return float(n.sum() / verified.sum())
    ### END SOLUTION
"""),
    test("test_alpha_estimator", """
assert abs(estimate_alpha([2, 0, 3], 3) - 5 / 7) < 1e-12
"""),
    md("part4-compare", "The pooled estimate against the naive one, on logs simulated with a known α:"),
    code("""
def simulate_logs(alpha: float, k: int, blocks: int, rng: np.random.Generator) -> np.ndarray:
    \"\"\"Accepted drafts per block when every verified draft is accepted independently with probability alpha.\"\"\"
    accepted = rng.random((blocks, k)) < alpha
    return np.where(accepted.all(axis=1), k, np.argmin(accepted, axis=1))  # index of the first rejection


_rng = np.random.default_rng(4)
print(" true α   pooled   naive per-block   naive mean formula")
for _alpha in (0.3, 0.6, 0.9):
    _logs = simulate_logs(_alpha, 4, 20000, _rng)
    _naive_formula = _alpha * (1 - _alpha**4) / (4 * (1 - _alpha))
    print(f"  {_alpha:.2f}    {estimate_alpha(_logs, 4):.4f}      {np.mean(_logs / 4):.4f}           {_naive_formula:.4f}")
"""),
    md("part5", """
## Part 5: a vectorised sampler (4 points)

Row $b$ of `p` and `q` (shape `(B, V)`) is one independent position. Return `B` tokens, row $b$ distributed
as `p[b]`, **without a Python loop over rows**: draw all drafts at once by inverting each row's CDF
(`np.cumsum` along the vocabulary axis, then compare with one uniform per row), gather
$p_b(x_b)$ and $q_b(x_b)$ with fancy indexing, accept with a second uniform per row, and sample the residual
rows of the rejected positions the same way. It must be at least 50× faster per row than a loop over
`speculative_sample` (one point of the grade is this speed, measured against a loop by the grader).
"""),
    sol("impl_part5", """
def speculative_sample_batch(p, q, rng: np.random.Generator) -> np.ndarray:
    \"\"\"(B,) tokens; token b is distributed exactly as p[b], using a draft from q[b].\"\"\"
    ### BEGIN SOLUTION
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.ndim != 2 or p.shape != q.shape:
        raise ValueError(f"p and q must both have shape (B, V), got {p.shape} and {q.shape}")
    for name, m in (("p", p), ("q", q)):
        if not np.all(np.isfinite(m)) or np.any(m < 0) or np.any(np.abs(m.sum(axis=1) - 1) > TOL):
            raise ValueError(f"every row of {name} must be a probability vector")
    batch, vocab = p.shape
    rows = np.arange(batch)

    def inverse_cdf(probs: np.ndarray) -> np.ndarray:  # (n, V) -> (n,) one draw per row
        cdf = np.cumsum(probs, axis=1)
        u = rng.random(len(probs))[:, None] * cdf[:, -1:]
        return np.minimum((cdf <= u).sum(axis=1), vocab - 1)

    x = inverse_cdf(q)  # (B,) drafts
    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
    out = x.copy()
    rejected = np.flatnonzero(~accept)
    if rejected.size:
        resid = np.maximum(p[rejected] - q[rejected], 0.0)  # each rejected row has residual mass > 0
        out[rejected] = inverse_cdf(resid)
    return out
    ### END SOLUTION
"""),
    test("test_batch_exactness", """
_p, _q = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
_out = speculative_sample_batch(np.tile(_p, (40000, 1)), np.tile(_q, (40000, 1)), np.random.default_rng(5))
assert _out.shape == (40000,), f"expected 40000 tokens, got shape {_out.shape}"
_freq = np.bincount(_out, minlength=4) / 40000
assert np.abs(_freq - _p).max() < 0.015, f"your frequencies {np.round(_freq, 3)} are far from p = {_p}"
"""),
    md("part5-speed", "Your speed-up, per row, against a Python loop over your `speculative_sample` (median of repeats after a warm-up):"),
    code("""
def per_row_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


_rng = np.random.default_rng(6)
_p, _q = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
_P, _Q = np.tile(_p, (50000, 1)), np.tile(_q, (50000, 1))
speculative_sample_batch(_P[:100], _Q[:100], _rng)  # warm-up
[speculative_sample(_p, _q, _rng) for _ in range(100)]
_t_loop = per_row_seconds(lambda: [speculative_sample(_P[b], _Q[b], _rng) for b in range(1000)], 3) / 1000
_t_batch = per_row_seconds(lambda: speculative_sample_batch(_P, _Q, _rng), 5) / 50000
speedup = _t_loop / _t_batch
print(f"loop {_t_loop * 1e6:.2f} µs/row, batch {_t_batch * 1e6:.3f} µs/row: {speedup:.0f}x faster")
"""),
    test("test_batch_speed", """
# The grade comes from the grader's own timing (your batch sampler against its loop, in alternation);
# your measurement above should be well over 50x so that load on the grading machine cannot matter.
print(f"your measured speed-up: {speedup:.0f}x")
"""),
    md("plot", """
## Your sampler against p, and the theoretical α

Left: the empirical distribution of `speculative_sample_batch` on a 12-token pair against the target $p$
and the draft $q$. Right: the fraction of drafts accepted against the theoretical acceptance rate
$\\alpha = \\sum_x \\min(p(x), q(x)) = 1 - \\mathrm{TV}(p, q)$ (the book's
[The acceptance criterion](../../book/02_acceptance.md)), for drafts that move from $p$ towards uniform.
"""),
    code("""
import matplotlib.pyplot as plt

_rng = np.random.default_rng(8)
_logits = _rng.normal(0, 1.5, 12)
p_demo = np.exp(_logits) / np.exp(_logits).sum()
q_demo = np.exp(0.5 * _logits + _rng.normal(0, 0.5, 12))
q_demo /= q_demo.sum()
_n = 50000
_tokens = speculative_sample_batch(np.tile(p_demo, (_n, 1)), np.tile(q_demo, (_n, 1)), _rng)
_freq = np.bincount(_tokens, minlength=12) / _n

_mix = np.linspace(0, 1, 11)
_alpha_theory, _alpha_measured = [], []
for _w in _mix:
    _qw = (1 - _w) * p_demo + _w / 12
    _alpha_theory.append(np.minimum(p_demo, _qw).sum())
    _x = np.minimum(np.searchsorted(np.cumsum(_qw), _rng.random(3000), side="right"), 11)  # 3000 drafts from q
    _alpha_measured.append(np.mean(_rng.random(3000) < np.minimum(1, p_demo[_x] / _qw[_x])))

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
_ix = np.arange(12)
ax1.bar(_ix - 0.25, p_demo, width=0.25, label="target p")
ax1.bar(_ix, _freq, width=0.25, label=f"your samples (n = {_n})")
ax1.bar(_ix + 0.25, q_demo, width=0.25, label="draft q")
ax1.set_xlabel("token")
ax1.set_ylabel("probability")
ax1.legend()
ax2.plot(_mix, _alpha_theory, "-", label=r"theory $\\sum_x \\min(p, q)$")
ax2.plot(_mix, _alpha_measured, "o", label="measured")
ax2.set_xlabel("weight of the uniform in q")
ax2.set_ylabel(r"acceptance rate $\\alpha$")
ax2.legend()
plt.tight_layout()
plt.show()
print(f"total variation between your samples and p: {0.5 * np.abs(_freq - p_demo).sum():.4f}")
"""),
]


def build() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.cells = CELLS_SOURCE
    set_stable_ids(nb.cells)
    graded = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded == [c.grade_id for c in CELLS], "every CellSpec needs exactly one test cell, in order"
    nbformat.validate(nb)
    return nb


def main(argv: list[str]) -> int:
    text = nbformat.writes(build())
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text() == text
        print(f"{OUT.relative_to(ROOT)} is {'up to date' if same else 'STALE: run python -m autograder.build_lab1'}")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
