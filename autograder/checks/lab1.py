"""Hidden checks of Lab 1 (rejection sampling), one function per graded test cell.

Notation: see the `speclab` package docstring. A correct implementation's outputs follow exact laws that
are computed here by enumeration; samplers are compared with them by
`autograder.checks.stats` (a total-variation distance test with a stated eps, union bound), and on a vocabulary
of real-model size (32,000 tokens) by the mass they put on tokens of low rank (`autograder.checks.lab1_ranks`,
exact binomial tails, power stated within the class of samplers that cut a distribution short). Every statistical
test cell has a false-failure probability <= ALPHA_CELL = 1e-6 for a correct
implementation, whatever the seed. Each cell's seed is in its `CellSpec`: fixed outside a grading
run, drawn from the run's key inside one (autograder/checks/hidden.py).
`python -m autograder.audit.power lab1` prints the exact bounds and the power against every mutant in
`autograder.audit.mutants.lab1`.

Failure messages say which property failed and by how much, never how to fix it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from speclab import speedtest

from . import CellSpec, defer_to_grader, lab1_ranks, spec_of, under
from .alone import alone
from .calls import call_each
# the designs, some re-exported for the power audit and the tests (autograder.checks.lab1.pairs, ...)
from .lab1_cases import (COUPLING, COUPLING_PAIRS, EPS_TARGET, N_BLOCK, TARGETED, batch_cases,  # noqa: F401
                         batch_result, block_cases, block_law, block_outcomes, block_result, block_rows, call_batch,
                         call_block, coupling_law, exact_law, pairs, residual_table, sampler_cases, toy_bigram)
from .lab1_rules import (R_ACCEPT, R_ALPHA, R_ALPHA_REFUSE, R_BATCH_COUPLING, R_BATCH_LAW, R_BATCH_RNG,
                         R_BATCH_SPEED, R_BLOCK_LAW, R_BLOCK_REFUSE, R_BLOCK_RNG, R_BLOCK_SHAPE, R_NEVER_DRAFTED,
                         R_NO_RESIDUAL, R_RESIDUAL, R_SAMPLER_COUPLING, R_SAMPLER_LAW, R_SAMPLER_REFUSE,
                         R_SAMPLER_RNG, R_VALIDATE)
from .lab1_ranks import RankCase
from .stats import ExactnessCase, case_false_failure_bound, check_case

ALPHA_CELL = 1e-6  # false-failure budget of one statistical test cell
TOL = 1e-9  # tolerance of deterministic values
SPEEDUP_REQUIRED = speedtest.BATCH_BAR  # the sampler's speed as a fraction of the bare draws', vectorised
FIGURE = "Lab 1 batch speed (of the bare draws')"  # the figure's name in results, the CSV and the leaderboard


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
                with under(R_NEVER_DRAFTED):
                    expect_value_error(lambda: acceptance_prob(p.copy(), q.copy(), x),
                                       f"acceptance_prob on pair '{name}', token {x} (q[{x}] = 0)")
                continue
            with under(R_ACCEPT):
                got = acceptance_prob(p.copy(), q.copy(), x)
                _assert_close(got, want[x], f"acceptance_prob on pair '{name}', token {x}")


def check_residual_distribution(residual_distribution: Callable) -> None:
    """norm(max(p - q, 0)) on every pair; a ValueError when p == q (no residual mass)."""
    for name, (p, q) in pairs().items():
        if np.array_equal(p, q):
            with under(R_NO_RESIDUAL):
                expect_value_error(lambda: residual_distribution(p.copy(), q.copy()),
                                   f"residual_distribution on pair '{name}' (p == q, no residual mass)")
            continue
        with under(R_RESIDUAL):
            _check_residual(name, p, q, np.asarray(residual_distribution(p.copy(), q.copy()), dtype=float))


def _check_residual(name: str, p: np.ndarray, q: np.ndarray, got: np.ndarray) -> None:
    want = residual_table(p, q)
    if got.shape != want.shape:
        raise AssertionError(f"residual_distribution on pair '{name}': expected a vector of shape {want.shape}, "
                             f"got shape {got.shape}")
    if not np.all(np.isfinite(got)) or abs(got.sum() - 1) > 1e-6 or np.any(got < 0):
        raise AssertionError(
            f"residual_distribution on pair '{name}': expected a probability vector, got one with sum "
            f"{got.sum():.6g} and smallest entry {np.nanmin(got):.3g}")
    err = np.abs(got - want)
    if err.max() > 1e-9:
        i = int(np.argmax(err))
        raise AssertionError(
            f"residual_distribution on pair '{name}': total variation {0.5 * err.sum():.4f} from the "
            f"correct residual; token {i} differs most (expected {want[i]:.4f}, got {got[i]:.4f})")


def bad_inputs() -> dict[str, tuple[object, object]]:
    """(p, q) pairs that are not two distributions over the same vocabulary."""
    ok = np.array([0.2, 0.3, 0.5])
    return {
        "a negative entry in p": (np.array([-0.1, 0.6, 0.5]), ok),
        # clipping it to 0 would leave a valid-looking sum (1 + 1e-8): only a refusal passes
        "an entry of -1e-8 in q": (ok, np.array([-1e-8, 0.5, 0.5 + 1e-8])),
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
    with under(R_VALIDATE):
        for what, (p, q) in bad_inputs().items():
            for fname, call in (("acceptance_prob", lambda: acceptance_prob(p, q, 0)),
                                ("residual_distribution", lambda: residual_distribution(p, q))):
                expect_value_error(call, f"{fname} with {what}")
        p = np.array([0.1, 0.2, 0.3, 0.4 + 1e-10])
        q = np.array([0.4, 0.3, 0.2, 0.1 - 1e-10])
        acceptance_prob(p, q, 1)
        residual_distribution(p, q)
        for bad_x in (-1, 4, 1.5):
            try:
                acceptance_prob(p, q, bad_x)
            except (ValueError, TypeError, IndexError):
                continue
            raise AssertionError(f"acceptance_prob with token x = {bad_x!r} (vocabulary of 4): expected a "
                                 f"ValueError, nothing was raised")


# ----------------------------------------------------------------------------- part 2


def run_case(case: ExactnessCase | RankCase, fn: Callable, rng: np.random.Generator, alpha: float) -> int:
    """One statistical case, at its false-failure budget alpha: a distance test (stats.check_case) or the tail
    tests of the 32,000-token pair (lab1_ranks.RankCase)."""
    return case.check(fn, rng, alpha) if isinstance(case, RankCase) else check_case(case, fn, rng, alpha)


def false_failure(case: ExactnessCase | RankCase, alpha: float) -> float:
    """Bound on P(a correct implementation fails the case) at its budget alpha (what the power report prints)."""
    return case.false_failure(alpha) if isinstance(case, RankCase) else case_false_failure_bound(case, alpha)


def class_power() -> list[dict]:
    """The power report's class table (`autograder.audit.power`): for each sampler's 32,000-token cases, the least
    power over every member of the class of samplers that cut a distribution to its top m entries
    (lab1_ranks.class_power), and the shares of the pair's mass outside the top 32, 256 and 1024 entries."""
    p, q = lab1_ranks.big_pair()
    shares = {name: [round(1 - float(np.sort(w)[::-1][:m].sum()), 4) for m in lab1_ranks.RANK_CUTS]
              for name, w in (("p", p), ("q", q), ("r", lab1_ranks.residual(p, q)))}
    out = []
    for grade_id, cases in (("test_sampler_exactness", sampler_cases()), ("test_batch_exactness", batch_cases())):
        law, coupled = [c for c in cases if isinstance(c, RankCase)]
        out.append({"cell": grade_id, "case": law.name, "coupling": coupled.name, "eps": lab1_ranks.CLASS_EPS,
                    "mass_outside_top": {"ranks": list(lab1_ranks.RANK_CUTS), **shares},
                    "families": lab1_ranks.class_power(law, coupled, ALPHA_CELL / len(cases))})
    return out


