"""Lab 2 hidden checks against the reference decoder and every catalog mutant (called directly).

Notation: see the `speclab` package docstring.
The same check functions judge the graded notebook cells (tests/end_to_end/test_real_labs.py grades the
reference with the course's pipeline); here the reference passes them, and the `catalog` audit
(tests/audit/test_catalog.py) shows each mutant failing the check of the property it breaks, by the table below.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder.audit import mutants
from speclab import speedtest
from autograder.checks import hidden, lab2 as C
from autograder.checks.stats import case_false_failure_bound
from autograder.audit.mutants.lab2 import MUTANTS

BY_NAME = {m.name: m for m in MUTANTS}


def namespace(mutant_name: str | None = None) -> dict:
    """The reference solution of solutions/lab2/lab2.md, with one catalog mutant in place if named."""
    return vars(mutants.namespace("lab2", BY_NAME[mutant_name] if mutant_name else None))


@pytest.fixture(scope="module")
def ref():
    return namespace()


# which check each mutant must fail (the others may pass)
CAUGHT_BY = {
    "no_rollback": ["greedy", "rollback"],
    "rollback_off_by_one": ["greedy", "rollback"],
    "draft_not_caught_up": ["rollback"],
    "target_logits_shifted": ["greedy", "rollback"],
    "transform_one_side": ["sampling_tokens"],
    "recompute_without_cache": ["rollback", "speedup"],
    # issue 31: the right tokens, not the algorithm; the rollback check counts the models' forwards
    "rebuilds_caches": ["rollback"],
    "verifies_token_by_token": ["rollback"],
    "never_speculates": ["rollback"],
    # issue 31: knobs drawn per grading run; exact at the fixed settings only (and so at T = 1)
    "knobs_only_at_fixed_settings": ["sampling_tokens"],
    # issue 53: the knobs mishandled; every emitted token is tested against its processed law
    "bonus_without_knobs": ["sampling_tokens"],
    "knobs_in_wrong_order": ["sampling_tokens"],
    # a knob error of the first step, diluted in the token cases: the sequence case, where the knobs bite
    "knobs_on_p_only": ["sampling_sequence"],
}
# run by make test too; knobs_on_p_only is caught only by the sequence case run to its full size (90 s here),
# so it is left to the catalog audit, which calls every mutant against its check under a key
NEWEST = ["bonus_without_knobs", "knobs_in_wrong_order"]
TEST_KEY = bytes(range(32))  # a grading run's key (autograder/checks/hidden.py), fixed so a failure reproduces


def run_check(name: str, ns: dict) -> None:
    dec = ns["speculative_decode"]
    if name == "greedy":
        C.check_greedy_equivalence(dec)
    elif name == "rollback":
        C.check_rollback(dec)
    elif name == "sampling_sequence":  # the sequence case, as the verdict calls it, under a key
        from autograder.checks.stats import check_case

        with hidden.keyed(TEST_KEY):
            case = C.sampling_cases()[0]
            check_case(case, dec, np.random.default_rng(2026), C.ALPHA_CELL / len(C.sampling_cases()))
    elif name == "sampling_tokens":  # both token cases, as the verdict calls them, under a key
        from autograder.checks.stats import check_case

        with hidden.keyed(TEST_KEY):
            cases = C.sampling_cases()
            rng = np.random.default_rng(2026)
            for case in cases[1:]:
                check_case(case, dec, rng, C.ALPHA_CELL / len(cases))
    elif name == "speedup":
        C.check_speedup(dec)
    else:
        raise KeyError(name)


def test_catalog_is_complete():
    assert set(CAUGHT_BY) == set(BY_NAME)


@pytest.mark.parametrize("check", ["greedy", "rollback"])
def test_reference_passes_deterministic_checks(ref, check):
    run_check(check, ref)


def test_reference_passes_small_checks(ref):
    C.check_metrics(ref["pooled_alpha"], ref["predicted_speedup"])
    C.check_decode_bytes(ref["decode_bytes"])
    C.check_baseline(ref["prefill"], ref["autoregressive_decode"])


# Every mutant against the checks CAUGHT_BY names, and the knobs mutant passing where no key draws the knobs, are
# the `catalog` audit's (tests/audit/test_catalog.py, which imports CAUGHT_BY and run_check from here).


def test_knobs_are_drawn_from_their_ranges():
    """Every decode's setting comes from its case's ranges: the token cases leave the knob out (None) for about
    NO_KNOB_SHARE of decodes; the sequence case takes a top-k or a top-p, never neither."""
    for name in [*C.TOKEN_CASES, C.SEQUENCE_CASE]:
        k_range, temps, top_ks, top_ps, _ = C.TOKEN_CASES.get(name) or C.SEQUENCE_RANGES
        rng = np.random.default_rng(0)
        drawn = np.array([[np.nan if v is None else v for v in C.draw_setting(name, rng)] for _ in range(1000)])
        assert set(drawn[:, 0]) == set(range(k_range[0], k_range[1] + 1))
        assert temps[0] <= drawn[:, 1].min() < temps[0] + 0.1 and temps[1] - 0.1 < drawn[:, 1].max() <= temps[1]
        cut_k, cut_p = ~np.isnan(drawn[:, 2]), ~np.isnan(drawn[:, 3])
        assert not (cut_k & cut_p).any()
        if top_ks:
            assert set(drawn[cut_k, 2]) == set(range(top_ks[0], top_ks[1] + 1))
        if top_ps:
            assert top_ps[0] <= drawn[cut_p, 3].min() < top_ps[0] + 0.05 and drawn[cut_p, 3].max() > top_ps[1] - 0.05
        neither = (~cut_k & ~cut_p).mean()
        if name == C.SEQUENCE_CASE:
            assert neither == 0 and 0.45 < cut_k.mean() < 0.55
        else:
            assert abs(neither - C.NO_KNOB_SHARE) < 0.04 and not (cut_k if top_ps else cut_p).any()


def test_token_cases_eps_holds_over_their_ranges_and_the_bounds_sum_to_the_cell():
    """Every case's law is uniform at every setting: its eps is the eps over its range, <= EPS_TARGET for the token
    cases and <= EPS_SEQUENCE for the sequence case; the per-case false-failure bounds sum to <= ALPHA_CELL."""
    from autograder.checks.stats import case_eps

    cases = C.sampling_cases()
    alpha = C.ALPHA_CELL / len(cases)
    sequence = cases[0]
    assert C.SEQUENCE_CASE in sequence.name and len(sequence.law) == C.SEQUENCE_BINS ** 2
    assert C.worst_case_eps(sequence.name, sequence.n, alpha) == case_eps(sequence, alpha) <= C.EPS_SEQUENCE
    for case in cases[1:]:
        eps = case_eps(case, alpha)
        assert C.worst_case_eps(case.name, case.n, alpha) == eps <= C.EPS_TARGET
        assert len(case.law) == C.PIT_BINS and case.n % C.TOKEN_NEW == 0 and case.draw.block == C.TOKEN_NEW
    bounds = [case_false_failure_bound(c, alpha) for c in cases]
    assert sum(bounds) <= C.ALPHA_CELL * (1 + 1e-9)


def _exact_tokens(target, decodes: int, temp: float, top_k, top_p, seed: int) -> np.ndarray:
    """tokens [decodes, TOKEN_NEW] drawn from the target's processed law one position at a time (no cache)."""
    from speclab.sampling import process_logits

    gen = torch.Generator().manual_seed(seed)
    seqs = torch.tensor([C.TOY_PROMPT] * decodes)
    with torch.no_grad():
        for _ in range(C.TOKEN_NEW):
            probs = process_logits(target.reference_forward(seqs)[:, -1], temp, top_k, top_p)
            seqs = torch.cat([seqs, torch.multinomial(probs, 1, generator=gen)], dim=1)
    return seqs[:, len(C.TOY_PROMPT):].numpy()


