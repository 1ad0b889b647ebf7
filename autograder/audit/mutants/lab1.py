"""Catalog of known-wrong Lab 1 implementations; each must lose points in its part.

Notation: see the `speclab` package docstring. These functions use the notebook's names (np, TOL, check_distribution, acceptance_prob,
residual_distribution, sample_from) and only run once injected: see
`autograder.audit.mutants`. `python -m autograder.audit.power lab1` computes the probability that
the hidden tests catch each of them.
"""
# ruff: noqa: F821 - the names are the notebook's
from __future__ import annotations

from autograder.audit.mutants import Mutant, mutant

MUTANTS: list[Mutant] = []


# ----------------------------------------------------------------------------- part 1
@mutant(1, "acceptance_prob", MUTANTS)
def accept_ratio_inverted(p, q, x):
    """Acceptance probability min(1, q/p) instead of min(1, p/q)."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    if not isinstance(x, (int, np.integer)) or not 0 <= x < p.size:
        raise ValueError("bad token")
    if q[x] == 0:
        raise ValueError("never drafted")
    return float(min(1.0, q[x] / p[x])) if p[x] > 0 else 1.0


@mutant(1, "acceptance_prob", MUTANTS)
def accept_not_clipped(p, q, x):
    """Acceptance probability p/q without the min(1, .): values above 1."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    if not isinstance(x, (int, np.integer)) or not 0 <= x < p.size:
        raise ValueError("bad token")
    if q[x] == 0:
        raise ValueError("never drafted")
    return float(p[x] / q[x])


@mutant(1, "residual_distribution", MUTANTS)
def residual_unnormalised(p, q):
    """Residual max(p - q, 0) returned without dividing by its sum."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    diff = np.maximum(p - q, 0.0)
    if diff.sum() <= 1e-12:
        raise ValueError("p == q")
    return diff


@mutant(1, "residual_distribution", MUTANTS)
def residual_is_target(p, q):
    """After a rejection, resamples from p itself instead of the residual."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    if np.maximum(p - q, 0.0).sum() <= 1e-12:
        raise ValueError("p == q")
    return p


@mutant(1, "residual_distribution", MUTANTS)
def residual_is_draft(p, q):
    """After a rejection, resamples from q (the draft) instead of the residual."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    if np.maximum(p - q, 0.0).sum() <= 1e-12:
        raise ValueError("p == q")
    return q


@mutant(1, "residual_distribution", MUTANTS)
def residual_absolute_difference(p, q):
    """Residual |p - q| normalised instead of max(p - q, 0) normalised."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    diff = np.abs(p - q)
    if diff.sum() <= 1e-12:
        raise ValueError("p == q")
    return diff / diff.sum()


@mutant(1, "residual_distribution", MUTANTS)
def residual_silent_nan_when_equal(p, q):
    """p == q: divides 0 by 0 and returns NaNs instead of raising a clear ValueError."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q", size=p.size)
    diff = np.maximum(p - q, 0.0)
    with np.errstate(invalid="ignore"):
        return diff / diff.sum()


@mutant(1, "check_distribution", MUTANTS)
def no_input_validation(v, name, size=None):
    """Converts to an array but checks nothing: invalid inputs give silent wrong answers."""
    return np.asarray(v, dtype=float)


# ----------------------------------------------------------------------------- part 2
@mutant(2, "speculative_sample", MUTANTS)
def sampler_ratio_inverted(p, q, rng):
    """Accepts when u < q(x)/p(x) instead of u < p(x)/q(x)."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    x = sample_from(q, rng)
    if rng.random() * p[x] < q[x]:
        return x
    return sample_from(residual_distribution(p, q), rng)


@mutant(2, "speculative_sample", MUTANTS)
def sampler_always_accepts(p, q, rng):
    """Returns the drafted token without the accept/reject test: samples q, not p."""
    q = check_distribution(q, "q")
    return sample_from(q, rng)


