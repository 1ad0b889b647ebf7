"""The statistical designs of Lab 1's hidden checks: the (p, q) pairs, the exact laws a correct
implementation's outputs follow (computed here by enumeration), the sample sizes, and the cases
(`stats.ExactnessCase`) that draw outcomes from a student's function.

The checks that use them, one per graded cell, are in `lab1.py`; `python -m autograder.audit.power lab1`
computes each case's false-failure bound and its power against the catalog of wrong solutions.
Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import hidden
from .calls import call_each
from .independence import check_lags, check_row_pairs, sharing_caught
from .lab1_ranks import ACCEPTED, RankCase, coupled_case, keyed_pair, law_case
from .stats import ExactnessCase, early_passes


def _dirichlet_pair(vocab: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A target p and a draft q that roughly agree, as a small model and its large one do."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, vocab)
    p = np.exp(logits - logits.max())
    q = np.exp(0.8 * logits + rng.normal(0.0, 0.7, vocab))
    return p / p.sum(), q / q.sum()

def _softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = np.exp((logits - logits.max()) / temperature)
    return z / z.sum()

def _top_k(probs: np.ndarray, k: int) -> np.ndarray:
    keep = np.zeros(probs.shape, dtype=bool)
    keep[np.argsort(-probs, kind="stable")[:k]] = True
    out = np.where(keep, probs, 0.0)
    return out / out.sum()

def _top_p(probs: np.ndarray, top_p: float) -> np.ndarray:
    order = np.argsort(-probs, kind="stable")
    before = np.cumsum(probs[order]) - probs[order]  # mass of the tokens ranked above
    keep = np.zeros(probs.shape, dtype=bool)
    keep[order[before < top_p]] = True
    out = np.where(keep, probs, 0.0)
    return out / out.sum()

def truncated_pair() -> tuple[np.ndarray, np.ndarray]:
    """Rows as a decoder feeds them: temperature 0.7, then top-3 on p and top-p 0.9 on q (zeros in both)."""
    logits = np.array([2.0, 1.6, 1.1, 0.4, 0.3, -0.5, -1.0, -2.0])
    draft_logits = np.array([1.2, 2.1, 0.2, 1.0, -0.3, 0.9, -1.2, -0.4])
    return _top_k(_softmax(logits, 0.7), 3), _top_p(_softmax(draft_logits, 0.7), 0.9)

def high_acceptance_pair() -> tuple[np.ndarray, np.ndarray]:
    """alpha >= 0.95 with the residual spread over 15 of 16 tokens: q moves 5% of p's mass onto token 0."""
    p = _softmax(np.linspace(1.5, -1.5, 16), 1.0)
    q = 0.95 * p
    q[0] += 0.05
    return p, q

def pairs(fixed: dict | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The (p, q) pairs the samplers are tested on, adversarial ones included; under a
    grading run's key each pair's tokens are relabelled by a permutation of its own (`hidden.relabelling`).
    fixed: `fixed_pairs()` when the caller has it already."""
    return {name: (p[perm], q[perm]) for name, (p, q) in (fixed_pairs() if fixed is None else fixed).items()
            for perm in [hidden.relabelling(f"pair {name}", len(p))]}

def fixed_pairs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The pairs as written (what `pairs` returns without a key)."""
    big_p, big_q = _dirichlet_pair(1000, seed=11)
    return {
        "reversed": (np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])),
        "low acceptance, zeros in p and q": (np.array([0.0, 0.05, 0.0, 0.45, 0.5, 0.0]),
                                             np.array([0.5, 0.05, 0.3, 0.0, 0.05, 0.1])),
        "disjoint supports": (np.array([0.0, 0.0, 0.6, 0.4]), np.array([0.7, 0.3, 0.0, 0.0])),
        "high acceptance, residual over 15 tokens": high_acceptance_pair(),
        "temperature 0.7, top-3 p, top-p 0.9 q": truncated_pair(),
        "p == q": (np.array([0.2, 0.3, 0.5]), np.array([0.2, 0.3, 0.5])),
        "one-hot p": (np.array([0.0, 1.0, 0.0, 0.0]), np.array([0.25, 0.25, 0.25, 0.25])),
        "1000-token vocabulary": (big_p, big_q),
    }