@pytest.mark.parametrize("knobs", [(0.35, 2, None), (1.9, None, 0.55), (1.0, None, None)])
def test_the_pits_of_exact_tokens_are_uniform(knobs):
    """Rosenblatt: tokens drawn from the processed law, one position at a time, give independent uniform u.
    Kolmogorov-Smirnov on 6000 tokens, failing below p = 1e-6 (its false-failure probability)."""
    from scipy import stats
    from speclab.toy import toy_pair

    t, _ = toy_pair(0)
    temp, top_k, top_p = knobs
    tokens = _exact_tokens(t, 500, temp, top_k, top_p, seed=5)
    u = C.token_pits(t, tokens, [knobs] * len(tokens), np.random.default_rng(1))
    assert stats.kstest(u.ravel(), "uniform").pvalue > 1e-6


@pytest.mark.parametrize("wrong", [0.5, 2.0])
def test_the_pits_of_tokens_at_another_temperature_are_not_uniform(wrong):
    """The same test refuses tokens drawn at temperature `wrong` and transformed under temperature 1 (at the
    extremes of the ranges the toy's laws are nearly one-hot, and a wrong temperature moves little mass there)."""
    from scipy import stats
    from speclab.toy import toy_pair

    t, _ = toy_pair(0)
    tokens = _exact_tokens(t, 500, wrong, None, None, seed=6)
    u = C.token_pits(t, tokens, [(1.0, None, None)] * len(tokens), np.random.default_rng(1))
    assert stats.kstest(u.ravel(), "uniform").pvalue < 1e-6