@mutant(2, "speculative_sample", MUTANTS)
def sampler_drafts_argmax(p, q, rng):
    """Drafts the most likely token of q (greedy) but accepts with min(1, p/q) as if x ~ q."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    x = int(np.argmax(q))
    if rng.random() < acceptance_prob(p, q, x):
        return x
    return sample_from(residual_distribution(p, q), rng)


@mutant(2, "speculative_sample", MUTANTS)
def sampler_draft_temperature_mismatch(p, q, rng):
    """Draws the draft token from q at temperature 0.5 (q**2, renormalised) but uses q in the ratio."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    sharp = q**2 / np.sum(q**2)
    x = sample_from(sharp, rng)
    if rng.random() < acceptance_prob(p, q, x):
        return x
    return sample_from(residual_distribution(p, q), rng)


@mutant(2, "speculative_sample", MUTANTS)
def sampler_reuses_uniform(p, q, rng):
    """Samples the residual by inverting its CDF at the same uniform u that was just rejected."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    x = sample_from(q, rng)
    u = rng.random()
    if u < acceptance_prob(p, q, x):
        return x
    cdf = np.cumsum(residual_distribution(p, q))
    return int(min(np.searchsorted(cdf, u, side="right"), len(p) - 1))


@mutant(2, "speculative_sample", MUTANTS)
def sampler_eager_residual(p, q, rng):
    """Computes the residual before the accept/reject test, so it crashes whenever p == q."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    resid = residual_distribution(p, q)
    x = sample_from(q, rng)
    if rng.random() < acceptance_prob(p, q, x):
        return x
    return sample_from(resid, rng)


# ----------------------------------------------------------------------------- part 3
@mutant(3, "verify_block", MUTANTS)
def block_continues_after_rejection(draft_tokens, p_rows, q_rows, rng):
    """After a rejection, emits the residual token and goes on verifying the later drafts."""
    k = len(draft_tokens)
    emitted, accepted = [], 0
    for i in range(k):
        x = int(draft_tokens[i])
        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            accepted += 1
        else:
            emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
    if accepted == k:
        emitted.append(sample_from(p_rows[k], rng))
    return emitted[: accepted + 1], accepted


@mutant(3, "verify_block", MUTANTS)
def block_no_bonus(draft_tokens, p_rows, q_rows, rng):
    """When all k drafts are accepted, emits no bonus token (and reports k - 1 accepted plus the last)."""
    k = len(draft_tokens)
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, i
    return emitted, k - 1


@mutant(3, "verify_block", MUTANTS)
def block_bonus_from_wrong_row(draft_tokens, p_rows, q_rows, rng):
    """Draws the bonus token from p_rows[k - 1] (the last draft's row) instead of p_rows[k]."""
    k = len(draft_tokens)
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, i
    emitted.append(sample_from(p_rows[k - 1], rng))
    return emitted, k


@mutant(3, "verify_block", MUTANTS)
def block_off_by_one(draft_tokens, p_rows, q_rows, rng):
    """Compares draft i with the target row i + 1 (one position late) instead of row i."""
    k = len(draft_tokens)
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if q_rows[i][x] > 0 and rng.random() < acceptance_prob(p_rows[i + 1], q_rows[i], x):
            emitted.append(x)
            continue
        if np.maximum(p_rows[i + 1] - q_rows[i], 0).sum() > 1e-12:
            emitted.append(sample_from(residual_distribution(p_rows[i + 1], q_rows[i]), rng))
        else:
            emitted.append(sample_from(p_rows[i + 1], rng))
        return emitted, i
    emitted.append(sample_from(p_rows[k], rng))
    return emitted, k


@mutant(3, "verify_block", MUTANTS)
def block_counts_correction_as_accepted(draft_tokens, p_rows, q_rows, rng):
    """Reports the correction token as accepted: n_accepted = number of emitted tokens."""
    k = len(draft_tokens)
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, len(emitted)
    emitted.append(sample_from(p_rows[k], rng))
    return emitted, min(len(emitted), k)


# ----------------------------------------------------------------------------- part 4
@mutant(4, "estimate_alpha", MUTANTS)
def alpha_naive_per_block(n_accepted, k):
    """Averages n/k over blocks: counts never-verified drafts as rejections (biased low)."""
    n = np.asarray(n_accepted)
    if n.ndim != 1 or n.size == 0:
        raise ValueError("empty logs")
    k = np.broadcast_to(np.asarray(k), n.shape)
    if np.any(k < 1) or np.any(n < 0) or np.any(n > k):
        raise ValueError("bad logs")
    return float(np.mean(n / k))