# eps targets for vocabularies <= 16; the cases sized for time state their own eps.
EPS_TARGET = {"sampler": 0.02, "batch": 0.01, "block": 0.03, "sampler coupling": 0.02, "batch coupling": 0.01}

# Samples per case: the smallest n meeting the target (stats.n_for_eps at the case's alpha with the early
# looks of stats.early_passes, rounded up to 100, checked by tests/autograder/checks/test_lab1.py) on every case of at
# most 16 tokens and blocks up to k = 3; a correct implementation usually passes at 0.3 n to 0.55 n. The
# 1000-token and k = 5 cases are sized for grading time, state their own eps and draw all n.
# The law cases call the samplers as a student's own code does (they draw their drafts themselves); the
# coupling cases below hand them the grader's drafts. Each pair is in one kind or both.
N_SAMPLER = {"reversed": 66000, "high acceptance, residual over 15 tokens": 85200, "one-hot p": 49500,
             "1000-token vocabulary": 10000}

N_BATCH = {"reversed": 261300, "high acceptance, residual over 15 tokens": 341500, "1000-token vocabulary": 40000}

N_BATCH_DIFFERENT = 348300  # pairs of rows

# The coupling cases: the grader draws the drafts x ~ q and hands them to the sampler
# (`draft=` / `drafts=`); the outcome is the pair (x, emitted token), whose exact law (`coupling_law`) is
# the algorithm's, not only its output's. Sized like the law cases (the smallest n meeting EPS_TARGET).
COUPLING = "coupling of"  # how a coupling case's name begins
COUPLING_GUARANTEE = "the joint law of (the grader's draft, the emitted token): the algorithm's coupling"
COUPLING_FOLLOWS = ("speculative sampling's joint law of (the grader's draft x, your token): x kept with probability "
                    "min(1, p(x)/q(x)), else a residual draw")
COUPLING_PAIRS = ("reversed", "low acceptance, zeros in p and q", "disjoint supports", "p == q",
                  "temperature 0.7, top-3 p, top-p 0.9 q")
N_SAMPLER_COUPLING = {"reversed": 74200, "low acceptance, zeros in p and q": 73600, "disjoint supports": 65200,
                      "p == q": 62300, "temperature 0.7, top-3 p, top-p 0.9 q": 73400}
N_BATCH_COUPLING = {"reversed": 297200, "low acceptance, zeros in p and q": 295000, "disjoint supports": 261500,
                    "p == q": 249600, "temperature 0.7, top-3 p, top-p 0.9 q": 294100}

N_BLOCK = {1: 32400, 3: 54000, 5: 8000}

# The 32,000-token pair (autograder/checks/lab1_ranks.py): outcomes per case, law and coupling, for both samplers.
# The smallest round sizes at which every member of the class of rank-truncated samplers at total variation
# >= lab1_ranks.CLASS_EPS is caught with probability >= 0.999 (the power report's class table; checked by
# tests/autograder/checks/test_lab1_ranks.py).
BIG = "32,000-token vocabulary"
N_BIG = {"law": 9000, "coupling": 2000}
BIG_CHUNK = 250  # rows per call of the batch sampler on 32,000 tokens (memory: 64 MB per array of the call)
# Calls per round trip on 32,000 tokens. In the grader's verdict a batch of calls reaches the sandbox as one
# message, and the harness holds every call's own copy of p and q (or of its rows) at once: 400 one-position
# calls hold 200 MB, 4 batch calls 512 MB, well inside a student's 4 GB. All 10 000 calls at once held 5 GB.
BIG_CALLS = {"one": 400, "batch": 4}

BATCH_CHUNK = 20000  # rows per call of the batch sampler (memory on the 1000-token vocabulary)

# The 'reversed' law case of the one-position sampler draws its whole n in one look: its calls are one stream of
# 66,000, tested for independence at every distance (a replayed table of draws fails: autograder/checks/independence.py);
# n is the reversed pair's early-pass design n (64,800) raised so that a table of 2**16 draws replayed is caught.
STREAM_CASE = "reversed"
STREAM_GUARANTEE = ("the law of one outcome; and, with probability 1, every stream whose draws repeat exactly at a "
                    "distance L <= n - 330 (independence at every lag)")
