"""Hidden checks of Lab 1 (rejection sampling), one function per graded test cell.

Notation: see the `speclab` package docstring. A correct implementation's outputs follow exact laws that
are computed here by enumeration; samplers are compared with them by
`autograder.checks.stats` (a total-variation distance test with a stated eps, union bound). Every statistical
test cell has a false-failure probability <= ALPHA_CELL = 1e-6 for a correct
implementation, whatever the seed; the seeds are fixed so grading is
deterministic. `python -m autograder.audit.power lab1` prints the exact bounds and the
power against every mutant in `autograder.audit.mutants.lab1`.

Failure messages say which property failed and by how much, never how to fix it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import CellSpec, defer_to_grader
from .alone import alone
from .calls import call_each
from .stats import ExactnessCase, check_case

ALPHA_CELL = 1e-6  # false-failure budget of one statistical test cell
TOL = 1e-9  # tolerance on deterministic values
SPEEDUP_REQUIRED = 50.0  # vectorised sampler vs a Python loop over the single-position sampler


# ----------------------------------------------------------------------------- (p, q) pairs
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


def pairs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The (p, q) pairs the samplers are tested on: the regimes of issue 14, adversarial ones included."""
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


# eps targets (issue 14) for vocabularies <= 16; the cases sized for time state their own eps.
EPS_TARGET = {"sampler": 0.02, "batch": 0.01, "block": 0.03}
# Samples per case: the smallest n meeting the target (stats.n_for_eps at the case's alpha with the early
# looks of stats.early_passes, rounded up to 100, checked by tests/test_lab1_checks.py) on every case of at
# most 16 tokens and blocks up to k = 3; a correct implementation usually passes at 0.3 n to 0.55 n. The
# 1000-token and k = 5 cases are sized for grading time, state their own eps and draw all n.
N_SAMPLER = {"reversed": 64300, "low acceptance, zeros in p and q": 59900, "disjoint supports": 57600,
             "high acceptance, residual over 15 tokens": 84100, "p == q": 61300, "one-hot p": 48600,
             "1000-token vocabulary": 10000}
N_BATCH = {"reversed": 258800, "low acceptance, zeros in p and q": 241800, "disjoint supports": 232600,
           "high acceptance, residual over 15 tokens": 338800, "temperature 0.7, top-3 p, top-p 0.9 q": 245800,
           "p == q": 247500, "one-hot p": 196400, "1000-token vocabulary": 40000}
N_BATCH_DIFFERENT = 345900  # pairs of rows
N_BLOCK = {1: 32400, 3: 54000, 5: 8000}
BATCH_CHUNK = 20000  # rows per call of the batch sampler (memory on the 1000-token vocabulary)
TARGETED = {"sampler": [n for n in N_SAMPLER if n != "1000-token vocabulary"],
            "batch": [n for n in N_BATCH if n != "1000-token vocabulary"] + ["different"],
            "block": [1, 3]}


def _design_eps(group: str, name) -> float | None:
    """The targeted cases pass early once their sample is clearly within the target (stats.early_passes);
    the cases sized for time (1000 outcomes and more) would not pass early at n/3 and keep one look."""
    return EPS_TARGET[group] if name in TARGETED[group] else None


# ----------------------------------------------------------------------------- part 1
def _assert_close(got, want, what: str) -> None:
    if not isinstance(got, (float, int, np.floating, np.integer)) and np.ndim(got) != 0:
        raise AssertionError(f"{what}: expected a single number, got {type(got).__name__} {np.shape(got)}")
    got = float(got)
    if not np.isfinite(got) or abs(got - want) > TOL:
        raise AssertionError(f"{what}: you return {got:.6g}, the correct value is {want:.6g}")


