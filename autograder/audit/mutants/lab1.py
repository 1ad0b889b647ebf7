"""Catalog of known-wrong Lab 1 implementations; each must lose points in its part.

Each mutant is a reference function of solutions/lab1/lab1.md plus the edit that makes it wrong
(`autograder.audit.mutants`: "-" lines of the reference, "+" lines that replace them); its doc says what
is wrong. `python -m autograder.audit.power lab1` computes the probability that the hidden tests catch
each of them. Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

from autograder.audit.mutants import Mutant, catalog

# ----------------------------------------------------------------------------- shared edits
# Not bugs: the way some mutants were first written out in full, kept so that every mutant still
# behaves as it always did (same outputs, same random numbers drawn, same exception types).

# The samplers check p and q before drafting; the reference leaves that to acceptance_prob.
CHECK_BEFORE_DRAFT = """
-    q = np.asarray(q, dtype=float)
+    q = check_distribution(q, "q")
+    p = check_distribution(p, "p", size=q.size)
"""

# The whole body of the one-position sampler, for the mutants that replace all of it.
WHOLE_SAMPLER = """
-    q = np.asarray(q, dtype=float)
-    x = sample_from(q, rng) if draft is None else draft
-    if rng.random() < acceptance_prob(p, q, x):  # checks p and q before they are used
-        return x
-    return sample_from(residual_distribution(p, q), rng)
"""

def exact_only_when(imports: str, setup: str | None, condition: str) -> str:
    """The one-position sampler's whole body replaced by: check p and q, then speculative sampling when `condition`
    holds, else p sampled directly (q unused): exact in law always, the algorithm only when the condition holds."""
    return WHOLE_SAMPLER + "".join(f"+    {line}\n" for line in [
        imports, 'q = check_distribution(q, "q")', 'p = check_distribution(p, "p", size=q.size)',
        *([setup] if setup else []), f"if not ({condition}):", "    return sample_from(p, rng)",
        "x = sample_from(q, rng) if draft is None else draft", "if rng.random() < acceptance_prob(p, q, x):",
        "    return x", "return sample_from(residual_distribution(p, q), rng)"])


# The verifiers take the rows as they are given, and then either check nothing (not even the
# bonus row) or check the shapes their own shorter way.
_ROWS_AS_GIVEN = """
-    p_rows, q_rows = np.asarray(p_rows, dtype=float), np.asarray(q_rows, dtype=float)
-    k = draft_tokens.shape[0]
+    k = len(draft_tokens)
"""
NO_BLOCK_CHECKS = _ROWS_AS_GIVEN + """
-    if k < 1:
-        raise ValueError("verify_block needs at least one drafted token (k >= 1)")
-    if draft_tokens.ndim != 1 or p_rows.ndim != 2 or q_rows.shape != (k, p_rows.shape[1]) or p_rows.shape[0] != k + 1:
-        raise ValueError(f"shapes {draft_tokens.shape}, {p_rows.shape}, {q_rows.shape}: expected (k,), (k+1, V), (k, V)")

-    emitted.append(sample_from(check_distribution(p_rows[k], "p_rows[k]"), rng))
+    emitted.append(sample_from(p_rows[k], rng))
"""
SHORT_BLOCK_CHECKS = _ROWS_AS_GIVEN + """
-    if draft_tokens.ndim != 1 or p_rows.ndim != 2 or q_rows.shape != (k, p_rows.shape[1]) or p_rows.shape[0] != k + 1:
-        raise ValueError(f"shapes {draft_tokens.shape}, {p_rows.shape}, {q_rows.shape}: expected (k,), (k+1, V), (k, V)")
+    if np.shape(p_rows) != (k + 1, np.shape(q_rows)[1]) or np.shape(q_rows)[0] != k:
+        raise ValueError("shapes")
"""

# The batch samplers check nothing, or only that p is non-negative and that rows sum to 1.
_ROW_CHECKS = """
-    for name, m in (("p", p), ("q", q)):
-        if not np.all(np.isfinite(m)) or np.any(m < 0) or np.any(np.abs(m.sum(axis=1) - 1) > TOL):
-            raise ValueError(f"every row of {name} must be a probability vector")
"""
NO_BATCH_CHECKS = """
-    if p.ndim != 2 or p.shape != q.shape:
-        raise ValueError(f"p and q must both have shape (B, V), got {p.shape} and {q.shape}")
""" + _ROW_CHECKS
LOOSE_BATCH_CHECKS = _ROW_CHECKS + """\
+    if np.any(p < 0) or np.any(np.abs(p.sum(axis=1) - 1) > TOL) or np.any(np.abs(q.sum(axis=1) - 1) > TOL):
+        raise ValueError("rows")
"""
# Most batch samplers draw a residual token for every row, accepted or not, inverting the CDFs of
# normalised rows with one uniform per row: the reference's law, other random numbers.
EVERY_ROW_RESIDUAL = """
-        u = rng.random(len(probs))[:, None] * cdf[:, -1:]
+        u = rng.random(batch)[:, None]

