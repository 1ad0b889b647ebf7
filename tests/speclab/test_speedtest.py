"""speclab.speedtest: the labs' speed tests, which the notebooks and the grader both run.

The sign test's thresholds and false-failure bounds are tested in tests/autograder/checks/test_timing.py
(through autograder.checks.timing, which re-exports them); here: the measurements themselves, on
stand-ins whose speed is known, with verdicts that do not depend on how busy the machine is.
"""
from __future__ import annotations

import numpy as np
import pytest

from speclab import speedtest


def test_draws_vectorised_makes_two_draws_per_row_and_nothing_else():
    """The baseline sets the pace of the bare vectorised work; it must not be an answer to the lab (it returns the
    drafts only, never an accepted or residual token), and it draws exactly a uniform per row for the draft and
    one more per row, nothing else."""
    p, q = speedtest.batch_pair(np.random.default_rng(0))
    rng, twin = np.random.default_rng(1), np.random.default_rng(1)
    drafts = speedtest.draws_vectorised(np.tile(p, (5, 1)), np.tile(q, (5, 1)), rng)
    assert drafts.shape == (5,) and drafts.dtype.kind == "i" and 0 <= drafts.min() and drafts.max() < 4
    twin.random((5, 1))
    twin.random(5)
    assert rng.random() == twin.random()


LAW_ROWS = 200_000
LAW_FALSE_FAILURE = 1e-6  # the chi-square test's level: a correct baseline fails it with this probability


def test_the_baselines_drafts_follow_q():
    """The baseline's drafts of 200,000 rows of one q against q, chi-square at level 1e-6. Its power against every
    law at total variation >= 0.01 from q is at least 0.9998 (scipy.stats.ncx2: the noncentrality is
    n * sum d^2 / q >= n * (2 TV)^2, Cauchy-Schwarz). That class holds an index off by one (the next token,
    wrapped: TV 0.3 for this q) and drafts drawn from p instead of q (TV(p, q) = 0.3: refused below, which shows
    the test can fail)."""
    from scipy.stats import chi2, chisquare, ncx2

    q = np.array([0.1, 0.4, 0.3, 0.2])
    p = np.array([0.4, 0.3, 0.2, 0.1])
    power = ncx2.sf(chi2.ppf(1 - LAW_FALSE_FAILURE, 3), 3, LAW_ROWS * (2 * 0.01) ** 2)
    assert power >= 0.9998
    drafts = speedtest.draws_vectorised(np.tile(p, (LAW_ROWS, 1)), np.tile(q, (LAW_ROWS, 1)), np.random.default_rng(12))
    assert chisquare(np.bincount(drafts, minlength=4), LAW_ROWS * q).pvalue > LAW_FALSE_FAILURE
    wrong = speedtest.draws_vectorised(np.tile(q, (LAW_ROWS, 1)), np.tile(p, (LAW_ROWS, 1)), np.random.default_rng(12))
    assert chisquare(np.bincount(wrong, minlength=4), LAW_ROWS * q).pvalue <= LAW_FALSE_FAILURE


def test_batch_speedup_hands_every_timed_output_over_and_decides_a_clear_case():
    """A stand-in that only builds its rows and returns zeros is faster than the bare draws, which build the same
    rows and then draw: every round's ratio is near 1 or above, ten times the bar, so a pass at the first look whatever
    the machine's load."""
    seen = []

    def instant(p, q, rng):
        return np.zeros(len(p), dtype=np.int64)

    result = speedtest.batch_speedup(instant, budget_s=5.0, on_output=lambda out, p, q: seen.append(out))
    assert result.verdict == "pass" and len(result.ratios) == speedtest.LOOKS[0]
    assert len(seen) == len(result.ratios) + 1  # the warm-up call and every timed call
    assert all(out.shape == (speedtest.BATCH_ROWS,) for out in seen)
    assert "the grader would give the point(s)" in result.summary("x")


