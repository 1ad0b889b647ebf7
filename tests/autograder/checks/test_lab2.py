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
from autograder.checks.stats import case_false_failure_bound, power_lower_bound
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
    "transform_one_side": ["sampling_topk"],
    "recompute_without_cache": ["rollback", "speedup"],
    # issue 31: the right tokens, not the algorithm; the rollback check counts the models' forwards
    "rebuilds_caches": ["rollback"],
    "verifies_token_by_token": ["rollback"],
    "never_speculates": ["rollback"],
    # issue 31: knobs drawn per grading run; exact at the fixed settings only
    "knobs_only_at_fixed_settings": ["sampling_topk_keyed"],
}
TEST_KEY = bytes(range(32))  # a grading run's key (autograder/checks/hidden.py), fixed so a failure reproduces


def run_check(name: str, ns: dict) -> None:
    dec = ns["speculative_decode"]
    if name == "greedy":
        C.check_greedy_equivalence(dec)
    elif name == "rollback":
        C.check_rollback(dec)
    elif name == "sampling_topk":
        (case,) = [c for c in C.sampling_cases() if "top-k" in c.name]
        from autograder.checks.stats import check_case

        check_case(case, dec, np.random.default_rng(2026), C.ALPHA_CELL / len(C.SAMPLING_SETTINGS))
    elif name == "sampling_topk_keyed":  # the top-k case at the knobs a grading run draws
        from autograder.checks.stats import check_case

        with hidden.keyed(TEST_KEY):
            (case,) = [c for c in C.sampling_cases() if "top-k" in c.name]
            assert "drawn for this run" in case.name
            check_case(case, dec, np.random.default_rng(2026), C.ALPHA_CELL / len(C.SAMPLING_SETTINGS))
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


def test_knobs_are_drawn_from_their_ranges_under_a_key():
    fixed = C.sampling_settings()
    assert {name: v[1:] for name, v in fixed.items()} == C.SAMPLING_SETTINGS
    seen = []
    for i in range(20):
        with hidden.keyed(hidden.student_key(TEST_KEY, f"student {i}")):
            drawn = C.sampling_settings()
        for name, (shown, k, temp, top_k, top_p, n) in drawn.items():
            ks, temps, top_ks, top_ps = C.KNOB_RANGES[name]
            assert ks[0] <= k <= ks[1] and n == C.SAMPLING_SETTINGS[name][4] and "drawn for this run" in shown
            assert (temps is None and temp == C.SAMPLING_SETTINGS[name][1]) or temps[0] <= temp <= temps[1]
            assert (top_ks is None and top_k == C.SAMPLING_SETTINGS[name][2]) or top_ks[0] <= top_k <= top_ks[1]
            assert (top_ps is None and top_p == C.SAMPLING_SETTINGS[name][3]) or top_ps[0] <= top_p <= top_ps[1]
            seen.append((name, temp, top_p))
    assert len(set(seen)) > 20  # students meet different settings


def test_worst_case_eps_over_the_ranges_is_below_the_knob_mutants_distance():
    """The knob cases' worst eps over their grids, against the TV of the fixed-settings mutant's law at the
    edge of the top-k range nearest to its fallback (temperature 1): above it, so caught with prob >= 0.999."""
    from speclab.toy import sequence_law, toy_pair

    cases = C.sampling_cases()
    alpha = C.ALPHA_CELL / len(cases)
    (topk,) = [c for c in cases if "top-k" in c.name]
    worst = C.worst_case_eps(topk.name, topk.n, alpha)
    t, _ = toy_pair(0)
    hi = C.KNOB_RANGES["T=0.8, top-k=2, k=3"][1][1]
    tv = min(0.5 * np.abs(C._first_two_law(*sequence_law(t, C.TOY_PROMPT, C.TOY_NEW, hi, kk, None))
                          - C._first_two_law(*sequence_law(t, C.TOY_PROMPT, C.TOY_NEW, 1.0, kk, None))).sum()
             for kk in (2, 3))
    print(f"worst eps over the top-k range {worst:.4f}; the mutant's smallest TV in it {tv:.4f}")
    assert C.worst_case_eps(cases[0].name, cases[0].n, alpha) is None
    assert 0 < worst < tv


def test_sampling_false_failure_and_power_of_top_k_case():
    """Per-case false-failure bound sums to <= ALPHA_CELL; the one-sided-transform mutant's exact law
    (p with temperature only: rejection sampling is exact for the p it is given) is caught w.p. >= 0.999."""
    from speclab.toy import sequence_law, toy_pair

    cases = C.sampling_cases()
    bounds = [case_false_failure_bound(c, C.ALPHA_CELL / len(cases)) for c in cases]
    assert sum(bounds) <= C.ALPHA_CELL * (1 + 1e-9)
    (name,) = [n for n in C.SAMPLING_SETTINGS if "top-k" in n]
    (case,) = [c for c in cases if c.name.endswith(name)]
    k, temp, top_k, top_p, n = C.SAMPLING_SETTINGS[name]
    t, _ = toy_pair(0)
    wrong, conts = sequence_law(t, C.TOY_PROMPT, C.TOY_NEW, temp, None, None)
    power = power_lower_bound(case, C.ALPHA_CELL / len(cases), C._first_two_law(wrong, conts))
    print(f"false-failure bounds {bounds}; power against transform_one_side >= {power:.6f}")
    assert power >= 0.999


def test_sampling_eps_target_with_the_smallest_n():
    """Issue 14: eps <= 0.03 on the joint law of the first two tokens at T=1, k=2; 3 % fewer draws miss it."""
    from autograder.checks import stats as S

    cases = C.sampling_cases()
    alpha = C.ALPHA_CELL / len(cases)
    (case,) = [c for c in cases if c.name.endswith("T=1, k=2")]
    assert case.eps == C.EPS_TARGET  # early passes designed for the target
    assert S.case_eps(case, alpha) <= C.EPS_TARGET
    fewer = int(case.n * 0.97)
    looks = S.early_passes(fewer, case.eps)
    assert S.eps_at_power(fewer, S.threshold(case.law, fewer, alpha), looks=looks) > C.EPS_TARGET


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