-    out = x.copy()
-    rejected = np.flatnonzero(~accept)
-    if rejected.size:
-        resid = np.maximum(p[rejected] - q[rejected], 0.0)  # each rejected row has residual mass > 0
-        out[rejected] = inverse_cdf(resid)
-    return out
+    resid = np.maximum(p - q, 0.0)
+    mass = resid.sum(axis=1, keepdims=True)
+    y = inverse_cdf(resid / np.where(mass > 0, mass, 1.0))
+    return np.where(accept, x, y)
"""

MUTANTS: list[Mutant] = catalog("lab1", [
    # ------------------------------------------------------------------------- part 1
    Mutant("accept_ratio_inverted", 1, "acceptance_prob",
           "Acceptance probability min(1, q/p) instead of min(1, p/q).", """
-    return float(min(1.0, p[x] / q[x]))
+    return float(min(1.0, q[x] / p[x])) if p[x] > 0 else 1.0
"""),
    Mutant("accept_not_clipped", 1, "acceptance_prob",
           "Acceptance probability p/q without the min(1, .): values above 1.", """
-    return float(min(1.0, p[x] / q[x]))
+    return float(p[x] / q[x])
"""),
    *(Mutant(name, 1, "residual_distribution", doc, f"-    return diff / mass\n+    return {wrong}\n")
      for name, wrong, doc in [
          ("residual_unnormalised", "diff", "Residual max(p - q, 0) returned without dividing by its sum."),
          ("residual_is_target", "p", "After a rejection, resamples from p itself instead of the residual."),
          ("residual_is_draft", "q", "After a rejection, resamples from q (the draft) instead of the residual.")]),
    Mutant("residual_absolute_difference", 1, "residual_distribution",
           "Residual |p - q| normalised instead of max(p - q, 0) normalised.", """
-    diff = np.maximum(p - q, 0.0)
+    diff = np.abs(p - q)
"""),
    Mutant("residual_silent_nan_when_equal", 1, "residual_distribution",
           "p == q: divides 0 by 0 and returns NaNs instead of raising a clear ValueError.", """
-    if mass <= 1e-12:
-        raise ValueError("p == q: the residual has no mass; a rejection has probability 0, so it is never needed")
-    return diff / mass
+    with np.errstate(invalid="ignore"):
+        return diff / mass
"""),
    Mutant("no_input_validation", 1, "check_distribution",
           "Converts to an array but checks nothing: invalid inputs give silent wrong answers.", """
-    v = np.asarray(v, dtype=float)
+    return np.asarray(v, dtype=float)
"""),
    Mutant("validation_clips_negatives", 1, "check_distribution",
           "Repairs instead of refusing: negative entries are clipped to 0, and the vector is kept when its sum "
           "is still within TOL of 1.", """
-    v = np.asarray(v, dtype=float)
+    v = np.clip(np.asarray(v, dtype=float), 0.0, None)
"""),
    # ------------------------------------------------------------------------- part 2
    Mutant("sampler_ratio_inverted", 2, "speculative_sample",
           "Accepts when u < q(x)/p(x) instead of u < p(x)/q(x).", CHECK_BEFORE_DRAFT + """