def _acceptance_table(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    safe = np.where(q > 0, q, 1.0)
    return np.where(q > 0, np.minimum(1.0, p / safe), np.nan)


def check_acceptance_prob(acceptance_prob: Callable) -> None:
    """Values of min(1, p(x)/q(x)) on every drafted token; ValueError for never-drafted ones."""
    for name, (p, q) in pairs().items():
        want = _acceptance_table(p, q)
        for x in range(len(p)) if len(p) < 20 else range(0, len(p), 37):
            if q[x] == 0:
                try:
                    acceptance_prob(p.copy(), q.copy(), x)
                except ValueError:
                    continue
                raise AssertionError(
                    f"acceptance_prob on pair '{name}', token {x}: q[{x}] = 0, so this token is never "
                    f"drafted; a clear ValueError is expected, nothing was raised")
            got = acceptance_prob(p.copy(), q.copy(), x)
            _assert_close(got, want[x], f"acceptance_prob on pair '{name}', token {x}")


def _residual_table(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    diff = np.maximum(p - q, 0.0)
    return diff / diff.sum()


def check_residual_distribution(residual_distribution: Callable) -> None:
    """norm(max(p - q, 0)) on every pair; a ValueError when p == q (no residual mass)."""
    for name, (p, q) in pairs().items():
        if np.array_equal(p, q):
            try:
                got = residual_distribution(p.copy(), q.copy())
            except ValueError:
                continue
            raise AssertionError(
                f"residual_distribution on pair '{name}' (p == q): the residual has no mass, a clear "
                f"ValueError is expected, but you returned {np.round(np.asarray(got, float), 4)}")
        got = np.asarray(residual_distribution(p.copy(), q.copy()), dtype=float)
        want = _residual_table(p, q)
        if got.shape != want.shape:
            raise AssertionError(f"residual_distribution on pair '{name}': shape {got.shape}, expected {want.shape}")
        if not np.all(np.isfinite(got)) or abs(got.sum() - 1) > 1e-6 or np.any(got < 0):
            raise AssertionError(
                f"residual_distribution on pair '{name}': the result is not a probability vector "
                f"(sum {got.sum():.6g}, min {np.nanmin(got):.3g})")
        err = np.abs(got - want)
        if err.max() > 1e-9:
            i = int(np.argmax(err))
            raise AssertionError(
                f"residual_distribution on pair '{name}': total variation {0.5 * err.sum():.4f} from the "
                f"correct residual; token {i} differs most ({got[i]:.4f} instead of {want[i]:.4f})")


def bad_inputs() -> dict[str, tuple[object, object]]:
    """(p, q) pairs that are not two distributions over the same vocabulary."""
    ok = np.array([0.2, 0.3, 0.5])
    return {
        "a negative entry in p": (np.array([-0.1, 0.6, 0.5]), ok),
        "a NaN in q": (ok, np.array([0.2, np.nan, 0.8])),
        "an infinite entry in p": (np.array([np.inf, 0.5, 0.5]), ok),
        "p sums to 0.9": (np.array([0.2, 0.2, 0.5]), ok),
        "q sums to 1.1": (ok, np.array([0.3, 0.3, 0.5])),
        "p and q of different lengths": (ok, np.array([0.25, 0.25, 0.25, 0.25])),
        "a 2-D p": (np.array([[0.2, 0.3, 0.5]]), ok),
        "an empty p": (np.array([]), ok),
    }


def check_input_validation(acceptance_prob: Callable, residual_distribution: Callable) -> None:
    """Both functions raise ValueError on invalid inputs and accept sums within 1e-9 of 1."""
    for what, (p, q) in bad_inputs().items():
        for fname, call in (("acceptance_prob", lambda: acceptance_prob(p, q, 0)),
                            ("residual_distribution", lambda: residual_distribution(p, q))):
            try:
                call()
            except ValueError:
                continue
            except Exception as err:  # noqa: BLE001 - the student must raise ValueError, nothing else
                raise AssertionError(f"{fname} with {what}: expected ValueError, got {type(err).__name__}: {err}")
            raise AssertionError(f"{fname} with {what}: expected a ValueError, nothing was raised")
    p = np.array([0.1, 0.2, 0.3, 0.4 + 1e-10])
    q = np.array([0.4, 0.3, 0.2, 0.1 - 1e-10])
    acceptance_prob(p, q, 1)
    residual_distribution(p, q)
    for bad_x in (-1, 4, 1.5):
        try:
            acceptance_prob(p, q, bad_x)
        except (ValueError, TypeError, IndexError):
            continue
        raise AssertionError(f"acceptance_prob with token x = {bad_x!r} (vocabulary of 4): expected a ValueError")


# ----------------------------------------------------------------------------- part 2
def exact_law(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Law of a correct speculative sampler's output: p itself (the theorem under test)."""
    return np.asarray(p, dtype=float)


def _draw_scalar(p: np.ndarray, q: np.ndarray) -> Callable:
    def draw(fn: Callable, rng: np.random.Generator, n: int) -> np.ndarray:
        out = np.empty(n, dtype=np.int64)
        for t, x in enumerate(call_each(fn, [(p, q, rng)] * n)):  # a fresh copy of p and q for every call
            if not isinstance(x, (int, np.integer)):
                raise AssertionError(f"speculative_sample must return an int token, got {type(x).__name__}")
            out[t] = x
        return out
    return draw


def sampler_cases() -> list[ExactnessCase]:
    all_pairs = pairs()
    return [ExactnessCase(f"speculative_sample on pair '{name}'", exact_law(*all_pairs[name]), n,
                          _draw_scalar(*all_pairs[name]), eps=_design_eps("sampler", name))
            for name, n in N_SAMPLER.items()]


def _check_cases(cases: list[ExactnessCase], fn: Callable, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for case in cases:
        check_case(case, fn, rng, ALPHA_CELL / len(cases))


def _same_state(a, b) -> bool:
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and tuple(a[2:]) == tuple(b[2:])


def check_randomness_contract(call: Callable[[np.random.Generator], object], what: str) -> None:
    """Same seed, same output; the global np.random state untouched (every draw comes from rng)."""
    with alone():  # no other check of the grader's process may move the global state meanwhile
        before = np.random.get_state()
        first = call(np.random.default_rng(99))
        second = call(np.random.default_rng(99))
        moved = not _same_state(before, np.random.get_state())
    if moved:
        raise AssertionError(f"{what}: the global np.random state changed; every random number must come from "
                             f"the rng argument")
    a, b = (np.concatenate([np.ravel(np.asarray(x, dtype=float)) for x in r]) if isinstance(r, list) else
            np.ravel(np.asarray(r, dtype=float)) for r in (first, second))
    if a.shape != b.shape or not np.array_equal(a, b):
        raise AssertionError(f"{what}: two runs with generators seeded alike gave different outputs "
                             f"({a[:8]} ... and {b[:8]} ...); every random number must come from the rng argument")


def expect_value_error(call: Callable[[], object], what: str) -> None:
    """call() must raise ValueError with a message; say what happened otherwise."""
    try:
        got = call()
    except ValueError:
        return
    except Exception as err:  # noqa: BLE001 - the contract asks for ValueError, nothing else
        raise AssertionError(f"{what}: expected a ValueError, got {type(err).__name__}: {err}") from None
    raise AssertionError(f"{what}: expected a ValueError, nothing was raised (you returned {got!r})")


def check_sampler(speculative_sample: Callable) -> None:
    """speculative_sample draws exactly from p on every test pair (distance test with a stated eps, fixed seed)."""
    p, q = pairs()["reversed"]
    check_randomness_contract(lambda rng: call_each(speculative_sample, [(p, q, rng)] * 200), "speculative_sample")
    rng = np.random.default_rng(0)
    expect_value_error(lambda: speculative_sample(np.array([0.2, 0.2, 0.5]), np.array([0.2, 0.3, 0.5]), rng),
                       "speculative_sample with p summing to 0.9")
    expect_value_error(lambda: speculative_sample(p, np.array([0.5, 0.5]), rng),
                       "speculative_sample with p of 4 entries and q of 2")
    _check_cases(sampler_cases(), speculative_sample, seed=20261)


# ----------------------------------------------------------------------------- part 3
@dataclass(frozen=True)
class Bigram:
    """Toy target and draft over a small vocabulary: next-token rows indexed by the previous token."""

    target: np.ndarray  # (V, V): target[c] = p(. | previous token c)
    draft: np.ndarray  # (V, V): draft[c] = q(. | previous token c)
    start: int  # previous token before the block


def toy_bigram() -> Bigram:
    target = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.6, 0.1]])
    draft = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.3, 0.3, 0.4]])
    return Bigram(target, draft, start=0)