@mutant(4, "estimate_alpha", MUTANTS)
def alpha_counts_bonus_as_verified(n_accepted, k):
    """Counts n + 1 verified drafts in every block, also when all k were accepted."""
    n = np.asarray(n_accepted)
    if n.ndim != 1 or n.size == 0:
        raise ValueError("empty logs")
    k = np.broadcast_to(np.asarray(k), n.shape)
    if np.any(k < 1) or np.any(n < 0) or np.any(n > k):
        raise ValueError("bad logs")
    return float(n.sum() / (n + 1).sum())


# ----------------------------------------------------------------------------- part 5
@mutant(5, "speculative_sample_batch", MUTANTS)
def batch_cumsum_wrong_axis(p, q, rng):
    """Builds the CDFs with np.cumsum along the batch axis instead of the vocabulary axis."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    batch, vocab = p.shape
    rows = np.arange(batch)

    def inverse_cdf(probs):
        cdf = np.cumsum(probs, axis=0)
        u = rng.random(len(probs))[:, None] * cdf[:, -1:]
        return np.minimum((cdf <= u).sum(axis=1), vocab - 1)

    x = inverse_cdf(q)
    accept = rng.random(batch) * q[rows, x] < p[rows, x]
    out = x.copy()
    rejected = np.flatnonzero(~accept)
    if rejected.size:
        out[rejected] = inverse_cdf(np.maximum(p[rejected] - q[rejected], 0.0))
    return out


@mutant(5, "speculative_sample_batch", MUTANTS)
def batch_residual_normalised_over_batch(p, q, rng):
    """Normalises the residual by its total over the whole batch instead of per row."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    batch, vocab = p.shape
    rows = np.arange(batch)
    cdf = np.cumsum(q, axis=1)
    x = np.minimum((cdf <= rng.random(batch)[:, None]).sum(axis=1), vocab - 1)
    accept = rng.random(batch) * q[rows, x] < p[rows, x]
    resid = np.maximum(p - q, 0.0)
    resid = resid / resid.sum()
    rcdf = np.cumsum(resid, axis=1)
    y = np.minimum((rcdf <= rng.random(batch)[:, None]).sum(axis=1), vocab - 1)
    return np.where(accept, x, y)


@mutant(5, "speculative_sample_batch", MUTANTS)
def batch_ratio_from_first_row(p, q, rng):
    """Takes the acceptance ratio p(x)/q(x) from row 0 for every row (an indexing slip)."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.ndim != 2 or p.shape != q.shape:  # the reference's input checks, kept: the slip is the ratio only
        raise ValueError(f"p and q must both have shape (B, V), got {p.shape} and {q.shape}")
    for name, m in (("p", p), ("q", q)):
        if not np.all(np.isfinite(m)) or np.any(m < 0) or np.any(np.abs(m.sum(axis=1) - 1) > TOL):
            raise ValueError(f"every row of {name} must be a probability vector")
    batch, vocab = p.shape
    cdf = np.cumsum(q, axis=1)
    x = np.minimum((cdf <= rng.random(batch)[:, None]).sum(axis=1), vocab - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        accept = rng.random(batch) < p[0, x] / q[0, x]
    resid = np.maximum(p - q, 0.0)
    mass = resid.sum(axis=1, keepdims=True)
    rcdf = np.cumsum(resid / np.where(mass > 0, mass, 1.0), axis=1)
    y = np.minimum((rcdf <= rng.random(batch)[:, None]).sum(axis=1), vocab - 1)
    return np.where(accept, x, y)


# ----------------------------------------------------------------------------- issue 14: near the edge of eps
# Wrong implementations a student could well hand in, off by a small total variation, right except on
# rare events, or right in every marginal but not in the joint law. `python -m autograder.audit.power lab1`
# prints how likely each is caught; tests/test_lab1_checks.py states their output TV against the eps of a case.
@mutant(2, "speculative_sample", MUTANTS)
def sampler_smoothed_ratio(p, q, rng):
    """Adds 0.02 to q(x) in the ratio 'to avoid dividing by zero': acceptance slightly too low."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    x = sample_from(q, rng)
    if rng.random() < min(1.0, p[x] / (q[x] + 0.02)):
        return x
    return sample_from(residual_distribution(p, q), rng)