# ----------------------------------------------------------------------------- the hooks
def test_each_round_and_around_run_in_order_and_outside_the_clock():
    """each_round(i) runs before round i (0: the warm-up), around(label) is entered before the clock
    starts and left after it stops: a fake stopwatch writes start and stop into the same log, and
    returns 1 s, so a hook's own time could never show in the times either."""
    from contextlib import contextmanager

    from speclab.clock import use_stopwatch

    log = []

    def stopwatch(fn, device=None):
        log.append("start")
        fn()
        log.append("stop")
        return 1.0

    @contextmanager
    def paused(label):
        log.append(f"enter {label}")
        yield
        log.append(f"exit {label}")

    with use_stopwatch(stopwatch):
        rounds = speedtest.paired_rounds([lambda: log.append("a"), lambda: log.append("b")], ["a", "b"],
                                         lambda r: True, budget_s=60, each_round=lambda i: log.append(f"round {i}"),
                                         around=paused)
    one = ["enter a", "start", "a", "stop", "exit a", "enter b", "start", "b", "stop", "exit b"]
    n = speedtest.LOOKS[0]
    assert log == [x for i in range(n + 1) for x in [f"round {i}"] + one]
    assert rounds.times == [[1.0, 1.0]] * n


def test_paired_rounds_without_hooks_time_as_before():
    from speclab.clock import use_stopwatch

    calls = []
    with use_stopwatch(lambda fn, device=None: fn() or 0.5):
        rounds = speedtest.paired_rounds([lambda: calls.append(1)], ["x"], lambda r: True, budget_s=60)
    assert len(calls) == speedtest.LOOKS[0] + 1 and rounds.column("x") == [0.5] * speedtest.LOOKS[0]
    with pytest.raises(ValueError, match="one label per function"):
        speedtest.paired_rounds([lambda: None], ["x", "y"], lambda r: True, budget_s=60)


# ----------------------------------------------------------------------------- Lab 1: fresh inputs
def test_batch_pair_is_a_pair_of_laws_bounded_away_from_zero():
    """0.9 * Dirichlet(1, 1, 1, 1) + 0.1 / 4: every probability in [0.025, 0.925], rows summing to 1, and
    every draw a new pair (a continuous family: two equal draws have probability 0)."""
    gen = np.random.default_rng(0)
    drawn = [speedtest.batch_pair(gen) for _ in range(1000)]
    for p, q in drawn:
        assert p.shape == q.shape == (speedtest.BATCH_VOCAB,)
        assert abs(p.sum() - 1) < 1e-12 and abs(q.sum() - 1) < 1e-12
        assert min(p.min(), q.min()) >= 0.025 - 1e-12 and max(p.max(), q.max()) <= 0.925 + 1e-12
    assert len({p.tobytes() for p, _ in drawn}) == 1000


def test_batch_speedup_draws_a_fresh_pair_before_every_call_from_a_generator_of_its_own(monkeypatch):
    """Each round's pair (the warm-up's too) is the next `batch_pair` of pair_seed's generator, the same for
    the batch call, the baseline and on_output; no two rounds share it; the rng handed to the sampler plays no
    part (a sampler that draws a lot from it, or nothing, sees the same pairs)."""
    loop_pairs = []
    real_draws = speedtest.draws_vectorised
    monkeypatch.setattr(speedtest, "draws_vectorised", lambda p, q, rng: (loop_pairs.append((p[0], q[0])),
                                                                          real_draws(p, q, rng)))

    def run(draws: int, pair_seed: int = 4) -> list:
        given, handed = [], []

        def sampler(p, q, rng):
            assert np.all(p == p[0]) and np.all(q == q[0])  # every row a copy of the round's pair
            given.append((p[0].copy(), q[0].copy()))
            rng.random(draws)
            return np.zeros(len(p), dtype=np.int64)

        loop_pairs.clear()
        speedtest.batch_speedup(sampler, budget_s=5.0, on_output=lambda out, p, q: handed.append((p, q)),
                                pair_seed=pair_seed)
        assert len(given) == len(handed) == len(loop_pairs) == speedtest.LOOKS[0] + 1  # the warm-up round too
        for (p, q), (hp, hq), (lp, lq) in zip(given, handed, loop_pairs):
            assert np.array_equal(p, hp) and np.array_equal(q, hq) and np.array_equal(p, lp) and np.array_equal(q, lq)
        gen = np.random.default_rng(pair_seed)  # the checks' own generator, one batch_pair per round
        for p, q in given:
            want_p, want_q = speedtest.batch_pair(gen)
            assert np.array_equal(p, want_p) and np.array_equal(q, want_q)
        return [p.tobytes() + q.tobytes() for p, q in given]

    pairs = run(0)
    assert len(set(pairs)) == len(pairs)  # every round's pair differs from every other
    assert pairs == run(100_000)
    assert not set(pairs) & set(run(0, pair_seed=5))