-    if rng.random() < acceptance_prob(p, q, x):  # checks p and q before they are used
+    if rng.random() * p[x] < q[x]:
"""),
    Mutant("sampler_always_accepts", 2, "speculative_sample",
           "Returns the drafted token without the accept/reject test: samples q, not p.", WHOLE_SAMPLER + """\
+    q = check_distribution(q, "q")
+    return sample_from(q, rng) if draft is None else draft
"""),
    Mutant("sampler_drafts_argmax", 2, "speculative_sample",
           "Drafts the most likely token of q (greedy) but accepts with min(1, p/q) as if x ~ q.", CHECK_BEFORE_DRAFT + """
-    x = sample_from(q, rng) if draft is None else draft
+    x = int(np.argmax(q)) if draft is None else draft
"""),
    Mutant("sampler_draft_temperature_mismatch", 2, "speculative_sample",
           "Draws the draft token from q at temperature 0.5 (q**2, renormalised) but uses q in the ratio.",
           CHECK_BEFORE_DRAFT + """
-    x = sample_from(q, rng) if draft is None else draft
+    x = sample_from(q**2 / np.sum(q**2), rng) if draft is None else draft
"""),
    Mutant("sampler_reuses_uniform", 2, "speculative_sample",
           "Samples the residual by inverting its CDF at the same uniform u that was just rejected.",
           CHECK_BEFORE_DRAFT + """
-    if rng.random() < acceptance_prob(p, q, x):  # checks p and q before they are used
-        return x
-    return sample_from(residual_distribution(p, q), rng)
+    u = rng.random()
+    if u < acceptance_prob(p, q, x):
+        return x
+    return int(min(np.searchsorted(np.cumsum(residual_distribution(p, q)), u, side="right"), len(p) - 1))
"""),
    Mutant("sampler_eager_residual", 2, "speculative_sample",
           "Computes the residual before the accept/reject test, so it crashes whenever p == q.",
           CHECK_BEFORE_DRAFT + """
-    x = sample_from(q, rng) if draft is None else draft
+    resid = residual_distribution(p, q)
+    x = sample_from(q, rng) if draft is None else draft

-    return sample_from(residual_distribution(p, q), rng)
+    return sample_from(resid, rng)
"""),
    # ------------------------------------------------------------------------- part 3
    Mutant("block_continues_after_rejection", 3, "verify_block",
           "After a rejection, emits the residual token and goes on verifying the later drafts.", NO_BLOCK_CHECKS + """
-    emitted = []
+    emitted, accepted = [], 0

-            emitted.append(x)
-            continue
-        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
-        return emitted, i
-    emitted.append(sample_from(p_rows[k], rng))
-    return emitted, k
+            emitted.append(x)
+            accepted += 1
+        else:
+            emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
+    if accepted == k:
+        emitted.append(sample_from(p_rows[k], rng))
+    return emitted[: accepted + 1], accepted
"""),
    Mutant("block_no_bonus", 3, "verify_block",
           "When all k drafts are accepted, emits no bonus token (and reports k - 1 accepted plus the last).",
           NO_BLOCK_CHECKS + """
-    emitted.append(sample_from(p_rows[k], rng))
-    return emitted, k
+    return emitted, k - 1
"""),
    Mutant("block_bonus_from_wrong_row", 3, "verify_block",
           "Draws the bonus token from p_rows[k - 1] (the last draft's row) instead of p_rows[k].", NO_BLOCK_CHECKS + """
-    emitted.append(sample_from(p_rows[k], rng))
+    emitted.append(sample_from(p_rows[k - 1], rng))
"""),
    Mutant("block_off_by_one", 3, "verify_block",
           "Compares draft i with the target row i + 1 (one position late) instead of row i.", NO_BLOCK_CHECKS + """
-        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
+        if q_rows[i][x] > 0 and rng.random() < acceptance_prob(p_rows[i + 1], q_rows[i], x):