@mutant(2, "speculative_sample", MUTANTS)
def sampler_rare_residual_shortcut(p, q, rng):
    """When the residual holds under 10% of the mass (a rare rejection), returns its most likely token."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    x = sample_from(q, rng)
    if rng.random() < acceptance_prob(p, q, x):
        return x
    resid = residual_distribution(p, q)
    if np.maximum(p - q, 0.0).sum() < 0.1:
        return int(np.argmax(resid))
    return sample_from(resid, rng)


@mutant(2, "speculative_sample", MUTANTS)
def sampler_one_uniform(p, q, rng):
    """Uses one uniform both to draft (inverse CDF of q) and to accept: the test is not independent of x."""
    q = check_distribution(q, "q")
    p = check_distribution(p, "p", size=q.size)
    u = rng.random()
    x = int(min(np.searchsorted(np.cumsum(q), u, side="right"), len(q) - 1))
    if u < acceptance_prob(p, q, x):
        return x
    return sample_from(residual_distribution(p, q), rng)


@mutant(3, "verify_block", MUTANTS)
def block_one_uniform_per_block(draft_tokens, p_rows, q_rows, rng):
    """Draws one uniform per block and compares it at every position: acceptances are dependent."""
    draft_tokens = np.asarray(draft_tokens)
    k = len(draft_tokens)
    if k < 1:
        raise ValueError("k >= 1")
    if np.shape(p_rows) != (k + 1, np.shape(q_rows)[1]) or np.shape(q_rows)[0] != k:
        raise ValueError("shapes")
    u = rng.random()
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if u < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, i
    emitted.append(sample_from(check_distribution(p_rows[k], "p_rows[k]"), rng))
    return emitted, k


@mutant(3, "verify_block", MUTANTS)
def block_bonus_reuses_last_uniform(draft_tokens, p_rows, q_rows, rng):
    """Draws the bonus token by inverting p_rows[k]'s CDF at the uniform of the last acceptance test."""
    draft_tokens = np.asarray(draft_tokens)
    k = len(draft_tokens)
    if k < 1:
        raise ValueError("k >= 1")
    if np.shape(p_rows) != (k + 1, np.shape(q_rows)[1]) or np.shape(q_rows)[0] != k:
        raise ValueError("shapes")
    emitted = []
    u = 0.0
    for i in range(k):
        x = int(draft_tokens[i])
        u = rng.random()
        if u < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, i
    last = check_distribution(p_rows[k], "p_rows[k]")
    emitted.append(int(min(np.searchsorted(np.cumsum(last), u, side="right"), len(last) - 1)))
    return emitted, k


@mutant(3, "verify_block", MUTANTS)
def block_residual_from_first_row(draft_tokens, p_rows, q_rows, rng):
    """After a rejection at position i, resamples from the residual of row 0 instead of row i."""
    draft_tokens = np.asarray(draft_tokens)
    k = len(draft_tokens)
    if k < 1:
        raise ValueError("k >= 1")
    if np.shape(p_rows) != (k + 1, np.shape(q_rows)[1]) or np.shape(q_rows)[0] != k:
        raise ValueError("shapes")
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        if np.maximum(p_rows[0] - q_rows[0], 0).sum() > 1e-12:
            emitted.append(sample_from(residual_distribution(p_rows[0], q_rows[0]), rng))
        else:
            emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, i
    emitted.append(sample_from(check_distribution(p_rows[k], "p_rows[k]"), rng))
    return emitted, k


