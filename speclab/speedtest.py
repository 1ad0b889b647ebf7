"""The labs' speed tests, as the grader runs them and as a student's notebook runs them.

Notation: see the `speclab` package docstring.

A speed test compares a student's code with a baseline timed alongside it, in **paired rounds**:
each round calls the baseline and every candidate once, in turn, so a slow-down of the machine
during a round hits both sides of that round's ratio (baseline time / candidate time). The
ratios go into a one-sided **sign test** of "the median ratio is at least the bar" (rounds are
exchangeable; nothing is assumed about the shape of their distribution), looked at after
``LOOKS[0]``, ``LOOKS[1]``, ... rounds. At each look the code fails (clearly below the bar),
passes (clearly above) or, inconclusive, gets more rounds while the time budget lasts; a timing
still undecided at the end is *undecided*: the grader neither takes nor gives points for it, times
it again alone at the end of the class's grading, and holds the points (pending) if it stays unclear.

Error rates, both ways. A false failure: for code whose per-round ratio has median at least the bar,
the look after ``LOOKS[i]`` rounds fails it with probability at most ``LOOK_ALPHAS[i]``, over all looks
at most ``ALPHA_CLAUSE = sum(LOOK_ALPHAS)`` (Bonferroni; exactly ``power(0.5)``). A false pass: for
code whose median is at most the bar, the look passes it with probability at most ``PASS_ALPHAS[i]``,
over all looks at most ``ALPHA_PASS`` (exactly ``pass_probability(0.5)``). The pass side spends a larger
budget than the fail side: a correct student's code should be decided at the first looks, and a pass
costs nobody a point. ``power(theta)`` and ``pass_probability(theta)`` are the exact probabilities of a
fail and of a pass verdict when each round falls below the bar with probability theta (scipy.stats.binom).

Clocks. On a CPU a round's times are CPU seconds (`speclab.clock.cpu_time`: what the code worked, not
how long it waited for a core), so a busy machine slows neither side of a ratio; on a GPU they are wall
seconds with the device synchronised. The grader's ``clock_of`` hook reads the student's code on its
sandbox's CPU time, as the kernel counts it (autograder/checks/timing.py).

Timings that cannot be bought: every call of a student's code gets inputs it has not seen before
(`paired_rounds`' ``each_round`` hook draws them outside the clock), so nothing computed before the
clock started can answer it (Lab 1: a pair of its own, drawn from a continuous family; Lab 2: a prompt of
its own), and every output is checked (Lab 1: against its call's own law, by the
grader; Lab 2: against the course's greedy tokens, here). The grader's ``around`` hook pauses the
student's sandbox while a baseline of its own is timed.

The grader (autograder/checks/timing.py) runs the very functions of this module, adding only its
lock (one student timed at a time), the pause, hidden seeds and the check of every Lab 1 output; a
notebook runs them as they are, so the verdict it prints is the one the grader would give on the
same machine.
"""
from __future__ import annotations

import itertools
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Sequence

import numpy as np

LOOKS = (7, 10, 14, 18, 22)  # rounds after which the verdict is looked at
# false-failure budget of each look: the first look can only fail code whose 7 rounds ALL fall below
# the bar (probability 0.5**7 = 0.0078 at worst); the later looks share the rest
LOOK_ALPHAS = (0.0079, 0.0011, 0.0011, 0.0011, 0.0011)
ALPHA_LOOK = LOOK_ALPHAS[0]
ALPHA_CLAUSE = sum(LOOK_ALPHAS)  # 1.23 % per timed clause
# false-pass budget of each look: passes after 7 of 7, 9 of 10, 12 of 14, 15 of 18 or 18 of 22 rounds at or above
# the bar; over all looks at most 3.1 % (Bonferroni), exactly 1.9 % (pass_probability(0.5))
PASS_ALPHAS = (0.0079, 0.011, 0.0065, 0.0038, 0.0022)
ALPHA_PASS = sum(PASS_ALPHAS)