-        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
+        if np.maximum(p_rows[i + 1] - q_rows[i], 0).sum() > 1e-12:
+            emitted.append(sample_from(residual_distribution(p_rows[i + 1], q_rows[i]), rng))
+        else:
+            emitted.append(sample_from(p_rows[i + 1], rng))
"""),
    Mutant("block_counts_correction_as_accepted", 3, "verify_block",
           "Reports the correction token as accepted: n_accepted = number of emitted tokens.", NO_BLOCK_CHECKS + """
-        return emitted, i
+        return emitted, len(emitted)
"""),
    # ------------------------------------------------------------------------- part 4
    Mutant("alpha_naive_per_block", 4, "estimate_alpha",
           "Averages n/k over blocks: counts never-verified drafts as rejections (biased low).", """
-    verified = np.minimum(n + 1, k)
-    return float(n.sum() / verified.sum())
+    return float(np.mean(n / k))
"""),
    Mutant("alpha_counts_bonus_as_verified", 4, "estimate_alpha",
           "Counts n + 1 verified drafts in every block, also when all k were accepted.", """
-    verified = np.minimum(n + 1, k)
+    verified = n + 1
"""),
    # ------------------------------------------------------------------------- part 5
    Mutant("batch_cumsum_wrong_axis", 5, "speculative_sample_batch",
           "Builds the CDFs with np.cumsum along the batch axis instead of the vocabulary axis.", NO_BATCH_CHECKS + """
-        cdf = np.cumsum(probs, axis=1)
+        cdf = np.cumsum(probs, axis=0)
"""),
    Mutant("batch_residual_normalised_over_batch", 5, "speculative_sample_batch",
           "Normalises the residual by its total over the whole batch instead of per row.",
           NO_BATCH_CHECKS + EVERY_ROW_RESIDUAL + """
-    y = inverse_cdf(resid / np.where(mass > 0, mass, 1.0))
+    y = inverse_cdf(resid / resid.sum())
"""),
    Mutant("batch_ratio_from_first_row", 5, "speculative_sample_batch",
           "Takes the acceptance ratio p(x)/q(x) from row 0 for every row (an indexing slip).", EVERY_ROW_RESIDUAL + """
-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
+    with np.errstate(divide="ignore", invalid="ignore"):
+        accept = rng.random(batch) < p[0, x] / q[0, x]
"""),
    # ------------------------------------------------------------------------- near the edge of eps
    # Wrong implementations a student could well hand in, off by a small total variation, right except on
    # rare events, or right in every marginal but not in the joint law. `python -m autograder.audit.power lab1`
    # prints how likely each is caught; tests/autograder/checks/test_lab1.py states their output TV against the eps of a case.
    Mutant("sampler_smoothed_ratio", 2, "speculative_sample",
           "Adds 0.02 to q(x) in the ratio 'to avoid dividing by zero': acceptance slightly too low.",
           CHECK_BEFORE_DRAFT + """
-    if rng.random() < acceptance_prob(p, q, x):  # checks p and q before they are used
+    if rng.random() < min(1.0, p[x] / (q[x] + 0.02)):
"""),
    Mutant("sampler_rare_residual_shortcut", 2, "speculative_sample",
           "When the residual holds under 10% of the mass (a rare rejection), returns its most likely token.",
           CHECK_BEFORE_DRAFT + """
-    return sample_from(residual_distribution(p, q), rng)
+    resid = residual_distribution(p, q)
+    if np.maximum(p - q, 0.0).sum() < 0.1:
+        return int(np.argmax(resid))
+    return sample_from(resid, rng)
"""),
    Mutant("sampler_one_uniform", 2, "speculative_sample",
           "Uses one uniform both to draft (inverse CDF of q) and to accept: the test is not independent of x.",
           CHECK_BEFORE_DRAFT + """