def test_batch_speedup_builds_each_calls_rows_on_the_clock_in_arrays_of_their_own(monkeypatch):
    """The grader's wire delivers a timed call's rows as one row and a count, and the student's side builds them
    with np.tile on the student's clock; the notebook's figure counts the same build, and the baseline's call
    builds its rows the same way on its own clock: every np.tile of BATCH_ROWS rows happens between the start and
    the stop of a clock, two in each call, and no two calls share an array (a sampler cannot keep anything keyed
    by the arrays it was handed)."""
    from speclab.clock import use_stopwatch

    log, handed = [], []
    real_tile = np.tile

    def tile(a, reps):
        out = real_tile(a, reps)
        if len(out) == speedtest.BATCH_ROWS:
            log.append("tile")
        return out

    monkeypatch.setattr(speedtest.np, "tile", tile)

    def stopwatch(fn, device=None):
        log.append("start")
        fn()
        log.append("stop")
        return 1.0

    def sampler(p, q, rng):
        handed.append((p, q))
        log.append("batch")
        return np.zeros(len(p), dtype=np.int64)

    with use_stopwatch(stopwatch):
        speedtest.batch_speedup(sampler, budget_s=5.0)
    calls = " ".join(log).replace("start tile tile batch stop", "B").replace("start tile tile stop", "D").split()
    assert calls == ["B", "D"] * (speedtest.LOOKS[0] + 1)  # every round's two calls, the warm-up's too
    arrays = [a for pair in handed for a in pair]
    assert len({id(a) for a in arrays}) == len(arrays) and not any(np.shares_memory(a, b) for a, b in handed)


STEADY = """
import json, resource, sys, numpy as np
from speclab import clock
if sys.argv[1] == "steady":
    assert clock.steady_allocator()
faults = []
for _ in range(3):  # a timed call's inputs: two 50,000-row arrays, built, then freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p, q = (np.tile(np.full(4, 0.25), (50000, 1)) for _ in range(2))
    del p, q
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""


def test_a_speed_test_holds_its_processs_allocator_where_the_graders_sandbox_holds_the_students():
    """speclab.clock.steady_allocator (called by paired_rounds, so by every speed test of a notebook): after it, the
    second build of a timed call's two 1.6 MB arrays reuses the heap (a few page faults) where a fresh process
    without it faults them in again (about 800 pages): the control run shows the count tells the two apart."""
    import json
    import subprocess
    import sys

    def faults(mode):
        out = subprocess.run([sys.executable, "-c", STEADY, mode], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    assert faults("default")[1] >= 700
    assert faults("steady")[1] <= 100


def test_every_speed_test_steadies_the_allocator_first(monkeypatch):
    from speclab import clock

    calls = []
    monkeypatch.setattr(clock, "steady_allocator", lambda: calls.append(1) or True)
    speedtest.paired_rounds([lambda: None], ["x"], lambda r: True, budget_s=60)
    assert calls == [1]


# ----------------------------------------------------------------------------- Lab 2: fresh prompts
@pytest.mark.slow
def test_batch_speedup_fails_a_loop_in_disguise():
    """A 'vectorised' sampler that loops in Python over every row, three draws a row, takes hundreds of times as
    long as the bare draws vectorised: clearly below the bar (0.1), so a fail at the first look (7 rounds of about
    a second; the budget leaves room for them on a busy machine)."""
    def looping(p, q, rng):
        return np.array([rng.choice(p.shape[1], p=q[b]) + 0 * rng.random() + 0 * rng.random()
                         for b in range(len(p))])

    result = speedtest.batch_speedup(looping, budget_s=60.0)
    assert result.verdict == "fail" and result.median < speedtest.BATCH_BAR
    assert "clearly below the bar" in result.summary("x")


def test_an_undecided_timing_is_neither_given_nor_taken_in_words():
    r = speedtest.SpeedResult([1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0], 1.5, "inconclusive")
    assert "time it again alone" in r.summary("x") and "neither given nor taken" in r.summary("x")


@pytest.mark.parametrize(("alpha", "k", "c", "v", "want"), [
    (0.5, 2, 4.0, 1.5, 1.75 / (2.25 / 4 + 1.5)),  # E[N] = 1.75; k + alpha^k = 2.25 draft forwards
    (1.0, 3, 2.0, 1.0, 4 / (4 / 2 + 1)),  # every draft accepted: k + 1 tokens, k + 1 draft forwards
    (0.0, 1, 10.0, 1.0, 1 / (1 / 10 + 1)),
])
def test_cost_model_with_catch_up_worked_by_hand(alpha, k, c, v, want):
    assert speedtest.predicted_with_catch_up(alpha, k, c, v) == pytest.approx(want, rel=1e-12)


def _plain(t, d, prompt, n_new, k, temperature=0.0):
    """The course's own greedy loop standing in for a decoder: the right tokens, no speculation (S about 1)."""
    from speclab.sampling import generate

    new = generate(t, prompt[None], n_new, temperature=0)[0, prompt.numel():].tolist()
    return new, [0] * n_new