def _check_cases(cases: list[ExactnessCase], fn: Callable, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for case in cases:
        check_case(case, fn, rng, ALPHA_CELL / len(cases))


def _law_then_coupling(cases: list[ExactnessCase]) -> tuple[list[ExactnessCase], list[ExactnessCase], float]:
    """(the law cases: the sampler drafts itself, the coupling cases: the grader's drafts given, the level
    ALPHA_CELL / len(cases) of each); the law cases come first, as the cell runs them."""
    law = [c for c in cases if not c.name.startswith(COUPLING)]
    coupled = [c for c in cases if c.name.startswith(COUPLING)]
    if cases != law + coupled:
        raise ValueError("a cell's law cases must come before its coupling cases")
    return law, coupled, ALPHA_CELL / len(cases)


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
        raise AssertionError(f"{what}: expected the global np.random state untouched, but it changed: every "
                             f"random number must come from the rng argument")
    a, b = (np.concatenate([np.ravel(np.asarray(x, dtype=float)) for x in r]) if isinstance(r, list) else
            np.ravel(np.asarray(r, dtype=float)) for r in (first, second))
    if a.shape != b.shape or not np.array_equal(a, b):
        raise AssertionError(f"{what}: expected the same output from two generators seeded alike, got "
                             f"{a[:8]} ... and {b[:8]} ...: every random number must come from the rng argument")


def expect_value_error(call: Callable[[], object], what: str) -> None:
    """call() must raise ValueError; say what happened otherwise."""
    try:
        got = call()
    except ValueError:
        return
    except Exception as err:  # noqa: BLE001 - the contract asks for ValueError, nothing else
        raise AssertionError(f"{what}: expected a ValueError, got {type(err).__name__}: {err}") from None
    raise AssertionError(f"{what}: expected a ValueError, nothing was raised (you returned {got!r})")


def check_sampler_contracts(speculative_sample: Callable) -> None:
    """Every draw from rng (same seed, same tokens; np.random untouched); ValueError on bad input."""
    p, q = pairs()["reversed"]
    with under(R_SAMPLER_RNG):
        check_randomness_contract(lambda rng: call_each(speculative_sample, [(p, q, rng)] * 200),
                                  "speculative_sample")
    rng = np.random.default_rng(0)
    with under(R_SAMPLER_REFUSE):
        expect_value_error(lambda: speculative_sample(np.array([0.2, 0.2, 0.5]), np.array([0.2, 0.3, 0.5]), rng),
                           "speculative_sample with p summing to 0.9")
        expect_value_error(lambda: speculative_sample(p, np.array([0.5, 0.5]), rng),
                           "speculative_sample with p of 4 entries and q of 2")


def check_sampler(speculative_sample: Callable) -> None:
    """speculative_sample draws exactly from p on every test pair, and given the grader's drafts x ~ q the pair
    (x, emitted token) follows the algorithm's joint law (distance tests with a stated eps, its cell's seed)."""
    law, coupled, alpha = _law_then_coupling(sampler_cases())
    rng = np.random.default_rng(_seed("test_sampler_exactness"))
    with under(R_SAMPLER_LAW):
        for case in law:
            run_case(case, speculative_sample, rng, alpha)
    with under(R_SAMPLER_COUPLING):
        for case in coupled:
            run_case(case, speculative_sample, rng, alpha)


# ----------------------------------------------------------------------------- part 3


def check_block_contracts(verify_block: Callable) -> None:
    """Clear ValueErrors on bad input, and the randomness contract."""
    model = toy_bigram()
    p_rows, q_rows = block_rows(model, (1, 0, 2))
    rng = np.random.default_rng(0)
    with under(R_BLOCK_RNG):
        check_randomness_contract(lambda r: [verify_block(np.array([1, 0, 2]), p_rows.copy(), q_rows.copy(), r)[0]
                                             for _ in range(100)], "verify_block")
    bad_p = p_rows.copy()
    bad_p[0] = [0.5, 0.5, 0.5]
    with under(R_BLOCK_REFUSE):
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
    """Forced outcomes that need no statistics: full acceptance with the bonus from the last row, a forced
    rejection with the correction from the rejected row's residual, with p != q at every position."""
    rng = np.random.default_rng(7)
    onehot = np.eye(4)
    mix = np.array([0.1, 0.2, 0.3, 0.4])
    with under(R_BLOCK_SHAPE):
        for k in (1, 2, 3):
            drafted = [1, 3, 0][:k]
            # every draft has p(x) >= q(x) (accepted for sure) while p != q; the bonus row is one-hot at 2
            q_rows = np.stack([np.array([0.4, 0.2, 0.2, 0.2]), np.array([0.3, 0.3, 0.3, 0.1]),
                               np.array([0.2, 0.3, 0.3, 0.2])][:k])
            p_rows = np.concatenate([np.stack([np.array([0.1, 0.5, 0.2, 0.2]), np.array([0.1, 0.1, 0.2, 0.6]),
                                               np.array([0.4, 0.1, 0.3, 0.2])][:k]), onehot[[2]]])
            for _ in range(20):
                tokens, n_acc = call_block(verify_block, drafted, p_rows, q_rows, rng, f"k = {k}, all accepted")
                if n_acc != k or tokens != drafted + [2]:
                    raise AssertionError(
                        f"verify_block with k = {k}, drafts {drafted} each with p(x) >= q(x) (all accepted) and "
                        f"p_rows[{k}] one-hot at token 2: expected {drafted + [2]} with n_accepted = {k}, "
                        f"got {tokens} with n_accepted = {n_acc}")
            # the target gives the first drafted token probability 0: rejected at once; its residual is
            # one-hot at token 0, while every later row would give other tokens
            p_rows2 = np.concatenate([onehot[[0]], np.stack([mix] * k)])
            q_rows2 = np.stack([onehot[1]] + [mix[::-1]] * (k - 1))
            for _ in range(20):
                tokens, n_acc = call_block(verify_block, drafted, p_rows2, q_rows2, rng, f"k = {k}, forced rejection")
                if n_acc != 0 or tokens != [0]:
                    raise AssertionError(
                        f"verify_block with k = {k} where the target gives the first drafted token probability 0 "
                        f"(p_rows[0] one-hot at token 0): expected [0] with n_accepted = 0, got {tokens} with "
                        f"n_accepted = {n_acc}")



def check_block_exactness(verify_block: Callable) -> None:
    """verify_block emits tokens whose joint law is the target's (distance test with a stated eps, its cell's seed)."""
    with under(R_BLOCK_LAW):
        _check_cases(block_cases(), verify_block, seed=_seed("test_block_exactness"))


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
    with under(R_ALPHA):
        for n_acc, k, want in alpha_cases():
            _assert_close(estimate_alpha(n_acc, k), want,
                          f"estimate_alpha(n_accepted={[int(v) for v in np.ravel(n_acc)]}, k={k})")
    with under(R_ALPHA_REFUSE):
        for n_acc, k in (([4], 3), ([-1], 3), ([], 3), ([1], 0)):
            expect_value_error(lambda: estimate_alpha(n_acc, k),
                               f"estimate_alpha(n_accepted={n_acc}, k={k}) (impossible logs)")


# ----------------------------------------------------------------------------- part 5


def check_batch_contracts(speculative_sample_batch: Callable) -> None:
    """Every random number from rng: same seed, same tokens; np.random untouched."""
    p, q = pairs()["reversed"]
    with under(R_BATCH_RNG):
        check_randomness_contract(lambda rng: speculative_sample_batch(np.tile(p, (1000, 1)), np.tile(q, (1000, 1)),
                                                                       rng), "speculative_sample_batch")


def check_batch_exactness(speculative_sample_batch: Callable) -> None:
    """speculative_sample_batch draws row b exactly from p[b], independently of the other rows, and given the
    grader's drafts each row's (draft, emitted token) follows the algorithm's joint law (distance tests)."""
    law, coupled, alpha = _law_then_coupling(batch_cases())
    rng = np.random.default_rng(_seed("test_batch_exactness"))
    with under(R_BATCH_LAW):
        for case in law:
            run_case(case, speculative_sample_batch, rng, alpha)
    with under(R_BATCH_COUPLING):
        for case in coupled:
            run_case(case, speculative_sample_batch, rng, alpha)


SPEED_OUTPUT_ALPHA = 1e-4  # false-failure probability of the law check of ONE timed call's output
# Power of that check, for every pair `speedtest.batch_pair` can draw: tau = E[T] + sqrt(ln(1 / alpha) / (2 n))
# with E[T] <= sqrt(V - 1) / (2 sqrt(n)) (Cauchy-Schwarz on de Moivre's E|N_i - n p_i| <= sqrt(n p_i (1 - p_i)))
# gives tau <= 0.01347 at n = 50,000, V = 4, so every output law at TV >= SPEED_OUTPUT_EPS from the call's p is
# caught with probability >= 0.999 (stats.eps_at_power at that tau; tests/autograder/checks/test_lab1.py).
SPEED_OUTPUT_EPS = 0.0204


def _timed_output_checker(rows: int) -> Callable[[object, np.ndarray, np.ndarray], None]:
    """A check of every output the speed test's calls return (`on_output(out, p, q)`): integer tokens
    of the right shape, a law close to that call's own pair (p, q) (a fresh pair for each call,
    `speedtest.batch_pair`; distance test at level SPEED_OUTPUT_ALPHA per call, at most 23 calls:
    false failures <= 0.0023; power >= 0.999 at TV >= SPEED_OUTPUT_EPS = 0.0204 for every pair of the
    family), and never the same array twice (a correct sampler repeats 50000 draws with probability
    about 0). Without it, a sampler could spot the timed calls by their size and return garbage fast,
    or return answers it drew before the clock started: those follow another call's pair, and mapping
    them through any function of the tokens (one of the 4^4 = 256 maps) lands within 0.0204 of a fresh
    pair's p with probability about 0.46 % per call (Monte Carlo over the family, upper end < 0.6 %,
    tests/autograder/checks/test_lab1.py), so such a sampler passes its >= 7 timed calls with
    probability below 1e-14."""
    seen: list[bytes] = []

    def check(out, p: np.ndarray, q: np.ndarray) -> None:
        tokens = batch_result(out, rows)
        # the same distance test as the exactness cases (range, impossible tokens, TV against its threshold)
        case = ExactnessCase(f"speculative_sample_batch in a timed call on {rows} copies of that call's pair "
                             f"(a pair drawn for the call)", exact_law(p, q), rows,
                             lambda fn, rng, n: tokens, batched=True)
        check_case(case, None, None, SPEED_OUTPUT_ALPHA)
        digest = tokens.astype(np.int64).tobytes()
        if digest in seen:
            raise AssertionError("speculative_sample_batch: expected fresh draws in every timed call, got the very "
                                 "same tokens in two of them")
        seen.append(digest)
    return check


def speed_test(batch_fn: Callable, budget_s: float = speedtest.BATCH_BUDGET_S) -> speedtest.SpeedResult:
    """`speclab.speedtest.batch_speedup` (what the notebook's speed cell runs) under the graders' lock, the
    student's sandbox paused while the baseline runs, the rounds' pairs drawn from the grading run's key
    (autograder/checks/hidden.py), every output checked afterwards against its call's pair
    (_timed_output_checker). The sampler is timed by the CPU time of the student's code, the baseline by the
    CPU time of this thread (timing.cpu_clocks), as the notebook's speed cell times both by its CPU time."""
    from . import timing

    return speedtest.batch_speedup(batch_fn, budget_s, section=timing.timing_lock,
                                   on_output=_timed_output_checker(speedtest.BATCH_ROWS),
                                   pair_seed=_seed("test_batch_speed"),
                                   around=timing.student_paused({"batch"}), clock_of=timing.cpu_clocks({"batch"}))


def measure_speedup(batch_fn: Callable) -> float:
    """Median over paired rounds of (time of draws_vectorised) / (time of batch_fn), on the same rows."""
    return speed_test(batch_fn).median


def check_batch_speed(speculative_sample_batch: Callable) -> None:
    """speculative_sample_batch runs at least SPEEDUP_REQUIRED of the speed of `draws_vectorised` on the same rows:
    a sequential sign test (speclab/speedtest.py) takes the point only on a clear verdict; a correct
    sampler whose median ratio is at least the bar loses it with probability at most
    ALPHA_CLAUSE (1.23 %), plus SPEED_OUTPUT_ALPHA per call from the check of its output against its own
    freshly drawn pair (at most 23 calls: 0.23 %)."""
    from . import timing

    with under(R_BATCH_SPEED):
        result = speed_test(speculative_sample_batch)
        if result.verdict == "fail":
            above = sum(r >= SPEEDUP_REQUIRED for r in result.ratios)
            raise timing.TimingFailure(
                f"speculative_sample_batch: expected at least {SPEEDUP_REQUIRED:g} of the speed of "
                f"speclab.speedtest.draws_vectorised on the same rows (at most {1 / SPEEDUP_REQUIRED:.0f} times its "
                f"time), measured {result.median:.3f} (median of {len(result.ratios)} paired "
                f"rounds, {above} of them at or above the bar){'; ' + result.note if result.note else ''}")
        timing.figure(FIGURE, round(result.median, 3))
        if result.verdict == "inconclusive":
            timing.undecided(f"batch speed {result.median:.3f} of the bare draws' (median of {len(result.ratios)} "
                             f"paired rounds) against the {SPEEDUP_REQUIRED:g} bar: not clear either way (the grader times it again "
                             f"alone; if it stays unclear, the point is held until it is timed again)")


# ----------------------------------------------------------------------------- registry
def report_extra(grade_id: str, reference) -> str:
    """Measured facts `python -m autograder.audit.power` adds to a deterministic cell's note."""
    if grade_id == "test_batch_speed":
        return f" (the reference measured {measure_speedup(reference.speculative_sample_batch):.3f} here)"
    return ""


_EXACT = "0: exact values, tolerance 1e-9, no randomness"
_SAME_SEED = "0: the same seed twice, the global state compared, ValueError on fixed invalid inputs"
CELLS: list[CellSpec] = [
    CellSpec("test_acceptance_prob", 1, 2, check_acceptance_prob, ("acceptance_prob",),
             rules=(R_ACCEPT, R_NEVER_DRAFTED), note=_EXACT),
    CellSpec("test_residual_distribution", 1, 2, check_residual_distribution, ("residual_distribution",),
             rules=(R_RESIDUAL, R_NO_RESIDUAL), note=_EXACT),
    CellSpec("test_input_validation", 1, 1, check_input_validation, ("acceptance_prob", "residual_distribution"),
             rules=(R_VALIDATE,), note="0: ValueError expected on fixed invalid inputs, no randomness"),
    CellSpec("test_sampler_contracts", 2, 1, check_sampler_contracts, ("speculative_sample",),
             rules=(R_SAMPLER_RNG, R_SAMPLER_REFUSE), note=_SAME_SEED),
    CellSpec("test_sampler_exactness", 2, 3, check_sampler, ("speculative_sample",), sampler_cases, 20261,
             rules=(R_SAMPLER_LAW, R_SAMPLER_COUPLING)),
    CellSpec("test_block_contracts", 3, 1, check_block_contracts, ("verify_block",),
             rules=(R_BLOCK_RNG, R_BLOCK_REFUSE), note=_SAME_SEED),
    CellSpec("test_block_structure", 3, 1, check_block_structure, ("verify_block",), rules=(R_BLOCK_SHAPE,),
             note="0: outcomes forced for a correct verifier (acceptance probabilities 1 or 0, one-hot rows)",
             randomised=True),  # forced outcomes for a correct verifier, not for a wrong one
    CellSpec("test_block_exactness", 3, 3, check_block_exactness, ("verify_block",), block_cases, 20263,
             rules=(R_BLOCK_LAW,)),
    CellSpec("test_alpha_estimator", 4, 2, check_alpha_estimator, ("estimate_alpha",),
             rules=(R_ALPHA, R_ALPHA_REFUSE), note="0: values worked by hand, tolerance 1e-9, no randomness"),
    CellSpec("test_batch_contracts", 5, 1, check_batch_contracts, ("speculative_sample_batch",),
             rules=(R_BATCH_RNG,), note="0: the same seed twice, the global state compared"),
    CellSpec("test_batch_exactness", 5, 2, check_batch_exactness, ("speculative_sample_batch",), batch_cases,
             20265, rules=(R_BATCH_LAW, R_BATCH_COUPLING)),
    CellSpec("test_batch_speed", 5, 1, check_batch_speed, ("speculative_sample_batch",), seed=4,
             seed_name="test_batch_speed pairs", rules=(R_BATCH_SPEED,), timed=True, randomised=True,
             note=f"timing: a sequential sign test of median speed >= {SPEEDUP_REQUIRED:g} of draws_vectorised's "
                  f"fails a sampler at or above the bar with probability <= 1.23 % (plus <= 0.23 % from the check "
                  f"of the timed outputs, each against its call's own freshly drawn pair)"),
]


def _seed(grade_id: str) -> int:
    """The seed of a cell's randomness (CellSpec.draw_seed)."""
    return spec_of(CELLS, grade_id).draw_seed()


defer_to_grader(globals())  # the grading pipeline's nbgrader run leaves these checks to the grader