BATCH_LAGS = ("the law of one outcome; and, with probability 1, every call whose rows repeat exactly at a distance "
              "L <= rows - 330 (independence at every lag)")
# Any two rows: PAIR_CALLS calls on PAIR_ROWS copies of one pair, every pair of row positions tested for agreement
# (autograder/checks/independence.py, `check_row_pairs`): a row that shares another row's random numbers fails with
# probability 1 for any fixed pairing (a mirror b <-> B - 1 - b, a permutation), which the lag test cannot see.
# 48 calls, not the 16 that suffice for rows that always share: partly shared rows are caught too.
PAIR_CASE = "high acceptance, residual over 15 tokens"
PAIR_ROWS = 2048
PAIR_CALLS = 48


def _pair_guarantee() -> str:
    p, q = fixed_pairs()[PAIR_CASE]
    s = float(np.sum(exact_law(p, q) ** 2))
    return (f"the law of one outcome; and every two of the {PAIR_ROWS} rows: with probability 1, every fixed pairing "
            f"of rows that share their random numbers (independence of any two rows, {PAIR_CALLS} calls), and with "
            f"probability >= 0.999 rows that share them in a fraction >= "
            f"{sharing_caught(PAIR_CALLS, s, PAIR_ROWS)} of the calls")


TARGETED = {"sampler": [n for n in N_SAMPLER if n not in ("1000-token vocabulary", STREAM_CASE)],
            "batch": [n for n in N_BATCH if n != "1000-token vocabulary"] + ["different"],
            "block": [1, 3], "sampler coupling": list(COUPLING_PAIRS), "batch coupling": list(COUPLING_PAIRS)}