def _greedy_alpha(target, draft, prompts, n_new: int = 64) -> float:
    """How often the draft's argmax is the target's along the target's greedy continuations of the prompts:
    the acceptance rate of greedy speculation, pooled over the prompts."""
    import torch

    from speclab.sampling import generate

    batch = torch.stack(list(prompts))
    with torch.no_grad():
        full = generate(target, batch, n_new, temperature=0)
        t, d = target(full).argmax(-1), draft(full).argmax(-1)
    start = batch.shape[1] - 1  # the logits at position i predict token i + 1
    return float((t[:, start:-1] == d[:, start:-1]).float().mean())


@pytest.fixture(scope="module")
def pair():
    import torch

    from speclab.checkpoints import load_pair

    return load_pair(device=torch.device("cpu"), dtype=torch.float32)


def test_decode_prompts_are_distinct_drawn_from_their_seed_and_never_the_sweeps_prompt(pair):
    from speclab.data import shipped_windows

    target, _ = pair
    prompts = speedtest.decode_prompts(target, 60)
    keys = [bytes(p.tolist()) for p in prompts]
    assert len(set(keys)) == 60 and all(len(k) == speedtest.DECODE_PROMPT["length"] for k in keys)
    assert set(b"".join(keys)) <= set(speedtest.prompt_alphabet())
    assert bytes(shipped_windows(**speedtest.DECODE_PROMPT)[0].tolist()) not in keys
    assert [bytes(p.tolist()) for p in speedtest.decode_prompts(target, 60)] == keys  # a seed draws them
    assert [bytes(p.tolist()) for p in speedtest.decode_prompts(target, 9)] == keys[:9]  # whatever n
    other = [bytes(p.tolist()) for p in speedtest.decode_prompts(target, 60, seed=12)]
    assert not set(keys) & set(other)
    # none is a cut of the shipped text, which a student could tabulate whole (15,392 cuts of 32 bytes)
    text = [bytes(w.tolist()) for w in shipped_windows(**speedtest.DECODE_POOL)]
    assert not any(k in w for k in keys for w in text)


def test_decode_prompts_read_like_the_text_the_pair_knows(pair):
    """Half of a prompt's tokens are the target's own samples: the draft agrees with the target on the greedy
    continuation of these prompts about as often as on cuts of the held-out text (the speed bar was set on
    those). Measured: how often the draft's argmax is the target's along the target's greedy continuation
    (the acceptance rate of greedy speculation, whatever k), pooled over 8 prompts of each kind."""
    from speclab.data import shipped_windows

    target, draft = pair
    drawn = speedtest.decode_prompts(target, 8)
    cuts = [w[:32] for w in shipped_windows(**speedtest.DECODE_POOL)[:8]]
    a_drawn, a_cuts = _greedy_alpha(target, draft, drawn), _greedy_alpha(target, draft, cuts)
    assert a_drawn >= 0.8 * a_cuts, (a_drawn, a_cuts)