# Lab 1: the vectorised sampler against the two draws every one-position sampler makes, vectorised over the batch.
# The baseline is code of the same kind as the code it times (numpy passes over the batch): the two slow down
# together when the machine is shared, and their ratio holds still (it drifted 1.02-1.08x over eight processes where
# a ratio against a Python loop drifted 1.38-1.47x: python -m benchmarks.lab1_baseline, benchmarks/cpu/).
BATCH_BAR = 0.1  # the sampler's speed as a fraction of the bare draws' (it may cost at most 10 times their time): the
# reference measures about 0.37 and a plain correct sampler written from the lab's text about 0.25 (CPU time, 2-core
# course machine); a loop over rows about 0.003
BATCH_ROWS = 50000  # rows of one timed call, of the sampler and of the baseline alike
BATCH_BUDGET_S = 10.0  # seconds of timed rounds after which no new look starts
BATCH_VOCAB = 4  # tokens of the timed pair; a fresh pair every round (`batch_pair`)
BATCH_FLOOR = 0.1  # mass spread uniformly over the vocabulary: every probability >= BATCH_FLOOR / BATCH_VOCAB

# Lab 2: the speculative decoder against the course's autoregressive baseline
DECODE_BAR_CPU = 1.2  # best-k speed-up required on a CPU: a decoder that never speculates measures about 1.0x, the
# reference about 1.8-2.0x and a plain correct decoder written from the lab's text about 1.7x (audit timing_agreement)
DECODE_BAR_CUDA = 1.0  # on a GPU the shipped pair is tiny and launch-bound: must not be slower
THEORY_FRACTION = 0.75  # measured S >= 0.75 x the S predicted from the run's own alpha and costs
K_GRID = (3, 4, 6)  # draft lengths timed for "the best k"
DECODE_NEW = 128  # tokens generated per timed call
VERIFY_CALLS = 16  # forwards per timed call when measuring c_verify(k)
DECODE_BUDGET_S = 45.0  # seconds of timed rounds after which no new look starts
DECODE_HARD_LIMIT_S = 150.0  # never time longer
DECODE_PROMPT = {"n_windows": 1, "length": 32, "seed": 5}  # the notebook sweep's prompt; never a timed one
DECODE_POOL = {"n_windows": 32, "length": 512, "seed": 7}  # shipped windows: the timed prompts' alphabet
DECODE_POOL_SEED = 11  # a notebook's default prompts; the grader draws its own seed (hidden.py)


def _binom():
    """scipy.stats.binom, imported when first needed: scipy.stats takes about 0.7 s to import, which every
    grader process that imports this module would otherwise pay, timing or not."""
    from scipy import stats

    return stats.binom


def thresholds(n: int, alpha: float = ALPHA_LOOK, alpha_pass: float | None = None) -> tuple[int, int]:
    """(fail_at_most, pass_at_least): with n rounds and X of them at or above the bar, the look
    fails the code if X <= fail_at_most, passes it if X >= pass_at_least, else is inconclusive.

    fail_at_most is the largest x with P(Binom(n, 1/2) <= x) <= alpha (-1 when none is), the
    one-sided sign test of median >= bar; pass_at_least is the smallest y with
    P(Binom(n, 1/2) >= y) <= alpha_pass (n + 1 when none is), the sign test of median <= bar
    (alpha_pass defaults to alpha: the two sides mirror each other)."""
    binom = _binom()
    alpha_pass = alpha if alpha_pass is None else alpha_pass
    x = int(binom.ppf(alpha, n, 0.5))
    while x >= 0 and binom.cdf(x, n, 0.5) > alpha:
        x -= 1
    y = n - int(binom.ppf(alpha_pass, n, 0.5))  # P(X >= y) = P(X <= n - y) by symmetry
    while y <= n and binom.sf(y - 1, n, 0.5) > alpha_pass:
        y += 1
    return x, y


def alphas_at(n: int) -> tuple[float, float]:
    """(false-failure, false-pass) budgets of the look taken after n rounds: those of the first look at or
    after n (a look cut short by the time limit spends the budgets of the look it replaces)."""
    for look, a, b in zip(LOOKS, LOOK_ALPHAS, PASS_ALPHAS):
        if n <= look:
            return a, b
    return LOOK_ALPHAS[-1], PASS_ALPHAS[-1]


def alpha_at(n: int) -> float:
    """The false-failure budget of the look taken after n rounds (`alphas_at`)."""
    return alphas_at(n)[0]