def _lag_calls(n: int, eps: float | None, rows_per_call: int | None = None) -> int:
    """The most independence tests (one per draw call, or per batch call) a case of n outcomes makes: one draw
    per look (stats.early_passes, then the last), each in calls of at most rows_per_call rows."""
    sizes, done = [], 0
    for m, _ in [*early_passes(n, eps), (n, None)]:
        sizes.append(m - done)
        done = m
    return sum(-(-size // (rows_per_call or size)) for size in sizes if size)


def _design_eps(group: str, name) -> float | None:
    """The targeted cases pass early once their sample is clearly within the target (stats.early_passes);
    the cases sized for time (1000 outcomes and more) would not pass early at n/3 and keep one look."""
    return EPS_TARGET[group] if name in TARGETED[group] else None

def residual_table(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The exact residual norm(max(0, p - q)) (eq. 3.2 of the book)."""
    diff = np.maximum(p - q, 0.0)
    return diff / diff.sum()


def exact_law(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Law of a correct speculative sampler's output: p itself (the theorem under test)."""
    return np.asarray(p, dtype=float)

def _draw_scalar(p: np.ndarray, q: np.ndarray) -> Callable:
    """Outcome = the token of one call; the calls of one draw are also tested as a stream (`check_lags`)."""
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        out = np.empty(n, dtype=np.int64)
        for t, x in enumerate(call_each(fn, [(p, q, rng)] * n)):  # a fresh copy of p and q for every call
            if not isinstance(x, (int, np.integer)):
                raise AssertionError(f"speculative_sample must return an int token, got {type(x).__name__}")
            out[t] = x
        if out.size and out.min() >= 0 and out.max() < len(p):
            check_lags(out, exact_law(p, q), f"speculative_sample, {n} successive calls")
        return out
    return draw

def coupling_law(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Law of (draft x, emitted y) of one position whose draft x ~ q is given to the sampler, over the
    V * V outcomes x * V + y: x is emitted with probability a(x) = min(1, p(x) / q(x)), otherwise y is a
    draw from the residual (which gives x itself no mass when a(x) < 1). Its second marginal is p."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    vocab = len(p)
    law = np.zeros((vocab, vocab))
    mass = np.maximum(p - q, 0.0).sum()
    resid = residual_table(p, q) if mass > 1e-12 else np.zeros(vocab)
    for x in np.flatnonzero(q > 0):
        a = min(1.0, p[x] / q[x])
        law[x, x] += q[x] * a
        law[x] += q[x] * (1.0 - a) * resid
    return law.ravel()

def coupling_labels(vocab: int) -> list[str]:
    return [f"draft {x}, emitted {y}" for x in range(vocab) for y in range(vocab)]

def grader_drafts(q: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """n drafts x ~ q drawn by the grader, from a generator of its own seeded from rng (never the student's
    stream: a sampler cannot tell the drafts from the random numbers it takes)."""
    grader = np.random.default_rng(int(rng.integers(2**62)))
    cdf = np.cumsum(q)
    return np.minimum(np.searchsorted(cdf, grader.random(n) * cdf[-1], side="right"), len(q) - 1)

def _token_of(y, vocab: int, where: str) -> int:
    if not isinstance(y, (int, np.integer)):
        raise AssertionError(f"{where} must return an int token, got {type(y).__name__}")
    if not 0 <= y < vocab:
        raise AssertionError(f"{where} returned token {y}, outside the vocabulary [0, {vocab})")
    return int(y)

def _given_drafts(fn: Callable, calls: list[tuple], signature: str) -> list:
    """call_each(fn, calls) for calls that hand the sampler the grader's drafts (their last argument): a
    sampler without the `draft`/`drafts` parameter is told so rather than failing with a bare TypeError."""
    try:
        return call_each(fn, calls)
    except TypeError as err:
        if "argument" not in str(err):
            raise
        raise AssertionError(f"{signature}: your function does not take the draft model's token(s) as its fourth "
                             f"argument ({type(err).__name__}: {err})") from None

def _draw_coupled(p: np.ndarray, q: np.ndarray) -> Callable:
    """Outcome = (the grader's draft x ~ q, the token speculative_sample(p, q, rng, x) emits), as x * V + y."""
    vocab = len(p)

    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        drafts = grader_drafts(q, rng, n)
        out = np.array([_token_of(y, vocab, "speculative_sample(p, q, rng, draft)")
                        for y in _given_drafts(fn, [(p, q, rng, int(x)) for x in drafts],
                                               "speculative_sample(p, q, rng, draft)")], dtype=np.int64)
        return drafts * vocab + out
    return draw

def _rejected_or_accepted(tokens: np.ndarray, drafts: np.ndarray) -> np.ndarray:
    """The coupling case's outcome (lab1_ranks): ACCEPTED where the sampler returned the grader's draft, else the
    token it returned."""
    return np.where(tokens == drafts, ACCEPTED, tokens)

def _in_trips(call: Callable[[list[tuple]], list], calls: list[tuple], size: int) -> list:
    """call(calls) in round trips of at most `size` calls (BIG_CALLS), results in order."""
    return [y for start in range(0, len(calls), size) for y in call(calls[start:start + size])]

def _draw_big_scalar(p: np.ndarray, q: np.ndarray) -> Callable:
    """Outcome = the token of one call of speculative_sample(p, q, rng) on the 32,000-token pair."""
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.array([_token_of(y, len(p), "speculative_sample(p, q, rng)")
                         for y in _in_trips(lambda c: call_each(fn, c), [(p, q, rng)] * n, BIG_CALLS["one"])],
                        dtype=np.int64)
    return draw

def _draw_big_coupled(p: np.ndarray, q: np.ndarray) -> Callable:
    """Outcome = accepted, or the token speculative_sample(p, q, rng, x) returned for the grader's draft x ~ q."""
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        drafts = grader_drafts(q, rng, n)
        where = "speculative_sample(p, q, rng, draft)"
        results = _in_trips(lambda c: _given_drafts(fn, c, where), [(p, q, rng, int(x)) for x in drafts],
                            BIG_CALLS["one"])
        return _rejected_or_accepted(np.array([_token_of(y, len(p), where) for y in results], dtype=np.int64),
                                     drafts)
    return draw

def _big_batches(fn: Callable, p: np.ndarray, q: np.ndarray, rng: np.random.Generator, n: int,
                 drafts: np.ndarray | None = None) -> np.ndarray:
    """n rows, copies of (p, q), in calls of at most BIG_CHUNK rows (read-only views, as _draw_batch)."""
    vocab = len(p)
    starts = range(0, n, BIG_CHUNK)
    calls = [(np.broadcast_to(p, (m, vocab)), np.broadcast_to(q, (m, vocab)), rng)
             + (() if drafts is None else (drafts[a:a + m],)) for a in starts for m in [min(BIG_CHUNK, n - a)]]
    where = "speculative_sample_batch(p, q, rng" + (")" if drafts is None else ", drafts)")
    outs = _in_trips((lambda c: call_each(fn, c)) if drafts is None else (lambda c: _given_drafts(fn, c, where)),
                     calls, BIG_CALLS["batch"])
    tokens = np.concatenate([batch_result(out, min(BIG_CHUNK, n - a)) for out, a in zip(outs, starts)])
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
        raise AssertionError(f"{where} returned a token outside [0, {vocab})")
    return tokens

def _draw_big_batch(p: np.ndarray, q: np.ndarray) -> Callable:
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        return _big_batches(fn, p, q, rng, n)
    return draw

def _draw_big_batch_coupled(p: np.ndarray, q: np.ndarray) -> Callable:
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        drafts = grader_drafts(q, rng, n)
        return _rejected_or_accepted(_big_batches(fn, p, q, rng, n, drafts), drafts)
    return draw

def big_cases(batched: bool) -> tuple[RankCase, RankCase]:
    """(law case, coupling case) of one sampler on the 32,000-token pair, relabelled under a grading run's key."""
    p, q = keyed_pair()
    if batched:
        return (law_case(f"speculative_sample_batch on {N_BIG['law']} copies of the {BIG} pair", N_BIG["law"],
                         _draw_big_batch(p, q), batched=True),
                coupled_case(f"{COUPLING} speculative_sample_batch on {N_BIG['coupling']} copies of the {BIG} pair",
                             N_BIG["coupling"], _draw_big_batch_coupled(p, q), batched=True))
    return (law_case(f"speculative_sample on the {BIG} pair", N_BIG["law"], _draw_big_scalar(p, q)),
            coupled_case(f"{COUPLING} speculative_sample on the {BIG} pair", N_BIG["coupling"],
                         _draw_big_coupled(p, q)))

def sampler_cases() -> list[ExactnessCase | RankCase]:
    """The law cases on the pairs as written (their sizes and their power against mistakes that depend on the
    order of the tokens were designed on them); the coupling cases on the pairs relabelled by the grading run's
    key (`pairs`), which a sampler exact only on the written pairs cannot pass."""
    all_pairs = fixed_pairs()
    relabelled = pairs(all_pairs)
    law_cases = [ExactnessCase(f"speculative_sample on pair '{name}'" + (", one stream" if name == STREAM_CASE else ""),
                               exact_law(*all_pairs[name]), n, _draw_scalar(*all_pairs[name]),
                               eps=_design_eps("sampler", name), stream=name == STREAM_CASE,
                               lag_calls=_lag_calls(n, _design_eps("sampler", name)),
                               guarantee=STREAM_GUARANTEE if name == STREAM_CASE else "the law of one outcome")
                 for name, n in N_SAMPLER.items()]
    coupling_cases = [ExactnessCase(f"{COUPLING} speculative_sample on pair '{name}'",
                                    coupling_law(*relabelled[name]), n, _draw_coupled(*relabelled[name]),
                                    labels=coupling_labels(len(all_pairs[name][0])), guarantee=COUPLING_GUARANTEE,
                                    eps=_design_eps("sampler coupling", name), follows=COUPLING_FOLLOWS)
                      for name, n in N_SAMPLER_COUPLING.items()]
    big_law, big_coupling = big_cases(batched=False)
    return law_cases + [big_law] + coupling_cases + [big_coupling]

@dataclass(frozen=True)
class Bigram:
    """Toy target and draft over a small vocabulary: next-token rows indexed by the previous token."""

    target: np.ndarray  # (V, V): target[c] = p(. | previous token c)
    draft: np.ndarray  # (V, V): draft[c] = q(. | previous token c)
    start: int  # previous token before the block

def toy_bigram() -> Bigram:
    """The block checks' target and draft (a law design: kept as written, like the law cases' pairs)."""
    target = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.6, 0.1]])
    draft = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.3, 0.3, 0.4]])
    return Bigram(target, draft, start=0)