@mutant(3, "verify_block", MUTANTS)
def block_later_positions_discounted(draft_tokens, p_rows, q_rows, rng):
    """Accepts draft i with probability 0.9**i * min(1, p/q) ("later drafts are less reliable")."""
    draft_tokens = np.asarray(draft_tokens)
    k = len(draft_tokens)
    if k < 1:
        raise ValueError("k >= 1")
    if np.shape(p_rows) != (k + 1, np.shape(q_rows)[1]) or np.shape(q_rows)[0] != k:
        raise ValueError("shapes")
    emitted = []
    for i in range(k):
        x = int(draft_tokens[i])
        if rng.random() < 0.9**i * acceptance_prob(p_rows[i], q_rows[i], x):
            emitted.append(x)
            continue
        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
        return emitted, i
    emitted.append(sample_from(check_distribution(p_rows[k], "p_rows[k]"), rng))
    return emitted, k


@mutant(5, "speculative_sample_batch", MUTANTS)
def batch_cdf_of_first_row(p, q, rng):
    """Builds the draft's CDF from row 0 only: right when every row has the same law."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.ndim != 2 or p.shape != q.shape:
        raise ValueError("shapes")
    if np.any(p < 0) or np.any(np.abs(p.sum(axis=1) - 1) > TOL) or np.any(np.abs(q.sum(axis=1) - 1) > TOL):
        raise ValueError("rows")
    batch, vocab = p.shape
    rows = np.arange(batch)
    x = np.minimum(np.searchsorted(np.cumsum(q[0]), rng.random(batch), side="right"), vocab - 1)
    accept = rng.random(batch) * q[rows, x] < p[rows, x]
    resid = np.maximum(p - q, 0.0)
    mass = resid.sum(axis=1, keepdims=True)
    rcdf = np.cumsum(resid / np.where(mass > 0, mass, 1.0), axis=1)
    y = np.minimum((rcdf <= rng.random(batch)[:, None]).sum(axis=1), vocab - 1)
    return np.where(accept, x, y)


@mutant(5, "speculative_sample_batch", MUTANTS)
def batch_neighbours_share_uniforms(p, q, rng):
    """Draws one set of uniforms per pair of rows (to save random numbers): neighbouring rows are dependent."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.ndim != 2 or p.shape != q.shape:
        raise ValueError("shapes")
    if np.any(p < 0) or np.any(np.abs(p.sum(axis=1) - 1) > TOL) or np.any(np.abs(q.sum(axis=1) - 1) > TOL):
        raise ValueError("rows")
    batch, vocab = p.shape
    rows = np.arange(batch)
    half = (batch + 1) // 2
    u = np.repeat(rng.random((3, half)), 2, axis=1)[:, :batch]
    x = np.minimum((np.cumsum(q, axis=1) <= u[0][:, None]).sum(axis=1), vocab - 1)
    accept = u[1] * q[rows, x] < p[rows, x]
    resid = np.maximum(p - q, 0.0)
    mass = resid.sum(axis=1, keepdims=True)
    rcdf = np.cumsum(resid / np.where(mass > 0, mass, 1.0), axis=1)
    y = np.minimum((rcdf <= u[2][:, None]).sum(axis=1), vocab - 1)
    return np.where(accept, x, y)


@mutant(5, "speculative_sample_batch", MUTANTS)
def batch_accept_with_le(p, q, rng):
    """Accepts when u * q(x) <= 1.05 * p(x): a 5% slack 'for float rounding' biases every row a little."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.ndim != 2 or p.shape != q.shape:
        raise ValueError("shapes")
    if np.any(p < 0) or np.any(np.abs(p.sum(axis=1) - 1) > TOL) or np.any(np.abs(q.sum(axis=1) - 1) > TOL):
        raise ValueError("rows")
    batch, vocab = p.shape
    rows = np.arange(batch)
    x = np.minimum((np.cumsum(q, axis=1) <= rng.random(batch)[:, None]).sum(axis=1), vocab - 1)
    accept = rng.random(batch) * q[rows, x] <= 1.05 * p[rows, x]
    resid = np.maximum(p - q, 0.0)
    mass = resid.sum(axis=1, keepdims=True)
    rcdf = np.cumsum(resid / np.where(mass > 0, mass, 1.0), axis=1)
    y = np.minimum((rcdf <= rng.random(batch)[:, None]).sum(axis=1), vocab - 1)
    return np.where(accept, x, y)