def test_a_token_outside_the_processed_support_fails_at_once_and_is_named():
    from autograder.checks.stats import ExactnessFailure
    from speclab.sampling import process_logits
    from speclab.toy import toy_pair

    t, _ = toy_pair(0)
    tokens = _exact_tokens(t, 4, 0.5, 2, None, seed=3)
    with torch.no_grad():
        probs = process_logits(t.reference_forward(torch.tensor([C.TOY_PROMPT]))[0, -1], 0.5, 2, None)
    outside = int(torch.nonzero(probs == 0)[0])
    tokens[2, 0] = outside
    with pytest.raises(ExactnessFailure, match=rf"new token 1 of a decode is {outside} after the tokens \[0, 1\]"):
        C.token_pits(t, tokens, [(0.5, 2, None)] * len(tokens), np.random.default_rng(0), "case")


def test_the_support_is_widened_by_float_rounding_only():
    rows = torch.tensor([[2.0, 1.0, 1.0 - 1e-7, -3.0]])
    assert C._support(rows, 1.0, 2, None, C.SUPPORT_SLACK).tolist() == [[True, True, True, False]]
    assert C._support(rows, 1.0, 2, None, 0.0).tolist() == [[True, True, False, False]]
    assert C._support(rows, 1.0, 1, None, C.SUPPORT_SLACK).tolist() == [[True, False, False, False]]