def block_rows(model: Bigram, drafted: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    ctx = (model.start, *drafted)
    return model.target[list(ctx)], model.draft[list(ctx[:-1])]  # (k+1, V), (k, V)

def block_outcomes(vocab: int, k: int) -> list[tuple[int, ...]]:
    return [s for length in range(1, k + 2) for s in itertools.product(range(vocab), repeat=length)]

def block_law(model: Bigram, k: int) -> np.ndarray:
    """Exact law of the tokens a correct verification emits, over block_outcomes(V, k)."""
    vocab = model.target.shape[0]
    index = {s: i for i, s in enumerate(block_outcomes(vocab, k))}
    law = np.zeros(len(index))
    for drafted in itertools.product(range(vocab), repeat=k):
        p_rows, q_rows = block_rows(model, drafted)
        prob = np.prod([q_rows[i, x] for i, x in enumerate(drafted)])
        for i, x in enumerate(drafted):  # reach position i with every earlier draft accepted
            if prob == 0:
                break
            a = min(1.0, p_rows[i, x] / q_rows[i, x])
            if a < 1:
                resid = residual_table(p_rows[i], q_rows[i])
                for y in range(vocab):
                    law[index[(*drafted[:i], y)]] += prob * (1 - a) * resid[y]
            prob *= a
        if prob > 0:
            for y in range(vocab):
                law[index[(*drafted, y)]] += prob * p_rows[k, y]
    assert abs(law.sum() - 1) < 1e-12
    return law

def call_block(fn: Callable, drafted, p_rows, q_rows, rng, where: str) -> tuple[list[int], int]:
    return block_result(fn(np.array(drafted), p_rows.copy(), q_rows.copy(), rng), drafted, where)

def block_result(result, drafted, where: str) -> tuple[list[int], int]:
    """(tokens, n_accepted) of one verify_block call, after checking the block's structure."""
    k = len(drafted)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise AssertionError(f"{where}: verify_block must return a pair (tokens, n_accepted)")
    tokens, n_acc = result
    tokens = [int(t) for t in np.asarray(tokens).ravel()]
    if not isinstance(n_acc, (int, np.integer)) or not 0 <= n_acc <= k:
        raise AssertionError(f"{where}: n_accepted = {n_acc!r} is not an integer in [0, k = {k}]")
    if len(tokens) != n_acc + 1:
        raise AssertionError(
            f"{where}: you emitted {len(tokens)} tokens with n_accepted = {n_acc}; a block emits "
            f"the accepted drafts plus exactly one more token")
    if tuple(tokens[:n_acc]) != tuple(int(t) for t in drafted[:n_acc]):
        raise AssertionError(f"{where}: the first n_accepted = {n_acc} emitted tokens are not the drafted ones")
    return tokens, int(n_acc)

def _draw_block(model: Bigram, k: int) -> Callable:
    index = {s: i for i, s in enumerate(block_outcomes(model.target.shape[0], k))}

    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        drafted = np.empty((n, k), dtype=np.int64)  # autoregressive drafting from q, all blocks at once
        ctx = np.full(n, model.start)
        for i in range(k):
            cdf = np.cumsum(model.draft[ctx], axis=1)
            ctx = np.minimum((cdf <= rng.random(n)[:, None]).sum(axis=1), len(model.draft) - 1)
            drafted[:, i] = ctx
        blocks = [tuple(int(x) for x in row) for row in drafted]
        inputs = {d: (np.array(d), *block_rows(model, d)) for d in set(blocks)}  # one set of arrays per distinct block
        results = call_each(fn, [(*inputs[d], rng) for d in blocks])
        out = np.empty(n, dtype=np.int64)
        for t, (d, result) in enumerate(zip(blocks, results)):
            tokens, _ = block_result(result, d, f"verify_block with k = {k}")
            out[t] = index[tuple(tokens)]
        return out
    return draw

def block_cases() -> list[ExactnessCase]:
    model = toy_bigram()
    vocab = model.target.shape[0]
    return [ExactnessCase(f"verify_block on a toy bigram target/draft, k = {k}", block_law(model, k), N_BLOCK[k],
                          _draw_block(model, k), labels=[f"emitted {list(s)}" for s in block_outcomes(vocab, k)],
                          guarantee="the joint law of the emitted tokens (hence of the accepted count)",
                          eps=_design_eps("block", k))
            for k in sorted(N_BLOCK)]

def call_batch(fn: Callable, p: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return batch_result(fn(p, q, rng), len(p))

def batch_result(out, rows: int) -> np.ndarray:
    out = np.asarray(out)
    if out.shape != (rows,) or not np.issubdtype(out.dtype, np.integer):
        raise AssertionError(f"speculative_sample_batch on {rows} rows returned {out.dtype} of shape {out.shape};"
                             f" expected integer tokens of shape ({rows},)")
    return out

def _draw_batch(p: np.ndarray, q: np.ndarray) -> Callable:
    """Outcome = the token of one row; all rows are copies of (p, q), in calls of at most BATCH_CHUNK rows."""
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        rows = BATCH_CHUNK if len(p) > 64 else n
        sizes = [min(rows, n - done) for done in range(0, n, rows)]
        # a read-only view per call, no rows in memory: each call gets its own (m, V) copy (call_each), and
        # the grader's verdict sends a view as one row and a count (autograder/pipeline/judge.py)
        outs = call_each(fn, [(np.broadcast_to(p, (m, len(p))), np.broadcast_to(q, (m, len(q))), rng) for m in sizes])
        tokens = [batch_result(out, m) for out, m in zip(outs, sizes)]
        for out in tokens:  # the rows of one call, at every distance (all rows have the same law)
            if out.size and out.min() >= 0 and out.max() < len(p):
                check_lags(out, exact_law(p, q), f"speculative_sample_batch, the {len(out)} rows of one call", "rows")
        return np.concatenate(tokens)
    return draw

def _draw_row_pairs(p: np.ndarray, q: np.ndarray) -> Callable:
    """Outcome = the token of one row; ceil(n / PAIR_ROWS) calls on PAIR_ROWS copies of (p, q), every pair of
    row positions tested for agreement across the calls (independence.check_row_pairs)."""
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        calls = -(-n // PAIR_ROWS)
        outs = call_each(fn, [(np.broadcast_to(p, (PAIR_ROWS, len(p))), np.broadcast_to(q, (PAIR_ROWS, len(q))), rng)
                              for _ in range(calls)])
        tokens = np.stack([batch_result(out, PAIR_ROWS) for out in outs])
        if tokens.min() >= 0 and tokens.max() < len(p):
            check_row_pairs(tokens, exact_law(p, q), f"speculative_sample_batch, {calls} calls on {PAIR_ROWS} copies "
                                                     "of one pair")
        return tokens.ravel()[:n]
    return draw

def _draw_batch_coupled(p: np.ndarray, q: np.ndarray) -> Callable:
    """Outcome = (the grader's draft x_b ~ q, the token row b emits when the drafts are given), as x * V + y;
    all rows are copies of (p, q), in calls of at most BATCH_CHUNK rows."""
    vocab = len(p)

    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        drafts = grader_drafts(q, rng, n)
        rows = BATCH_CHUNK if vocab > 64 else n  # as _draw_batch
        starts = range(0, n, rows)
        outs = _given_drafts(fn, [(np.broadcast_to(p, (m, vocab)), np.broadcast_to(q, (m, vocab)), rng,
                                   drafts[a:a + m]) for a in starts for m in [min(rows, n - a)]],
                             "speculative_sample_batch(p, q, rng, drafts)")
        tokens = np.concatenate([batch_result(out, min(rows, n - a)) for out, a in zip(outs, starts)])
        if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
            raise AssertionError(f"speculative_sample_batch(p, q, rng, drafts) returned a token outside [0, {vocab})")
        return drafts * vocab + tokens
    return draw

DIFFERENT_P = np.array([0.0, 0.1, 0.2, 0.3, 0.4])

def _draw_batch_different(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
    """2n rows, every one with its own law: row b has p_b = DIFFERENT_P permuted by pi_b and a draft q_b drawn
    from a Dirichlet (zeros where the permuted p has its zero, half of the time); outcome j is
    (pi^-1 of the token of row 2j, pi^-1 of the token of row 2j + 1), whose exact law is DIFFERENT_P x DIFFERENT_P
    whatever the q_b: the law of a row, and the independence of neighbouring rows."""
    vocab = len(DIFFERENT_P)
    grader = np.random.default_rng(int(rng.integers(2**62)))  # the rows' laws, drawn apart from the student's rng
    perm = np.argsort(grader.random((2 * n, vocab)), axis=1)  # perm[b, i] = the token of row b playing role i
    p = np.empty((2 * n, vocab))
    np.put_along_axis(p, perm, np.broadcast_to(DIFFERENT_P, (2 * n, vocab)), axis=1)
    q_roles = grader.dirichlet(np.ones(vocab), size=2 * n)
    q_roles[:, 0] *= grader.random(2 * n) < 0.5  # q is zero where p is zero in half of the rows
    q_roles /= q_roles.sum(axis=1, keepdims=True)
    q = np.empty_like(q_roles)
    np.put_along_axis(q, perm, q_roles, axis=1)
    tokens = call_batch(fn, p, q, rng)
    inverse = np.argsort(perm, axis=1)  # token -> role
    roles = inverse[np.arange(2 * n), tokens]
    return roles[0::2] * vocab + roles[1::2]

def batch_cases() -> list[ExactnessCase | RankCase]:
    """As sampler_cases: law cases on the pairs as written, coupling cases on the relabelled pairs."""
    all_pairs = fixed_pairs()
    relabelled = pairs(all_pairs)
    cases = [ExactnessCase(f"speculative_sample_batch on {n} copies of pair '{name}'",
                           exact_law(*all_pairs[name]), n, _draw_batch(*all_pairs[name]), batched=True,
                           eps=_design_eps("batch", name), guarantee=BATCH_LAGS,
                           lag_calls=_lag_calls(n, _design_eps("batch", name),
                                                BATCH_CHUNK if len(all_pairs[name][0]) > 64 else None))
             for name, n in N_BATCH.items()]
    p, q = all_pairs[PAIR_CASE]
    cases.append(ExactnessCase(f"speculative_sample_batch: any two of {PAIR_ROWS} rows, {PAIR_CALLS} calls on copies "
                               f"of the pair {PAIR_CASE}", exact_law(p, q), PAIR_CALLS * PAIR_ROWS, _draw_row_pairs(p, q),
                               batched=True, guarantee=_pair_guarantee(), pair_tests=1))
    vocab = len(DIFFERENT_P)
    law = np.outer(DIFFERENT_P, DIFFERENT_P).ravel()
    labels = [f"(row 2j -> role {i}, row 2j+1 -> role {j})" for i in range(vocab) for j in range(vocab)]
    cases.append(ExactnessCase(f"speculative_sample_batch on {2 * N_BATCH_DIFFERENT} rows, each with its own law",
                               law, N_BATCH_DIFFERENT, _draw_batch_different, labels=labels, batched=True,
                               guarantee="the joint law of two neighbouring rows (permutation-invariant roles)",
                               eps=_design_eps("batch", "different")))
    big_law, big_coupling = big_cases(batched=True)
    cases.append(big_law)
    cases += [ExactnessCase(f"{COUPLING} speculative_sample_batch on {n} copies of pair '{name}'",
                            coupling_law(*relabelled[name]), n, _draw_batch_coupled(*relabelled[name]), batched=True,
                            labels=coupling_labels(len(all_pairs[name][0])), guarantee=COUPLING_GUARANTEE,
                            eps=_design_eps("batch coupling", name), follows=COUPLING_FOLLOWS)
              for name, n in N_BATCH_COUPLING.items()]
    return cases + [big_coupling]