-    x = sample_from(q, rng) if draft is None else draft
-    if rng.random() < acceptance_prob(p, q, x):  # checks p and q before they are used
+    u = rng.random()
+    x = int(min(np.searchsorted(np.cumsum(q), u, side="right"), len(q) - 1)) if draft is None else draft
+    if u < acceptance_prob(p, q, x):
"""),
    Mutant("block_one_uniform_per_block", 3, "verify_block",
           "Draws one uniform per block and compares it at every position: acceptances are dependent.",
           SHORT_BLOCK_CHECKS + """
-    emitted = []
+    u = rng.random()
+    emitted = []

-        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
+        if u < acceptance_prob(p_rows[i], q_rows[i], x):
"""),
    Mutant("block_bonus_reuses_last_uniform", 3, "verify_block",
           "Draws the bonus token by inverting p_rows[k]'s CDF at the uniform of the last acceptance test.",
           SHORT_BLOCK_CHECKS + """
-    emitted = []
+    emitted, u = [], 0.0

-        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
+        u = rng.random()
+        if u < acceptance_prob(p_rows[i], q_rows[i], x):

-    emitted.append(sample_from(check_distribution(p_rows[k], "p_rows[k]"), rng))
+    last = check_distribution(p_rows[k], "p_rows[k]")
+    emitted.append(int(min(np.searchsorted(np.cumsum(last), u, side="right"), len(last) - 1)))
"""),
    Mutant("block_residual_from_first_row", 3, "verify_block",
           "After a rejection at position i, resamples from the residual of row 0 instead of row i.",
           SHORT_BLOCK_CHECKS + """
-        emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
+        if np.maximum(p_rows[0] - q_rows[0], 0).sum() > 1e-12:
+            emitted.append(sample_from(residual_distribution(p_rows[0], q_rows[0]), rng))
+        else:
+            emitted.append(sample_from(residual_distribution(p_rows[i], q_rows[i]), rng))
"""),
    Mutant("block_later_positions_discounted", 3, "verify_block",
           'Accepts draft i with probability 0.9**i * min(1, p/q) ("later drafts are less reliable").',
           SHORT_BLOCK_CHECKS + """
-        if rng.random() < acceptance_prob(p_rows[i], q_rows[i], x):
+        if rng.random() < 0.9**i * acceptance_prob(p_rows[i], q_rows[i], x):
"""),
    Mutant("batch_cdf_of_first_row", 5, "speculative_sample_batch",
           "Builds the draft's CDF from row 0 only: right when every row has the same law.",
           LOOSE_BATCH_CHECKS + EVERY_ROW_RESIDUAL + """
-    x = inverse_cdf(q) if drafts is None else np.asarray(drafts)  # (B,) drafts
+    x = (np.minimum(np.searchsorted(np.cumsum(q[0]), rng.random(batch), side="right"), vocab - 1)
+         if drafts is None else np.asarray(drafts))
"""),
    Mutant("batch_neighbours_share_uniforms", 5, "speculative_sample_batch",
           "Draws one set of uniforms per pair of rows (to save random numbers): neighbouring rows are dependent.",
           LOOSE_BATCH_CHECKS + EVERY_ROW_RESIDUAL + """