@pytest.mark.slow
def test_decoder_speedup_runs_on_prompts_of_its_own(pair):
    """The notebook's call, decoder_speedup(decoder, target, draft), cuts its prompts from the shipped
    text itself (decode_prompts) and returns both clauses; a short run (k = 2, 8 tokens, one look)."""
    target, draft = pair
    speed, theory = speedtest.decoder_speedup(_plain, target, draft, ks=(2,), n_new=8, budget_s=0.0,
                                              hard_limit_s=600.0)  # one look, whatever the machine's load
    assert speed.bar == speedtest.DECODE_BAR_CPU and theory.bar == speedtest.THEORY_FRACTION
    assert len(speed.ratios) == speedtest.LOOKS[0] and speed.details["alpha"] == {2: 0.0}
    assert speed.verdict in ("pass", "fail", "inconclusive")


@pytest.mark.slow
def test_a_memoising_decoder_is_never_answered_from_its_memo(pair):
    """A decoder that keeps every answer, keyed on the prompt alone (greedy tokens do not depend on k), would
    answer repeated calls in no time. Every call of the speed test (the warm-up's too) gets a prompt no
    earlier call got, so the memo never answers: no speed to buy. Short run: k = 2 and 3, 8 tokens, one look."""
    target, draft = pair
    memo, prompts, hits = {}, [], 0

    def memoising(t, d, prompt, n_new, k, temperature=0.0):
        nonlocal hits
        key = bytes(prompt.tolist())
        prompts.append(key)
        if key in memo:
            hits += 1
        else:
            memo[key] = _plain(t, d, prompt, n_new, k)
        return memo[key]

    speed, _ = speedtest.decoder_speedup(memoising, target, draft, ks=(2, 3), n_new=8, budget_s=0.0,
                                         hard_limit_s=600.0)
    assert len(prompts) == 2 * (speed.details["rounds"] + 1) and hits == 0
    assert len(set(prompts)) == len(prompts)  # every prompt differs from all earlier ones


@pytest.mark.slow
def test_a_decoder_that_returns_its_first_answer_again_fails_the_output_check(pair):
    """Fast and wrong: after its first call it returns that call's answer at once. Its timed outputs are
    not the target's greedy tokens on their prompts: an AssertionError, whatever the timings."""
    target, draft = pair
    first = []

    def replaying(t, d, prompt, n_new, k, temperature=0.0):
        if not first:
            first.append(_plain(t, d, prompt, n_new, k))
        return first[0]

    with pytest.raises(AssertionError, match=r"speculative_decode in timed round 1 \(k=2\): expected the target's"):
        speedtest.decoder_speedup(replaying, target, draft, ks=(2,), n_new=8, budget_s=0.0, hard_limit_s=600.0)


class _NearTie:
    """A stand-in target: everywhere token 1 is the argmax, token 2 a near-tie (1e-6 below), the rest 1 below."""

    device = None

    def new_cache(self, batch, max_len):
        return None

    def __call__(self, x, positions, cache):
        import torch

        logits = torch.zeros(1, x.shape[1], 5)
        logits[0, :, 1], logits[0, :, 2] = 1.0, 1.0 - 1e-6
        return logits


def test_a_near_tie_broken_the_other_way_is_greedy_and_a_lower_token_is_not():
    """The output check of Lab 2's speed test reads each new token against the target's logits given the tokens
    before it: a token within GREEDY_TOL of the best is greedy (float32 sums taken in another order, a verify of
    k + 1 tokens against one-token steps, can flip a near-tie: the audit saw the reference fail so, once in 24
    gradings, when the check compared with the baseline's own tokens), a token 1 below is not, and neither is one
    outside the vocabulary."""
    import torch

    from speclab.speedtest import GREEDY_TOL, _greedy_gap

    prompt = torch.tensor([0, 0, 0])
    assert _greedy_gap(_NearTie(), prompt, [1, 2, 1, 2]) is None
    assert _greedy_gap(_NearTie(), prompt, [1, 2, 3, 1]) == (2, pytest.approx(1.0))
    assert _greedy_gap(_NearTie(), prompt, [1, 7]) == (1, float("inf"))
    assert 1e-6 < GREEDY_TOL < 1e-2  # a near-tie, and nothing like a different token
