"""speclab.speedtest: the labs' speed tests, which the notebooks and the grader both run.

The sign test's thresholds and false-failure bounds are tested in tests/autograder/checks/test_timing.py
(through autograder.checks.timing, which re-exports them); here: the measurements themselves, on
stand-ins whose speed is known, with verdicts that do not depend on how busy the machine is.
"""
from __future__ import annotations

import numpy as np
import pytest

from speclab import speedtest


def test_draws_loop_makes_two_draws_per_row_and_samples_nothing():
    """The baseline sets a loop's pace; it must not be an answer to the lab (it returns nothing)."""
    p, q = speedtest.BATCH_PAIR
    rng, twin = np.random.default_rng(1), np.random.default_rng(1)
    assert speedtest.draws_loop(np.tile(p, (5, 1)), np.tile(q, (5, 1)), rng) is None
    for _ in range(5):
        twin.choice(4, p=q)
        twin.random()
    assert rng.random() == twin.random()  # exactly the two draws per row, nothing else


def test_batch_speedup_hands_every_timed_output_over_and_decides_a_clear_case():
    """A stand-in that answers in no time is clearly faster than any loop: a pass at the first look,
    whatever the machine's load (a loop of 500 rows takes milliseconds, a constant answer microseconds)."""
    seen = []

    def instant(p, q, rng):
        return np.zeros(len(p), dtype=np.int64)

    result = speedtest.batch_speedup(instant, budget_s=5.0, on_output=seen.append)
    assert result.verdict == "pass" and len(result.ratios) == speedtest.LOOKS[0]
    assert len(seen) == len(result.ratios) + 1  # the warm-up call and every timed call
    assert all(out.shape == (speedtest.BATCH_ROWS,) for out in seen)
    assert "the grader would give the point(s)" in result.summary("x")


@pytest.mark.slow
def test_batch_speedup_fails_a_loop_in_disguise():
    """A 'vectorised' sampler that loops in Python over every row, three draws a row, is slower per row
    than draws_loop's two: clearly below 30x, so a fail at the first look (7 rounds of about a second;
    the budget leaves room for them on a busy machine)."""
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


@pytest.mark.slow
def test_decoder_speedup_runs_on_its_own_prompt():
    """The notebook's call, decoder_speedup(decoder, target, draft), builds the grader's prompt itself
    (speclab.data.heldout_windows(**DECODE_PROMPT)) and returns both clauses; a short run (k = 2,
    8 tokens) on the shipped pair, with the course's own greedy loop standing in for the decoder."""
    import torch

    from speclab.checkpoints import load_pair
    from speclab.sampling import generate

    target, draft = load_pair(device=torch.device("cpu"), dtype=torch.float32)

    def plain(t, d, prompt, n_new, k, temperature=0.0):  # not speculative: accepts nothing, S about 1
        new = generate(t, prompt[None], n_new, temperature=0)[0, prompt.numel():].tolist()
        return new, [0] * n_new

    speed, theory = speedtest.decoder_speedup(plain, target, draft, ks=(2,), n_new=8, budget_s=0.0,
                                              hard_limit_s=600.0)  # one look, whatever the machine's load
    assert speed.bar == speedtest.DECODE_BAR_CPU and theory.bar == speedtest.THEORY_FRACTION
    assert len(speed.ratios) == speedtest.LOOKS[0] and speed.details["alpha"] == {2: 0.0}
    assert speed.verdict in ("pass", "fail", "inconclusive")