def verdict(ratios: Sequence[float], bar: float, alpha: float | None = None) -> str:
    """'fail', 'pass' or 'inconclusive' for per-round ratios against the bar (one look; alpha, when given,
    sets both sides' budgets, else the look's own `alphas_at`)."""
    n = len(ratios)
    a, b = alphas_at(n) if alpha is None else (alpha, alpha)
    above = sum(r >= bar for r in ratios)
    fail_at_most, pass_at_least = thresholds(n, a, b)
    if above <= fail_at_most:
        return "fail"
    if above >= pass_at_least:
        return "pass"
    return "inconclusive"


def outcome_probabilities(theta: float, looks: Sequence[int] = LOOKS, alphas: Sequence[float] = LOOK_ALPHAS,
                          pass_alphas: Sequence[float] = PASS_ALPHAS) -> list[tuple[float, float]]:
    """[(P(fail at look i), P(pass at look i)) for each look] when each round falls below the bar
    independently with probability theta; exact, by carrying the distribution of the count above the bar
    from look to look (scipy.stats.binom for the rounds in between)."""
    dist = np.zeros(1)  # dist[x] = P(no verdict yet and x rounds above the bar so far)
    dist[0] = 1.0
    done = 0
    out = []
    for n, alpha, beta in zip(looks, alphas, pass_alphas):
        step = _binom().pmf(np.arange(n - done + 1), n - done, 1 - theta)
        dist = np.convolve(dist, step)
        fail_at_most, pass_at_least = thresholds(n, alpha, beta)
        failed = float(dist[: fail_at_most + 1].sum()) if fail_at_most >= 0 else 0.0
        passed = float(dist[pass_at_least:].sum())
        dist[: max(fail_at_most + 1, 0)] = 0
        dist[pass_at_least:] = 0
        out.append((failed, passed))
        done = n
    return out


def power(theta: float, looks: Sequence[int] = LOOKS, alphas: Sequence[float] = LOOK_ALPHAS,
          pass_alphas: Sequence[float] = PASS_ALPHAS) -> float:
    """P(a fail verdict at some look) when each round falls below the bar independently with probability
    theta (`outcome_probabilities`). theta = 1/2 bounds the false failures."""
    return sum(f for f, _ in outcome_probabilities(theta, looks, alphas, pass_alphas))


def pass_probability(theta: float, looks: Sequence[int] = LOOKS, alphas: Sequence[float] = LOOK_ALPHAS,
                     pass_alphas: Sequence[float] = PASS_ALPHAS) -> float:
    """P(a pass verdict at some look) when each round falls below the bar independently with probability
    theta. theta = 1/2 bounds the false passes."""
    return sum(p for _, p in outcome_probabilities(theta, looks, alphas, pass_alphas))