def test_block_power_bound():
    """autograder.audit.power.power_from_blocks: 0 for an exact implementation, >= 0.999 for one that moves 0.15 of
    its mass to the first bin, and a lower bound under the worst dependence (every decode repeats one outcome):
    200 simulated hidden tests of such an implementation fail at least as often as it says."""
    from dataclasses import replace

    from autograder.audit.power import power_from_blocks
    from autograder.checks.stats import ExactnessFailure, check_case

    (_, case, _) = C.sampling_cases()
    alpha, L = C.ALPHA_CELL / 3, C.TOKEN_NEW

    def blocks(rng, m, moved, repeat):
        width = 1 if repeat else L
        one = np.where(rng.random((m, width)) < moved, 0, rng.integers(0, C.PIT_BINS, (m, width)))
        return np.repeat(one, L, axis=1) if repeat else one

    rng = np.random.default_rng(0)
    assert power_from_blocks(case, alpha, blocks(rng, 4000, 0.0, False)) == 0.0
    assert power_from_blocks(case, alpha, blocks(rng, 4000, 0.15, False)) >= 0.999
    bound = power_from_blocks(case, alpha, blocks(rng, 4000, 0.12, True))
    simulated = replace(case, draw=lambda fn, rng, n: blocks(rng, -(-n // L), 0.12, True).ravel()[:n])
    fails = 0
    for seed in range(200):
        try:
            check_case(simulated, None, np.random.default_rng(seed), alpha)
        except ExactnessFailure:
            fails += 1
    print(f"bound {bound:.4f}, simulated fail rate {fails / 200:.3f}")
    assert 0.5 < bound <= fails / 200


@pytest.mark.parametrize("name", NEWEST)
def test_the_newest_mutants_fail_their_sampling_case_under_a_key(name):
    """Issue 53: each new knob mutant fails the case CAUGHT_BY names, called as the verdict calls it, under a key
    (all mutants against their checks: the catalog audit)."""
    (check,) = CAUGHT_BY[name]
    with pytest.raises(AssertionError):
        run_check(check, namespace(name))


def test_sampling_eps_targets_with_the_smallest_n():
    """eps <= EPS_SEQUENCE on the sequence case's 16 outcomes and <= EPS_TARGET (issue 53: 0.03) on the token
    cases' 8, with the early looks; 3 % fewer draws miss them (the n are the smallest, to 3 %)."""
    from autograder.checks import stats as S

    cases = C.sampling_cases()
    alpha = C.ALPHA_CELL / len(cases)
    for case, target in zip(cases, [C.EPS_SEQUENCE] + [C.EPS_TARGET] * (len(cases) - 1)):
        assert case.eps == target  # early passes designed for the target
        assert S.case_eps(case, alpha) <= target
        fewer = int(case.n * 0.97)
        looks = S.early_passes(fewer, case.eps)
        assert S.eps_at_power(fewer, S.threshold(case.law, fewer, alpha), looks=looks) > target


def test_sampling_contracts_pass_the_reference_and_catch_global_rng(ref):
    C.check_sampling_contracts(ref["speculative_decode"])
    decode = ref["speculative_decode"]

    def global_rng(*args, generator=None, **kwargs):  # ignores the generator: torch's global state
        return decode(*args, generator=None, **kwargs)

    with pytest.raises(AssertionError, match="global random state"):
        C.check_sampling_contracts(global_rng)


def test_toy_law_matches_a_hand_computation():
    """For one new token the law is process_logits of the last row of the cache-free forward."""
    from speclab.sampling import process_logits
    from speclab.toy import sequence_law, toy_pair

    t, _ = toy_pair(0)
    law, conts = sequence_law(t, [2, 3], 1, 0.9, 3, None)
    want = process_logits(t.reference_forward(torch.tensor([[2, 3]]))[0, -1], 0.9, 3, None).double().numpy()
    assert conts == [(0,), (1,), (2,), (3,)]
    np.testing.assert_allclose(law, want, atol=1e-6)
    assert (law == 0).sum() == 1  # top-3 of 4 removes exactly one token


@pytest.mark.parametrize("k", [1, 2, 5])
def test_capacity_exact_and_eos_edge_cases(ref, k):
    from speclab.toy import toy_pair

    t, d = toy_pair(1)
    gen = torch.Generator().manual_seed(k)
    new, acc = ref["speculative_decode"](t, d, torch.tensor([1]), t.cfg.max_len - 1, k, temperature=1.0, generator=gen)
    assert len(new) == t.cfg.max_len - 1  # the caches fill to the model's max_len without overflowing
    assert sum(a + 1 for a in acc[:-1]) <= len(new)
    eos = new[3]
    gen = torch.Generator().manual_seed(k)
    new2, _ = ref["speculative_decode"](t, d, torch.tensor([1]), t.cfg.max_len - 1, k, temperature=1.0, generator=gen, eos=eos)
    assert new2 == new[: new.index(eos) + 1]


def test_decode_bytes_hand_value(ref):
    """n_layer=1, d_model=2, vocab 3, mlp_ratio 1: params = 3*2 + (2*2 + 4*4 ... ) computed by hand."""
    from speclab.model import GPTConfig

    cfg = GPTConfig(n_layer=1, n_head=1, d_model=2, vocab_size=3, mlp_ratio=1)
    # embedding 6; block: 2 norms (4) + qkv (12) + out (4) + MLP in/out (8) = 28; final norm 2 -> 36 params
    # KV: 2 * 1 layer * 2 wide = 4 values per position; L = 5 -> read 6 positions, write 1
    assert ref["decode_bytes"](cfg, 5) == 4 * (36 + 4 * 6 + 4)


def test_lab_text_quotes_the_course_settings():
    """The numbers the Lab 2 text states come from the code they describe (model presets, speed threshold)."""
    from autograder.authoring.labs import read_source
    from speclab.model import PRESETS

    text = {c.metadata["nbgrader"]["grade_id"]: c.source for c in read_source("lab2").cells}
    assert (f"a {PRESETS['target'].n_layer}-block byte-level\ntarget and a {PRESETS['draft'].n_layer}-block draft"
            in text["intro"])
    assert f"reach {C.SPEEDUP_CPU}×" in text["part3"] and f"at least {C.THEORY_FRACTION} ×" in text["part3"]


def test_committed_power_report_states_the_current_cell_notes():
    """`python -m autograder.power LAB --show` prints the committed notes: they must be the checks' own."""
    import json
    from pathlib import Path

    from autograder.checks import lab1, lab2, spec_of

    root = Path(__file__).resolve().parents[3] / "autograder" / "audit" / "mutants"
    for name, module in (("lab1", lab1), ("lab2", lab2)):
        report = json.loads((root / f"{name}_power.json").read_text())
        for cell in report["cells"]:
            if cell.get("kind") == "deterministic":
                assert cell["note"].startswith(spec_of(module.CELLS, cell["grade_id"]).note), (name, cell["grade_id"])


# ------------------------------------------------------------------------------ timings that cannot be bought
def _small_timing(monkeypatch):
    """check_speedup on a short run: k = 2, 8 tokens a call, one look (the output check is what is tested)."""
    monkeypatch.setattr(C, "K_GRID", (2,))
    monkeypatch.setattr(C, "TIMING_NEW", 8)
    monkeypatch.setattr(C, "TIMING_BUDGET_S", 0.0)
    monkeypatch.setattr(C, "TIMING_HARD_LIMIT_S", 600.0)


@pytest.mark.slow
def test_speedup_check_fails_a_decoder_that_answers_timed_calls_from_its_memo(ref, monkeypatch):
    """The memoising attack made fast: the first call is decoded, every later call returns that answer at once.
    Each timed call has a prompt of its own (drawn from a seed the grading run's key draws), so the answers are
    wrong: an AssertionError naming the speed rule, not a timing failure. The student's sandbox is paused
    while the course's code is timed, never while the decoder runs. The reference passes the same output
    check (its verdict on 8 tokens is not what is tested)."""
    from autograder.checks import timing
    from autograder.checks.timing import TimingFailure

    _small_timing(monkeypatch)
    first, log = [], []

    def replaying(target, draft, prompt, n_new, k, temperature=0.0):
        log.append("decoder")
        if not first:
            first.append(ref["speculative_decode"](target, draft, prompt, n_new, k, temperature=temperature))
        return first[0]

    with hidden.keyed(TEST_KEY), timing.pausing(_Pause(log)):
        with pytest.raises(AssertionError, match="timed round 1") as err:
            C.check_speedup(replaying)
        assert not isinstance(err.value, TimingFailure) and err.value.rule is C.R_SPEEDUP
        # per round: the two baselines, the decoder, the two verify loops; the course's code paused
        one = ["pause", "resume"] * 2 + ["decoder"] + ["pause", "resume"] * 2
        assert log == one * (len(log) // len(one)) and len(log) // len(one) == speedtest.LOOKS[0] + 1
        try:
            C.check_speedup(ref["speculative_decode"])
        except TimingFailure:
            pass


@pytest.mark.slow
def test_speedup_check_fails_a_decoder_that_answers_from_a_table_of_a_fixed_input_set(ref, monkeypatch):
    """The table attack: a decoder that is slow (the course's greedy loop, four times) unless it finds the prompt
    in a table computed in advance. Its table holds every prompt the check asks for without a key, which is what
    a student can see and run: there it passes, clearly. Under a grading run's key the check draws prompts the
    table has never seen, so the slow path runs and the check fails on a clear timing verdict. The looks go on
    until the verdict is clear (rounds of 8 tokens are cheap), so a round slowed by a busy machine delays the
    verdict but cannot change it."""
    from autograder.checks import timing
    from speclab.sampling import generate

    _small_timing(monkeypatch)
    monkeypatch.setattr(C, "TIMING_BUDGET_S", 600.0)  # every look, until a clear verdict
    target, _ = C.shipped_pair()
    every = (max(speedtest.LOOKS) + 1) * len(C.K_GRID)  # every prompt a run without a key can ask for
    public = speedtest.decode_prompts(target, every, C.spec_of(C.CELLS, "test_speedup").draw_seed())
    table = {}
    for pr in public:
        table[bytes(pr.tolist())] = (generate(target, pr[None], C.TIMING_NEW, temperature=0)[0, pr.numel():]
                                     .tolist(), [0] * C.TIMING_NEW)
    asked = []

    def tabulated(target, draft, prompt, n_new, k, temperature=0.0):
        key = bytes(prompt.tolist())
        asked.append(key in table)
        if key in table:
            return table[key]
        for _ in range(4):
            new = generate(target, prompt[None], n_new, temperature=0)[0, prompt.numel():].tolist()
        return new, [0] * n_new

    C.check_speedup(tabulated)  # no key: the prompts of the student's own run, all in the table
    assert asked and all(asked)
    asked.clear()
    with hidden.keyed(TEST_KEY), pytest.raises(timing.TimingFailure, match="clearly below it at every k"):
        C.check_speedup(tabulated)
    assert asked and not any(asked)


class _Pause:
    """A stand-in for the sandbox's freezer: notes when it pauses and resumes."""

    def __init__(self, log):
        self.log = log

    def __call__(self):
        from contextlib import contextmanager

        @contextmanager
        def paused():
            self.log.append("pause")
            yield
            self.log.append("resume")
        return paused()


@pytest.mark.parametrize(("theirs", "passes"), [
    ([8e9, 8e9, 1e9, 8e9, 8e9], True),  # one slow call of yours: the median does not see it
    ([2.5e9] * 5, False),  # a factor of 4 below ours
])
def test_bandwidth_is_measured_in_turn_with_ours_and_medians_compared(monkeypatch, theirs, passes):
    """Ours and the student's copy_bandwidth alternate, 5 calls each, ours first, the student's sandbox paused
    while ours runs; the medians are compared. Ours reads 10 GB/s but once 1 GB/s (a busy moment)."""
    import speclab.measure
    from types import SimpleNamespace

    from autograder.checks import timing

    log, ours = [], iter([10e9, 10e9, 1e9, 10e9, 10e9])
    yours = iter(theirs)

    def course(n_bytes, device=None):
        log.append("ours")
        return SimpleNamespace(bytes_per_s=next(ours))

    def student(n_bytes):
        log.append("yours")
        return next(yours)

    monkeypatch.setattr(speclab.measure, "copy_bandwidth", course)
    worked = iter(range(0, 100))  # each student call works a second by this clock: as long as any copy needs
    with timing.pausing(_Pause(log)), timing.student_clock(lambda: float(next(worked))):
        if passes:
            C.check_bandwidth(student)
        else:
            with pytest.raises(AssertionError, match="median of 5") as err:
                C.check_bandwidth(student)
            assert err.value.rule is C.R_BANDWIDTH
    assert log == ["pause", "ours", "resume", "yours"] * C.BANDWIDTH_CALLS


def _copies(n_bytes: int, repeats: int = 3) -> float:
    """A student's copy_bandwidth, written from the cell's text: a warm-up copy, then the median of repeats."""
    import time

    src = torch.ones(n_bytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return 2 * n_bytes / float(np.median(times))


def _kept():
    """Measures once, then returns what it measured: every later call is free."""
    memo = {}

    def copy_bandwidth(n_bytes):
        if n_bytes not in memo:
            memo[n_bytes] = _copies(n_bytes)
        return memo[n_bytes]
    return copy_bandwidth


@pytest.mark.parametrize(("name", "make", "passes"), [
    ("copies each call", lambda: _copies, True),
    ("a constant near this machine's speed", lambda: (lambda n_bytes, bw=_copies(64 * 2**20): bw), False),
    ("a value kept from its first call", _kept, False),
    ("sleeps as long as a copy, copies nothing", lambda: (lambda n_bytes, bw=_copies(64 * 2**20): (
        __import__("time").sleep(2 * n_bytes / bw), bw)[1]), False),
])
def test_bandwidth_must_be_measured_by_the_call_that_reports_it(name, make, passes):
    """Called directly, in this process, as a notebook calls it: the student's work is this process's CPU time.
    Every wrong one reports a figure within the factor of 3 of ours: only the work its calls did fails it."""
    fn = make()
    if passes:
        C.check_bandwidth(fn)
        return
    with pytest.raises(AssertionError, match="each call must copy n_bytes itself") as err:
        C.check_bandwidth(fn)
    assert err.value.rule is C.R_BANDWIDTH, name