-    rows = np.arange(batch)
+    rows = np.arange(batch)
+    uniforms = iter(np.repeat(rng.random((3, (batch + 1) // 2)), 2, axis=1)[:, :batch])

-        u = rng.random(batch)[:, None]
+        u = next(uniforms)[:, None]

-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
+    accept = next(uniforms) * q[rows, x] < p[rows, x]
"""),
    Mutant("batch_accept_with_le", 5, "speculative_sample_batch",
           "Accepts when u * q(x) <= 1.05 * p(x): a 5% slack 'for float rounding' biases every row a little.",
           LOOSE_BATCH_CHECKS + EVERY_ROW_RESIDUAL + """
-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
+    accept = rng.random(batch) * q[rows, x] <= 1.05 * p[rows, x]
"""),
    # ------------------------------------------------------------------------- the right law, not the algorithm
    # Samplers whose output follows p exactly but that do not run speculative sampling: only the coupling cases
    # (the grader's drafts given, the joint law of (draft, emitted token) compared) can tell them apart.
    Mutant("sampler_ignores_q", 2, "speculative_sample",
           "Samples p directly: the right law, but no draft is ever verified (q is only checked).",
           WHOLE_SAMPLER + """\
+    p = check_distribution(p, "p")
+    check_distribution(q, "q", size=p.size)
+    return sample_from(p, rng)
"""),
    Mutant("sampler_keyed_to_fixed_pairs", 2, "speculative_sample",
           "Speculative sampling only on the pairs written in the grader's check files (read inside the sandbox); "
           "on any other pair it samples p directly. Caught only when the grading run relabels the pairs.",
           exact_only_when("from autograder.checks.lab1_cases import fixed_pairs",
                           'known = speculative_sample.__dict__.setdefault("known", list(fixed_pairs().values()))',
                           "any(np.array_equal(p, a) and np.array_equal(q, b) for a, b in known)")),
    Mutant("sampler_exact_only_when_graded", 2, "speculative_sample",
           "Speculative sampling only when NBGRADER_EXECUTION is set (the variable nbgrader sets); otherwise it "
           "samples p directly. Caught because the grader's verdict runs Lab 1 without that variable.",
           exact_only_when("import os", None, 'os.environ.get("NBGRADER_EXECUTION") is not None')),
    Mutant("sampler_replays_stream", 2, "speculative_sample",
           "Draws a table of 40,000 triples of uniforms from each new generator and replays it: every draw is exact, "
           "but the stream repeats every 40,000 calls.", WHOLE_SAMPLER + """\
+    table = speculative_sample.__dict__
+    if table.get("rng") is not rng:  # a new generator: a new table (generators seeded alike agree)
+        table.update(rng=rng, u=rng.random((40000, 3)), i=0)
+    u = table["u"][table["i"] % 40000]
+    table["i"] += 1
+    q = check_distribution(q, "q")
+    p = check_distribution(p, "p", size=q.size)
+    x = int(min(np.searchsorted(np.cumsum(q), u[0], side="right"), q.size - 1)) if draft is None else draft
+    if u[1] < acceptance_prob(p, q, x):
+        return x
+    resid = np.cumsum(residual_distribution(p, q))
+    return int(min(np.searchsorted(resid, u[2] * resid[-1], side="right"), p.size - 1))
"""),
    Mutant("sampler_ignores_draft", 2, "speculative_sample",
           "Draws a draft of its own even when the draft model's token is given: the right law, another coupling.",
           """
-    x = sample_from(q, rng) if draft is None else draft
+    x = sample_from(q, rng)
"""),
    Mutant("sampler_half_acceptance", 2, "speculative_sample",
           "Accepts with half of min(1, p/q) and resamples from p - min(p, q) / 2: the right law, half the acceptance.",
           """
-    if rng.random() < acceptance_prob(p, q, x):  # checks p and q before they are used
-        return x
-    return sample_from(residual_distribution(p, q), rng)
+    if rng.random() < 0.5 * acceptance_prob(p, q, x):
+        return x
+    p = check_distribution(p, "p")
+    rest = p - 0.5 * np.minimum(p, q)
+    return sample_from(rest / rest.sum(), rng)
"""),
    Mutant("batch_rows_tied_far", 5, "speculative_sample_batch",
           "Draws random numbers for the first half of the rows only and reuses them for the second half: every row "
           "is exact, but row b and row b + B/2 are tied.", """
-    def inverse_cdf(probs: np.ndarray) -> np.ndarray:  # (n, V) -> (n,) one draw per row
-        cdf = np.cumsum(probs, axis=1)
-        u = rng.random(len(probs))[:, None] * cdf[:, -1:]
-        return np.minimum((cdf <= u).sum(axis=1), vocab - 1)
+    half = rng.random((3, (batch + 1) // 2))
+    uniforms = np.concatenate([half, half], axis=1)[:, :batch]  # row b + B/2 reuses row b's numbers
+
+    def inverse_cdf(probs: np.ndarray, u: np.ndarray) -> np.ndarray:  # (n, V), (n,) -> (n,) one draw per row
+        cdf = np.cumsum(probs, axis=1)
+        return np.minimum((cdf <= u[:, None] * cdf[:, -1:]).sum(axis=1), vocab - 1)

-    x = inverse_cdf(q) if drafts is None else np.asarray(drafts)  # (B,) drafts
-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
+    x = inverse_cdf(q, uniforms[0]) if drafts is None else np.asarray(drafts)
+    accept = uniforms[1] * q[rows, x] < p[rows, x]

-        out[rejected] = inverse_cdf(resid)
+        out[rejected] = inverse_cdf(resid, uniforms[2, rejected])
"""),
    Mutant("batch_rows_mirrored", 5, "speculative_sample_batch",
           "Row b reuses the random numbers of row B - 1 - b (a mirror): every row is exact, every lag holds one "
           "tied pair at most, but rows b and B - 1 - b emit the same token whenever their laws agree.", """
-    def inverse_cdf(probs: np.ndarray) -> np.ndarray:  # (n, V) -> (n,) one draw per row
-        cdf = np.cumsum(probs, axis=1)
-        u = rng.random(len(probs))[:, None] * cdf[:, -1:]
-        return np.minimum((cdf <= u).sum(axis=1), vocab - 1)
+    own = rng.random((3, batch))
+    uniforms = np.where(np.arange(batch) < batch - 1 - np.arange(batch), own, own[:, ::-1])  # the mirror's numbers
+
+    def inverse_cdf(probs: np.ndarray, u: np.ndarray) -> np.ndarray:  # (n, V), (n,) -> (n,) one draw per row
+        cdf = np.cumsum(probs, axis=1)
+        return np.minimum((cdf <= u[:, None] * cdf[:, -1:]).sum(axis=1), vocab - 1)

-    x = inverse_cdf(q) if drafts is None else np.asarray(drafts)  # (B,) drafts
-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
+    x = inverse_cdf(q, uniforms[0]) if drafts is None else np.asarray(drafts)
+    accept = uniforms[1] * q[rows, x] < p[rows, x]

-        out[rejected] = inverse_cdf(resid)
+        out[rejected] = inverse_cdf(resid, uniforms[2, rejected])
"""),
    Mutant("batch_rows_paired_at_random", 5, "speculative_sample_batch",
           "Pairs the rows by a permutation fixed for each batch size (not drawn from rng) and gives each pair one "
           "set of random numbers: every row is exact, the pairs sit at distances that change from pair to pair.",
           """
-    def inverse_cdf(probs: np.ndarray) -> np.ndarray:  # (n, V) -> (n,) one draw per row
-        cdf = np.cumsum(probs, axis=1)
-        u = rng.random(len(probs))[:, None] * cdf[:, -1:]
-        return np.minimum((cdf <= u).sum(axis=1), vocab - 1)
+    order = np.random.default_rng(batch).permutation(batch)  # the same pairing in every call of this size
+    partner = np.empty(batch, dtype=np.int64)
+    partner[order[0::2][:batch // 2]], partner[order[1::2]] = order[1::2], order[0::2][:batch // 2]
+    if batch % 2:
+        partner[order[-1]] = order[-1]
+    own = rng.random((3, batch))
+    uniforms = own[:, np.minimum(np.arange(batch), partner)]  # a pair takes the numbers of its lower row
+
+    def inverse_cdf(probs: np.ndarray, u: np.ndarray) -> np.ndarray:  # (n, V), (n,) -> (n,) one draw per row
+        cdf = np.cumsum(probs, axis=1)
+        return np.minimum((cdf <= u[:, None] * cdf[:, -1:]).sum(axis=1), vocab - 1)

-    x = inverse_cdf(q) if drafts is None else np.asarray(drafts)  # (B,) drafts
-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
+    x = inverse_cdf(q, uniforms[0]) if drafts is None else np.asarray(drafts)
+    accept = uniforms[1] * q[rows, x] < p[rows, x]

-        out[rejected] = inverse_cdf(resid)
+        out[rejected] = inverse_cdf(resid, uniforms[2, rejected])
"""),
    Mutant("batch_ignores_q", 5, "speculative_sample_batch",
           "Samples every row of p directly (one inverse CDF per row): the right law, no draft verified.", """
-    x = inverse_cdf(q) if drafts is None else np.asarray(drafts)  # (B,) drafts
-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing
-    out = x.copy()
-    rejected = np.flatnonzero(~accept)
-    if rejected.size:
-        resid = np.maximum(p[rejected] - q[rejected], 0.0)  # each rejected row has residual mass > 0
-        out[rejected] = inverse_cdf(resid)
-    return out
+    return inverse_cdf(p)
"""),
    # ------------------------------------------------------------------------- cut short on a large vocabulary
    # (issue 53): exact on every pair of at most 32 tokens, wrong where real models live
    Mutant("sampler_residual_top_entries", 2, "speculative_sample",
           "After a rejection, draws from the residual's 32 largest entries only (renormalised): exact on every "
           "vocabulary of at most 32 tokens.", """
-    return sample_from(residual_distribution(p, q), rng)
+    resid = residual_distribution(p, q)
+    top = np.argpartition(resid, -32)[-32:] if resid.size > 32 else np.arange(resid.size)  # its top 32 only
+    return int(top[sample_from(resid[top] / resid[top].sum(), rng)])
"""),
    Mutant("sampler_draft_top_entries", 2, "speculative_sample",
           "Draws its draft from q's 256 largest entries only (renormalised) and tests it with the full q: exact "
           "on every vocabulary of at most 256 tokens.", """
-    x = sample_from(q, rng) if draft is None else draft
+    top = np.argpartition(q, -256)[-256:] if q.size > 256 else np.arange(q.size)  # the draft from q's top 256
+    x = int(top[sample_from(q[top] / q[top].sum(), rng)]) if draft is None else draft
"""),
    Mutant("sampler_threshold", 2, "speculative_sample",
           "Drops every entry of p and q below 1e-5 (renormalised) before sampling: exact wherever no entry is that "
           "small, and it samples the thresholded target.", CHECK_BEFORE_DRAFT + """+    p, q = np.where(p >= 1e-5, p, 0.0), np.where(q >= 1e-5, q, 0.0)  # entries below 1e-5 dropped
+    p, q = p / p.sum(), q / q.sum()
"""),
    Mutant("sampler_top_k_before_test", 2, "speculative_sample",
           "Keeps the 50 largest entries of p and of q (a top-k, renormalised) before the test: exact on every "
           "vocabulary of at most 50 tokens, and it samples the target's top 50.", CHECK_BEFORE_DRAFT + """+    p = np.where(p >= np.partition(p, -50)[-50], p, 0.0) if p.size > 50 else p  # the 50 largest (ties kept)
+    q = np.where(q >= np.partition(q, -50)[-50], q, 0.0) if q.size > 50 else q
+    p, q = p / p.sum(), q / q.sum()
"""),
    Mutant("batch_residual_top_entries", 5, "speculative_sample_batch",
           "After a rejection, draws from each row's 32 largest residual entries only: exact on every vocabulary of "
           "at most 32 tokens.", """
-        resid = np.maximum(p[rejected] - q[rejected], 0.0)  # each rejected row has residual mass > 0
+        resid = np.maximum(p[rejected] - q[rejected], 0.0)
+        if vocab > 32:  # each row's 32 largest entries only
+            resid = np.where(resid >= np.partition(resid, -32, axis=1)[:, -32:-31], resid, 0.0)
"""),
    Mutant("batch_threshold", 5, "speculative_sample_batch",
           "Drops every entry of p and q below 1e-5 (each row renormalised) before sampling.", """
-    batch, vocab = p.shape
+    batch, vocab = p.shape
+    p, q = np.where(p >= 1e-5, p, 0.0), np.where(q >= 1e-5, q, 0.0)  # entries below 1e-5 dropped
+    p, q = p / p.sum(axis=1, keepdims=True), q / q.sum(axis=1, keepdims=True)
"""),
])