def decided_by(theta: float, look: int) -> float:
    """P(a verdict, either way, at or before the look after `look` rounds), each round below the bar with
    probability theta."""
    return sum(f + p for n, (f, p) in zip(LOOKS, outcome_probabilities(theta)) if n <= look)


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return math.nan if n == 0 else (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


@dataclass
class Rounds:
    """Per-round wall times of the functions timed together (seconds): times[i][j] is round i, function j."""

    labels: list[str]
    times: list[list[float]]
    lock_note: str = ""

    def column(self, label: str) -> list[float]:
        j = self.labels.index(label)
        return [r[j] for r in self.times]

    def ratios(self, numerator: str, denominator: str) -> list[float]:
        return [a / b for a, b in zip(self.column(numerator), self.column(denominator))]


def paired_rounds(fns: Sequence[Callable[[], object]], labels: Sequence[str], decide: Callable[[Rounds], bool],
                  budget_s: float, device=None, looks: Sequence[int] = LOOKS, hard_limit_s: float | None = None,
                  section: Callable[[], object] | None = None, each_round: Callable[[int], None] | None = None,
                  around: Callable[[str], ContextManager] | None = None,
                  clock_of: Callable[[str], Callable] | None = None) -> Rounds:
    """Time ``fns`` round-robin, after one warm-up round, inside ``section()`` (a context manager
    yielding a note; the grader's is its lock); after each look call ``decide(rounds)`` and stop
    when it returns True (a clear verdict), at the last look, or at the first look after
    ``budget_s`` seconds of timing. The first look is always completed (fewer rounds could never
    give a verdict) unless ``hard_limit_s`` (default 3 * budget_s) runs out first; a look cut short
    by it is the last one.

    Two hooks, never timed. ``each_round(i)`` runs before round i (0 is the warm-up, then 1, 2, ...):
    it gives the round fresh inputs. ``around(label)`` gives a context manager for each timed call:
    it is entered before the clock starts and left after it stops (the grader's pauses the
    student's sandbox while a baseline of its own runs, see the grader's timing module).

    Clocks: ``clock_of(label)``, when given, is the stopwatch of that label's calls (the grader's reads
    the student's code on its sandbox's CPU time). Otherwise the real clock of the device
    (`speclab.clock.real_clock`: CPU seconds on a CPU, synchronised wall seconds on a GPU), except that
    a notebook's call (no section) honours a fake installed in speclab's stopwatch seam
    (`speclab.clock.stopwatch()`: a test feeding adversarial timings, tests/book/test_measuring_pages.py),
    so its page is tested like any other; the grader (a section given) never does."""
    from .clock import real_clock, steady_allocator, stopwatch, wall_time

    if len(fns) != len(labels):
        raise ValueError(f"{len(fns)} functions and {len(labels)} labels: one label per function")
    steady_allocator()  # as the grader's sandbox holds the student's process (speclab.clock.GLIBC_TUNABLES)
    seam = stopwatch()
    default = real_clock(device) if section is not None or seam is wall_time else seam
    clocks = {label: (clock_of(label) if clock_of is not None else default) for label in labels}
    hard = 3 * budget_s if hard_limit_s is None else hard_limit_s

    def one_round(i: int) -> list[float]:
        if each_round is not None:
            each_round(i)
        times = []
        for fn, label in zip(fns, labels):
            with around(label) if around is not None else nullcontext():
                times.append(clocks[label](fn, device))
        return times

    with (section() if section is not None else nullcontext("")) as note:
        one_round(0)
        rounds = Rounds(list(labels), [], note or "")
        start = time.monotonic()
        for look in looks:
            while len(rounds.times) < look and time.monotonic() - start <= hard:
                rounds.times.append([_positive(t) for t in one_round(len(rounds.times) + 1)])
            elapsed = time.monotonic() - start
            if decide(rounds) or elapsed > budget_s or elapsed > hard:
                break
    return rounds


def _positive(seconds: float) -> float:
    """A timing as a ratio can use it: finite and above 1 ns (a fake or broken stopwatch may say 0, NaN, inf)."""
    return seconds if math.isfinite(seconds) and seconds > 1e-9 else (1e-9 if not seconds > 1e-9 else 1e9)


def combine(verdicts: Sequence[str]) -> str:
    """Several chances at one bar (one per k): pass if one passes clearly, fail only if all fail clearly."""
    return "pass" if "pass" in verdicts else "fail" if all(v == "fail" for v in verdicts) else "inconclusive"


# ----------------------------------------------------------------------------- Lab 1
def draws_vectorised(p_rows: np.ndarray, q_rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The baseline of Lab 1's speed test: the two random draws every one-position speculative sampler makes, for
    every row at once (a draft from that row's q by inverse CDF, one uniform), and nothing else. It is no answer
    to the lab (it never accepts, rejects or draws from a residual); it sets the pace of the bare vectorised work.
    Returns the drafts, so that a test can check their law."""
    cdf = np.cumsum(q_rows, axis=1)
    u = rng.random((len(q_rows), 1)) * cdf[:, -1:]
    drafts = np.minimum((cdf <= u).sum(axis=1), q_rows.shape[1] - 1)
    rng.random(len(q_rows))
    return drafts


@dataclass
class SpeedResult:
    """A timed comparison: per-round ratios, their median, the verdict against the bar, and why."""

    ratios: list[float]
    bar: float
    verdict: str  # 'pass', 'fail' or 'inconclusive'
    note: str = ""
    details: dict = field(default_factory=dict)

    @property
    def median(self) -> float:
        return median(self.ratios)

    def summary(self, what: str) -> str:
        words = {"pass": "clearly at or above the bar: the grader would give the point(s)",
                 "fail": "clearly below the bar: the grader would take the point(s)",
                 "inconclusive": "not clear either way: the grader would time it again alone, and hold the "
                                 "point(s), neither given nor taken, if it stayed unclear"}
        return (f"{what}: median {self.median:.2f}x over {len(self.ratios)} paired rounds, bar {self.bar:g}x; "
                f"{words[self.verdict]}" + (f" ({self.note})" if self.note else ""))


def batch_pair(gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One round's pair (p, q) of Lab 1's speed test, each 0.9 * Dirichlet(1, ..., 1) + 0.1 / V over
    V = BATCH_VOCAB tokens, drawn independently from `gen`: a continuous family, so no two rounds share a
    law, and every probability is at least BATCH_FLOOR / V = 0.025 (no token is impossible, and a row
    costs the same whatever the round's pair)."""
    p, q = (1 - BATCH_FLOOR) * gen.dirichlet(np.ones(BATCH_VOCAB), size=2) + BATCH_FLOOR / BATCH_VOCAB
    return p, q


def batch_speedup(batch_fn: Callable, budget_s: float = BATCH_BUDGET_S, section=None,
                  on_output: Callable[[object, np.ndarray, np.ndarray], None] | None = None, seed: int = 3,
                  pair_seed: int = 4, around: Callable[[str], ContextManager] | None = None,
                  clock_of: Callable[[str], Callable] | None = None) -> SpeedResult:
    """Lab 1's speed test: rounds of one call of batch_fn and one call of `draws_vectorised`, each on BATCH_ROWS
    copies of a pair; a round's ratio is the draws' time over the batch's (batch_fn's speed as a fraction of the
    bare draws'). Stops at the first look with a clear verdict.

    Each round (the warm-up too) gets a fresh pair, outside the clock: `batch_pair` draws it from a
    generator of its own (`pair_seed`; never `rng`, the generator batch_fn is handed), for the batch
    call and the baseline alike. Tokens drawn before the clock started follow another round's law, and no
    lookup maps them onto this round's: a fresh law needs fresh sampling. `on_output(out, p, q)`
    receives every output of batch_fn (the warm-up's and each timed call's) with the pair its rows copy
    (the grader checks each one after the timing). `around` and `clock_of` are `paired_rounds`' hooks; the
    batch call's label is "batch", the baseline's "draws".

    Each call's time includes building its two BATCH_ROWS-row inputs (`np.tile` of the round's pair), the
    baseline's as the batch call's, and each call gets arrays of its own. In the grader the rows arrive through
    the sandbox's wire as one row and a count, and the student's side builds them with the same `np.tile`, on the
    student's clock; timing the build here too makes the notebook measure what the grader measures (without it
    the grader measured about 0.8 of the notebook's figure: autograder/audit/timing_agreement.py)."""
    rng = np.random.default_rng(seed)
    pairs = np.random.default_rng(pair_seed)
    now: dict = {}  # the round's pair
    outputs: list = []

    def new_pair(_round: int) -> None:
        now["p"], now["q"] = batch_pair(pairs)

    def batch() -> None:  # the rows are built inside the timed call, as the grader's wire builds them
        rows_p, rows_q = np.tile(now["p"], (BATCH_ROWS, 1)), np.tile(now["q"], (BATCH_ROWS, 1))
        outputs.append((batch_fn(rows_p, rows_q, rng), now["p"], now["q"]))

    def draws() -> None:  # the same rows, built the same way, on the baseline's clock
        draws_vectorised(np.tile(now["p"], (BATCH_ROWS, 1)), np.tile(now["q"], (BATCH_ROWS, 1)), rng)

    rounds = paired_rounds([batch, draws], ["batch", "draws"],
                           lambda r: verdict(r.ratios("draws", "batch"), BATCH_BAR) != "inconclusive",
                           budget_s, section=section, each_round=new_pair, around=around, clock_of=clock_of)
    if on_output is not None:
        for out, pair_p, pair_q in outputs:
            on_output(out, pair_p, pair_q)
    ratios = rounds.ratios("draws", "batch")
    return SpeedResult(ratios, BATCH_BAR, verdict(ratios, BATCH_BAR), rounds.lock_note)


# ----------------------------------------------------------------------------- Lab 2
def predicted_with_catch_up(alpha: float, k: int, c: float, c_verify: float) -> float:
    """The lab's cost model with the draft's catch-up: S = E[N] / ((k + alpha^k) / c + c_verify(k)).

    A step drafts k tokens (k draft forwards) and verifies them in one target forward over k + 1
    positions; when all k are accepted (probability alpha^k) the draft has not seen its own last
    token and is fed it once more, so a step costs k + alpha^k draft forwards on average."""
    tokens = k + 1 if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return float(tokens / ((k + alpha**k) / c + c_verify))


def prompt_alphabet() -> list[int]:
    """The bytes that occur in the shipped windows DECODE_POOL (the held-out text's characters), sorted."""
    from .data import shipped_windows

    return sorted(set(shipped_windows(**DECODE_POOL).flatten().tolist()))


def decode_prompts(target, n: int, seed: int = DECODE_POOL_SEED, length: int | None = None) -> list:
    """n distinct prompts of `length` tokens (default DECODE_PROMPT's) for the timed calls of Lab 2's speed
    test, drawn from `seed` (CPU tensors, in the order drawn): a space no one can tabulate.

    Token 0 is uniform over the text's alphabet A (`prompt_alphabet`, |A| = 95 bytes); each
    later token, with probability 1/2, is the target's next token sampled at temperature 1 given the tokens
    so far, and otherwise uniform over A. So a prompt reads like the text the pair was trained on, drafts
    are accepted on it as on that text, and yet no prompt has probability above
    (1/|A|) (1/2 + 1/(2|A|))^(length - 1), about 7e-12 at length 32: a table of M prompts answers a timed
    call with probability at most M times that, whatever prompts it holds (1.5 million of them, which is
    what 200 MB holds at 128 bytes of answer each: at most 1.0e-5 of the calls). The grader draws `seed`
    from its run's key (hidden.py); a notebook's speed test uses a seed of the student's choosing."""
    import torch

    length = DECODE_PROMPT["length"] if length is None else length
    if n < 1 or length < 1:
        raise ValueError(f"need n >= 1 prompts of length >= 1, got n={n}, length={length}")
    alphabet = torch.tensor(prompt_alphabet())
    from .data import shipped_windows

    out, seen = [], {tuple(shipped_windows(**DECODE_PROMPT)[0].tolist())}  # never the sweep's prompt
    for block in itertools.count():  # blocks of PROMPT_BLOCK, each from a generator of its own: the first n
        # of a longer call are the same n prompts
        g = torch.Generator().manual_seed(int(np.random.SeedSequence([int(seed), block]).generate_state(1)[0]))
        for row in _prompt_block(target, alphabet, length, g):
            key = tuple(row.tolist())
            if key not in seen:
                seen.add(key)
                out.append(row)
                if len(out) == n:
                    return out


PROMPT_BLOCK = 8  # prompts drawn together (one batched forward per token)


def _prompt_block(target, alphabet, length: int, g):
    """PROMPT_BLOCK prompts of `length` tokens (decode_prompts' law), drawn with the generator g."""
    import torch

    batch = PROMPT_BLOCK
    tokens = alphabet[torch.randint(len(alphabet), (batch, 1), generator=g)]
    with torch.no_grad():
        cache = target.new_cache(batch=batch, max_len=length)
        logits = target(tokens.to(target.device), torch.arange(1, device=target.device), cache)[:, -1]
        for t in range(1, length):
            model = torch.multinomial(torch.softmax(logits.float().cpu(), dim=-1), 1, generator=g)[:, 0]
            uniform = alphabet[torch.randint(len(alphabet), (batch,), generator=g)]
            nxt = torch.where(torch.rand(batch, generator=g) < 0.5, uniform, model)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            if t + 1 < length:
                logits = target(nxt[:, None].to(target.device), torch.tensor([t], device=target.device),
                                cache)[:, -1]
    return tokens


def _alpha_counts(answer, k: int) -> tuple[int, int]:
    """(accepted, verified) drafts of one greedy run, from the accepted counts its (tokens, accepted)
    answer reports; its last step may be cut short and is left out. (0, 0) for an answer that is no
    such pair (the output check then names the fault)."""
    try:
        _, accepted = answer
        counts = [min(max(int(a), 0), k) for a in accepted]
    except (TypeError, ValueError, OverflowError):
        return 0, 0
    full = counts[:-1] or counts
    return sum(full), sum(min(a + 1, k) for a in full)


def _new_tokens(out) -> list[int] | None:
    """The tokens of a decoder's (tokens, accepted) answer, or None when it is no such pair."""
    try:
        tokens, _ = out
        return [int(t) for t in tokens]
    except (TypeError, ValueError, OverflowError):
        return None


def decoder_speedup(speculative_decode: Callable, target, draft, prompt_seed: int = DECODE_POOL_SEED,
                    ks: Sequence[int] = K_GRID, n_new: int = DECODE_NEW, budget_s: float = DECODE_BUDGET_S,
                    hard_limit_s: float = DECODE_HARD_LIMIT_S, section=None,
                    around: Callable[[str], ContextManager] | None = None,
                    clock_of: Callable[[str], Callable] | None = None) -> tuple[SpeedResult, SpeedResult]:
    """Lab 2's speed test: (speed-up against the bar, measured / predicted against THEORY_FRACTION).

    Paired rounds of the course baseline (greedy `speclab.sampling.generate` with the target), the
    same with the draft (their ratio is the round's c), the decoder at every k, and loops of
    VERIFY_CALLS cached target forwards over 1 and k + 1 tokens (the round's c_verify(k)). Each
    round and k gives a speed-up (baseline time / decoder time) and its ratio to the prediction
    from that call's own alpha (from the accepted counts it returns) and that round's costs. Each
    clause passes if some k passes clearly and fails only if every k fails clearly.

    Every call of the decoder (the warm-up's too) gets a prompt no earlier call got: before each
    round, outside the clock, each k takes the next of `decode_prompts(..., prompt_seed)`; the
    baselines run on the first k's prompt. A decoder that keeps the answers of earlier calls has no
    answer to give. After the rounds every output must be the target's greedy tokens on its prompt,
    each the target's argmax given the tokens before it up to GREEDY_TOL (`_check_greedy_answers`): else
    an AssertionError, whatever the timings. `around` and `clock_of` are `paired_rounds`' hooks; the decoder's
    labels are "k=3", "k=4", ..."""
    import torch

    from .measure import forward_step_fns
    from .sampling import generate

    bar = DECODE_BAR_CPU if target.device.type == "cpu" else DECODE_BAR_CUDA
    if target.device.type == "cpu":
        torch.set_num_threads(1)  # one thread: stable ratios on a shared machine
    ks = list(ks)
    pool = [pr.to(target.device) for pr in decode_prompts(target, (max(LOOKS) + 1) * len(ks), prompt_seed)]
    tf = forward_step_fns(target, [1] + [k + 1 for k in ks], context_len=64)
    now = {"round": 0}
    prompts: dict = {}  # (round, k) -> the prompt of that call
    answers: dict = {}  # (round, k) -> what the decoder returned

    def new_prompts(i: int) -> None:
        now["round"] = i
        for j, k in enumerate(ks):
            prompts[i, k] = pool[i * len(ks) + j]

    def baseline() -> None:
        generate(target, prompts[now["round"], ks[0]][None], n_new, temperature=0)

    def decode(k: int) -> Callable[[], None]:
        def run() -> None:
            i = now["round"]
            answers[i, k] = speculative_decode(target, draft, prompts[i, k], n_new, k, temperature=0.0)
        return run

    def loop(fn):
        def run():
            for _ in range(VERIFY_CALLS):
                fn()
        return run

    fns = [baseline, lambda: generate(draft, prompts[now["round"], ks[0]][None], n_new, temperature=0)]
    fns += [decode(k) for k in ks]
    fns += [loop(f) for f in tf.values()]
    labels = ["baseline", "draft baseline"] + [f"k={k}" for k in ks] + [f"target T={t}" for t in tf]

    def counts(rounds: Rounds, k: int) -> list[tuple[int, int]]:  # timed round r is round r + 1 (0: warm-up)
        return [_alpha_counts(answers.get((r + 1, k)), k) for r in range(len(rounds.times))]

    def alphas(rounds: Rounds, k: int) -> list[float]:
        return [a / v if v else 0.0 for a, v in counts(rounds, k)]

    def per_round(rounds: Rounds) -> tuple[dict, dict]:
        speed = {k: rounds.ratios("baseline", f"k={k}") for k in ks}
        c = rounds.ratios("baseline", "draft baseline")
        theory = {}
        for k in ks:
            v = [max(1.0, x) for x in rounds.ratios(f"target T={k + 1}", "target T=1")]  # < 1 is noise
            theory[k] = [s / predicted_with_catch_up(a, k, ci, vi)
                         for s, a, ci, vi in zip(speed[k], alphas(rounds, k), c, v)]
        return speed, theory

    def verdicts(rounds: Rounds) -> tuple[str, str]:
        speed, theory = per_round(rounds)
        return (combine([verdict(speed[k], bar) for k in ks]),
                combine([verdict(theory[k], THEORY_FRACTION) for k in ks]))

    rounds = paired_rounds(fns, labels, lambda r: "inconclusive" not in verdicts(r), budget_s, target.device,
                           hard_limit_s=hard_limit_s, section=section, each_round=new_prompts, around=around,
                           clock_of=clock_of)
    _check_greedy_answers(answers, prompts, target, n_new)
    speed, theory = per_round(rounds)
    first, second = verdicts(rounds)
    measured = {k: median(speed[k]) for k in ks}
    best_k = max(measured, key=measured.get)
    c = median(rounds.ratios("baseline", "draft baseline"))
    v_best = max(1.0, median(rounds.ratios(f"target T={best_k + 1}", "target T=1")))
    pooled = {}  # accepted / verified drafts over every timed call at k
    for k in ks:
        accepted, verified = (sum(x) for x in zip(*counts(rounds, k))) if rounds.times else (0, 0)
        pooled[k] = accepted / verified if verified else 0.0
    details = {"measured": measured, "best_k": best_k, "alpha": pooled, "c": c, "c_verify": v_best,
               "predicted": predicted_with_catch_up(pooled[best_k], best_k, c, v_best),
               "theory_ratio": {k: median(r) for k, r in theory.items()}, "rounds": len(rounds.times)}
    return (SpeedResult(speed[best_k], bar, first, rounds.lock_note, details),
            SpeedResult(theory[best_k], THEORY_FRACTION, second, rounds.lock_note, details))


GREEDY_TOL = 1e-3  # a token whose logit is within this of the best is a greedy token: float32 sums taken in
# another order (a (k + 1)-token verify against one-token steps) move logits by about 1e-5, and can flip a near-tie


def _greedy_gap(target, prompt, tokens: list[int]) -> tuple[int, float] | None:
    """(j, gap) for the first new token j that is not the target's greedy token given the prompt and the new
    tokens before it, its logit `gap` below the best (inf for a token outside the vocabulary); None when every
    token is greedy, up to GREEDY_TOL. One teacher-forced forward of the target over the whole sequence."""
    import torch

    with torch.no_grad():
        seq = torch.cat([prompt.to(target.device).long(), torch.tensor(tokens, dtype=torch.long, device=target.device)])
        cache = target.new_cache(batch=1, max_len=len(seq))
        rows = target(seq[None, :-1], torch.arange(len(seq) - 1, device=target.device), cache)[0].float()
        rows = rows[len(prompt) - 1:]  # row j: the target's logits for new token j
        vocab = rows.shape[-1]
        for j, t in enumerate(tokens):
            if not 0 <= t < vocab:
                return j, float("inf")
            gap = float(rows[j].max() - rows[j, t])
            if gap > GREEDY_TOL:
                return j, gap
    return None


def _check_greedy_answers(answers: dict, prompts: dict, target, n_new: int) -> None:
    """Every answer of the decoder is the target's greedy continuation of its call's prompt: n_new tokens, each the
    target's argmax given the prompt and the tokens before it (checked by `_greedy_gap`, up to GREEDY_TOL, so a
    near-tie that float32 rounding breaks either way is no fault)."""
    for (i, k), answer in sorted(answers.items()):
        got = _new_tokens(answer)
        when = "the warm-up call" if i == 0 else f"timed round {i}"
        if got is None:
            raise AssertionError(f"speculative_decode in {when} (k={k}): expected (tokens, accepted), got "
                                 f"{type(answer).__name__}")
        if len(got) != n_new:
            raise AssertionError(f"speculative_decode in {when} (k={k}): expected {n_new} new tokens, got {len(got)}")
        fault = _greedy_gap(target, prompts[i, k], got)
        if fault is not None:
            j, gap = fault
            raise AssertionError(
                f"speculative_decode in {when} (k={k}): expected the target's greedy tokens on that call's prompt "
                f"(each timed call gets a prompt of its own), got tokens that differ from new token {j} on: the "
                f"target's logit for it is {gap:.3g} below its best there")
