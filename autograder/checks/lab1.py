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

from typing import Callable

import numpy as np

from . import CellSpec, defer_to_grader
from .alone import alone
from .calls import call_each
from .stats import ExactnessCase, check_case
# the designs, some re-exported for the power audit and the tests (autograder.checks.lab1.pairs, ...)
from .lab1_cases import (EPS_TARGET, N_BLOCK, TARGETED, batch_cases, batch_result, block_cases,  # noqa: F401
                         block_law, block_outcomes, block_result, block_rows, call_batch, call_block, exact_law,
                         pairs, residual_table, sampler_cases, toy_bigram)

ALPHA_CELL = 1e-6  # false-failure budget of one statistical test cell
TOL = 1e-9  # tolerance on deterministic values
SPEEDUP_REQUIRED = 50.0  # vectorised sampler vs a Python loop over the single-position sampler


# ----------------------------------------------------------------------------- (p, q) pairs


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
        want = residual_table(p, q)
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


def check_block_contracts(verify_block: Callable) -> None:
    """Clear ValueErrors on bad input, and the randomness contract."""
    model = toy_bigram()
    p_rows, q_rows = block_rows(model, (1, 0, 2))
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
            tokens, n_acc = call_block(verify_block, drafted, p_rows, q_rows, rng, f"k = {k}, p rows == q rows")
            if n_acc != k or tokens[-1] != 2:
                raise AssertionError(
                    f"verify_block with k = {k} and p == q at every drafted position: every draft must be "
                    f"accepted and the extra token drawn from the target's row k (one-hot at token 2); "
                    f"you emitted {tokens} with n_accepted = {n_acc}")
        # the target gives the first drafted token probability 0: rejected at once, correction from p row 0
        p_rows2 = np.concatenate([onehot[[0]], np.stack([mix] * k)])
        q_rows2 = np.stack([onehot[1]] + [mix] * (k - 1))
        for _ in range(20):
            tokens, n_acc = call_block(verify_block, drafted, p_rows2, q_rows2, rng, f"k = {k}, forced rejection")
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
            out[b] = int(rng.choice(len(p), p=residual_table(p, q)))
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
        tokens = batch_result(out, rows)
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