def _rows(model: Bigram, drafted: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
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
        p_rows, q_rows = _rows(model, drafted)
        prob = np.prod([q_rows[i, x] for i, x in enumerate(drafted)])
        for i, x in enumerate(drafted):  # reach position i with every earlier draft accepted
            if prob == 0:
                break
            a = min(1.0, p_rows[i, x] / q_rows[i, x])
            if a < 1:
                resid = _residual_table(p_rows[i], q_rows[i])
                for y in range(vocab):
                    law[index[(*drafted[:i], y)]] += prob * (1 - a) * resid[y]
            prob *= a
        if prob > 0:
            for y in range(vocab):
                law[index[(*drafted, y)]] += prob * p_rows[k, y]
    assert abs(law.sum() - 1) < 1e-12
    return law


def _call_block(fn: Callable, drafted, p_rows, q_rows, rng, where: str) -> tuple[list[int], int]:
    return _block_result(fn(np.array(drafted), p_rows.copy(), q_rows.copy(), rng), drafted, where)


def _block_result(result, drafted, where: str) -> tuple[list[int], int]:
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
        inputs = {d: (np.array(d), *_rows(model, d)) for d in set(blocks)}  # one set of arrays per distinct block
        results = call_each(fn, [(*inputs[d], rng) for d in blocks])
        out = np.empty(n, dtype=np.int64)
        for t, (d, result) in enumerate(zip(blocks, results)):
            tokens, _ = _block_result(result, d, f"verify_block with k = {k}")
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


def check_block_contracts(verify_block: Callable) -> None:
    """Clear ValueErrors on bad input, and the randomness contract."""
    model = toy_bigram()
    p_rows, q_rows = _rows(model, (1, 0, 2))
    rng = np.random.default_rng(0)
    check_randomness_contract(lambda r: [verify_block(np.array([1, 0, 2]), p_rows.copy(), q_rows.copy(), r)[0]
                                         for _ in range(100)], "verify_block")
    bad_p = p_rows.copy()
    bad_p[0] = [0.5, 0.5, 0.5]
    for what, args in {
        "k = 0 (no drafted token, one target row)": (np.array([], dtype=int), p_rows[:1], q_rows[:0]),
        "a drafted token 3 in a vocabulary of 3": (np.array([3, 0, 2]), p_rows, q_rows),
        "a drafted token -1": (np.array([-1, 0, 2]), p_rows, q_rows),
        "target row 0 summing to 1.5": (np.array([1, 0, 2]), bad_p, q_rows),
        "k target rows instead of k + 1": (np.array([1, 0, 2]), p_rows[:3], q_rows),
        "draft rows of another vocabulary size": (np.array([1, 0, 2]), p_rows, np.full((3, 4), 0.25)),
    }.items():
        expect_value_error(lambda: verify_block(args[0], args[1].copy(), args[2].copy(), rng),
                           f"verify_block with {what}")


def check_block_structure(verify_block: Callable) -> None:
    """Edge contracts, then forced outcomes that need no statistics: full acceptance, forced rejection, bonus row."""
    check_block_contracts(verify_block)
    rng = np.random.default_rng(7)
    onehot = np.eye(4)
    uniform = np.full(4, 0.25)
    mix = np.array([0.1, 0.2, 0.3, 0.4])
    for k in (1, 2, 3):
        drafted = [1, 3, 0][:k]
        # p == q at every drafted position: all k accepted, bonus from the last target row (one-hot at 2)
        q_rows = np.stack([uniform, mix, uniform][:k])
        p_rows = np.concatenate([q_rows, onehot[[2]]])
        for _ in range(20):
            tokens, n_acc = _call_block(verify_block, drafted, p_rows, q_rows, rng, f"k = {k}, p rows == q rows")
            if n_acc != k or tokens[-1] != 2:
                raise AssertionError(
                    f"verify_block with k = {k} and p == q at every drafted position: every draft must be "
                    f"accepted and the extra token drawn from the target's row k (one-hot at token 2); "
                    f"you emitted {tokens} with n_accepted = {n_acc}")
        # the target gives the first drafted token probability 0: rejected at once, correction from p row 0
        p_rows2 = np.concatenate([onehot[[0]], np.stack([mix] * k)])
        q_rows2 = np.stack([onehot[1]] + [mix] * (k - 1))
        for _ in range(20):
            tokens, n_acc = _call_block(verify_block, drafted, p_rows2, q_rows2, rng, f"k = {k}, forced rejection")
            if n_acc != 0 or tokens != [0]:
                raise AssertionError(
                    f"verify_block with k = {k} where the target gives the first drafted token probability 0 "
                    f"(target row 0 one-hot at token 0): you emitted {tokens} with n_accepted = {n_acc}")


check_block_structure.randomised = True  # forced outcomes for a correct verifier, not for a wrong one


def check_block_exactness(verify_block: Callable) -> None:
    """verify_block emits tokens whose joint law is the target's (distance test with a stated eps, fixed seed)."""
    _check_cases(block_cases(), verify_block, seed=20263)


# ----------------------------------------------------------------------------- part 4
def alpha_cases() -> list[tuple[object, object, float]]:
    """(n_accepted, k, pooled alpha) worked by hand: accepted drafts / verified drafts."""
    return [
        ([2, 0, 3], 3, 5 / 7),  # verified 3 + 1 + 3
        ([0, 0], 4, 0.0),
        ([4, 4, 4], 4, 1.0),
        ([1, 2], [2, 5], 3 / 5),  # verified 2 + 3
        (np.array([3, 1, 0, 2]), 3, 6 / 9),  # verified 3 + 2 + 1 + 3
    ]


def check_alpha_estimator(estimate_alpha: Callable) -> None:
    """estimate_alpha pools accepted / verified drafts over all blocks; ValueError on impossible logs."""
    for n_acc, k, want in alpha_cases():
        _assert_close(estimate_alpha(n_acc, k), want, f"estimate_alpha(n_accepted={[int(v) for v in np.ravel(n_acc)]}, k={k})")
    for n_acc, k in (([4], 3), ([-1], 3), ([], 3), ([1], 0)):
        try:
            estimate_alpha(n_acc, k)
        except ValueError:
            continue
        raise AssertionError(f"estimate_alpha(n_accepted={n_acc}, k={k}): invalid logs, a ValueError is expected")


# ----------------------------------------------------------------------------- part 5
def _call_batch(fn: Callable, p: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return _batch_result(fn(p, q, rng), len(p))


def _batch_result(out, rows: int) -> np.ndarray:
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
        return np.concatenate([_batch_result(out, m) for out, m in zip(outs, sizes)])
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
    tokens = _call_batch(fn, p, q, rng)
    inverse = np.argsort(perm, axis=1)  # token -> role
    roles = inverse[np.arange(2 * n), tokens]
    return roles[0::2] * vocab + roles[1::2]


def batch_cases() -> list[ExactnessCase]:
    all_pairs = pairs()
    cases = [ExactnessCase(f"speculative_sample_batch on {n} copies of pair '{name}'",
                           exact_law(*all_pairs[name]), n, _draw_batch(*all_pairs[name]), batched=True,
                           eps=_design_eps("batch", name))
             for name, n in N_BATCH.items()]
    vocab = len(DIFFERENT_P)
    law = np.outer(DIFFERENT_P, DIFFERENT_P).ravel()
    labels = [f"(row 2j -> role {i}, row 2j+1 -> role {j})" for i in range(vocab) for j in range(vocab)]
    cases.append(ExactnessCase(f"speculative_sample_batch on {2 * N_BATCH_DIFFERENT} rows, each with its own law",
                               law, N_BATCH_DIFFERENT, _draw_batch_different, labels=labels, batched=True,
                               guarantee="the joint law of two neighbouring rows (permutation-invariant roles)",
                               eps=_design_eps("batch", "different")))
    return cases


def check_batch_exactness(speculative_sample_batch: Callable) -> None:
    """speculative_sample_batch draws row b exactly from p[b] (distance test with a stated eps, fixed seed)."""
    p, q = pairs()["reversed"]
    check_randomness_contract(lambda rng: speculative_sample_batch(np.tile(p, (1000, 1)), np.tile(q, (1000, 1)), rng),
                              "speculative_sample_batch")
    rng = np.random.default_rng(0)
    P, Q = np.tile(p, (3, 1)), np.tile(q, (3, 1))
    bad = P.copy()
    bad[1] = [0.3, 0.3, 0.3, 0.3]
    for what, args in {"p of shape (3, 4) and q of shape (2, 4)": (P, Q[:2]),
                       "p of shape (3, 4) and q of shape (3, 5)": (P, np.full((3, 5), 0.2)),
                       "1-D p and q": (p, q),
                       "row 1 of p summing to 1.2": (bad, Q)}.items():
        expect_value_error(lambda: speculative_sample_batch(args[0].copy(), args[1].copy(), rng),
                           f"speculative_sample_batch with {what}")
    _check_cases(batch_cases(), speculative_sample_batch, seed=20265)


def _loop_baseline(p_rows: np.ndarray, q_rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A plain Python loop over a single-position sampler (the baseline of the speed test)."""
    out = np.empty(len(p_rows), dtype=np.int64)
    for b in range(len(p_rows)):
        p, q = p_rows[b], q_rows[b]
        x = int(rng.choice(len(q), p=q))
        if rng.random() < min(1.0, p[x] / q[x]):
            out[b] = x
        else:
            out[b] = int(rng.choice(len(p), p=_residual_table(p, q)))
    return out


SPEED_ROWS, SPEED_LOOP_ROWS = 50000, 500  # rows of one timed batch call; rows of one baseline loop
SPEED_BUDGET_S = 10.0  # timing budget of the sequential test (a round takes about 20 ms on a quiet core)
SPEED_OUTPUT_ALPHA = 1e-4  # false-failure probability of the law check of ONE timed call's output


def _timed_output_checker(rows: int) -> Callable[[object], None]:
    """A check of every output the timed calls return: integer tokens of the right shape, a law
    close to p (distance test at level SPEED_OUTPUT_ALPHA per call, at most 23 calls: false
    failures <= 0.0023), and never the same array twice (a correct sampler repeats 50000 draws
    with probability about 0). Without it, a sampler could spot the timed calls by their size
    and return garbage fast."""
    p, q = pairs()["reversed"]
    law = exact_law(p, q)
    seen: list[bytes] = []

    def check(out) -> None:
        tokens = _batch_result(out, rows)
        # the same distance test as the exactness cases (range, impossible tokens, TV against its threshold)
        case = ExactnessCase(f"speculative_sample_batch in a timed call on {rows} copies of pair 'reversed'", law,
                             rows, lambda fn, rng, n: tokens, batched=True)
        check_case(case, None, None, SPEED_OUTPUT_ALPHA)
        digest = tokens.astype(np.int64).tobytes()
        if digest in seen:
            raise AssertionError("speculative_sample_batch returned the very same tokens in two timed calls; "
                                 "each call must draw afresh from rng")
        seen.append(digest)
    return check


def speed_rounds(batch_fn: Callable, budget_s: float = SPEED_BUDGET_S, decide: Callable | None = None):
    """Paired rounds (autograder/checks/timing.py, under the graders' lock): each round times one
    call of batch_fn on SPEED_ROWS rows and the grader's Python loop on SPEED_LOOP_ROWS rows;
    round i's ratio is the loop's per-row time over the batch's. Every output of batch_fn is
    checked (_timed_output_checker). decide(ratios) -> True stops at a look (a clear verdict)."""
    from . import timing

    p, q = pairs()["reversed"]
    rng = np.random.default_rng(3)
    big_p, big_q = np.tile(p, (SPEED_ROWS, 1)), np.tile(q, (SPEED_ROWS, 1))
    small_p, small_q = big_p[:SPEED_LOOP_ROWS], big_q[:SPEED_LOOP_ROWS]
    check = _timed_output_checker(SPEED_ROWS)
    outputs: list = []

    def per_row_ratios(r: timing.Rounds) -> list[float]:  # (loop time / loop rows) / (batch time / batch rows)
        return [x * SPEED_ROWS / SPEED_LOOP_ROWS for x in r.ratios("loop", "batch")]

    rounds = timing.sequential_rounds(
        [lambda: outputs.append(batch_fn(big_p, big_q, rng)), lambda: _loop_baseline(small_p, small_q, rng)],
        ["batch", "loop"], lambda r: decide is not None and decide(per_row_ratios(r)), budget_s)
    for out in outputs:
        check(out)
    return per_row_ratios(rounds), rounds.lock_note


def measure_speedup(batch_fn: Callable) -> float:
    """Median over paired rounds of (per-row time of the Python loop) / (per-row time of batch_fn)."""
    from .timing import median

    return median(speed_rounds(batch_fn)[0])


def check_batch_speed(speculative_sample_batch: Callable) -> None:
    """speculative_sample_batch is at least SPEEDUP_REQUIRED times faster per row than a Python loop:
    a sequential sign test (autograder/checks/timing.py) takes the point only on a clear verdict;
    a correct sampler whose median ratio is at least the bar loses it with probability at most
    timing.ALPHA_CLAUSE (1.23 %), plus SPEED_OUTPUT_ALPHA per timed call from the output check."""
    from . import timing

    ratios, note = speed_rounds(speculative_sample_batch,
                                decide=lambda r: timing.verdict(r, SPEEDUP_REQUIRED) != "inconclusive")
    if timing.verdict(ratios, SPEEDUP_REQUIRED) == "fail":
        above = sum(r >= SPEEDUP_REQUIRED for r in ratios)
        raise timing.TimingFailure(
            f"speculative_sample_batch is {timing.median(ratios):.1f}x faster per row than a Python loop over a "
            f"single-position sampler (median of {len(ratios)} paired rounds, {above} of them at or above the "
            f"bar); at least {SPEEDUP_REQUIRED:.0f}x is required{'; ' + note if note else ''}")


check_batch_speed.randomised = True  # a timing


# ----------------------------------------------------------------------------- registry
# Why the cells without statistical cases cannot fail a correct implementation.
DETERMINISTIC_NOTES = {
    "test_acceptance_prob": "0: exact values, tolerance 1e-9, no randomness",
    "test_residual_distribution": "0: exact values, tolerance 1e-9, no randomness",
    "test_input_validation": "0: ValueError expected on fixed invalid inputs, no randomness",
    "test_block_structure": "0: outcomes forced for a correct verifier (acceptance probabilities 1 or 0, one-hot rows)",
    "test_alpha_estimator": "0: values worked by hand, tolerance 1e-9, no randomness",
    "test_batch_speed": f"timing: a sequential sign test of median speed-up >= {SPEEDUP_REQUIRED:.0f}x "
                        f"fails a sampler at or above the bar with probability <= 1.23 % (plus <= 0.23 % "
                        f"from the check of the timed outputs)",
}

def report_extra(grade_id: str, reference) -> str:
    """Measured facts `python -m autograder.audit.power` adds to a deterministic cell's note."""
    if grade_id == "test_batch_speed":
        return f" (the reference measured {measure_speedup(reference.speculative_sample_batch):.0f}x here)"
    return ""


CELLS: list[CellSpec] = [
    CellSpec("test_acceptance_prob", 1, 2, check_acceptance_prob, ("acceptance_prob",)),
    CellSpec("test_residual_distribution", 1, 2, check_residual_distribution, ("residual_distribution",)),
    CellSpec("test_input_validation", 1, 1, check_input_validation, ("acceptance_prob", "residual_distribution")),
    CellSpec("test_sampler_exactness", 2, 4, check_sampler, ("speculative_sample",), sampler_cases, 20261),
    CellSpec("test_block_structure", 3, 2, check_block_structure, ("verify_block",)),
    CellSpec("test_block_exactness", 3, 3, check_block_exactness, ("verify_block",), block_cases, 20263),
    CellSpec("test_alpha_estimator", 4, 2, check_alpha_estimator, ("estimate_alpha",)),
    CellSpec("test_batch_exactness", 5, 3, check_batch_exactness, ("speculative_sample_batch",), batch_cases, 20265),
    CellSpec("test_batch_speed", 5, 1, check_batch_speed, ("speculative_sample_batch",)),
]

defer_to_grader(globals())  # the grading pipeline's nbgrader run leaves these checks to the grader
