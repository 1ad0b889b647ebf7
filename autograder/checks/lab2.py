"""Hidden checks of Lab 2 (a speculative decoder with KV rollback), one function per graded cell.

Notation: see the `speclab` package docstring.

Deterministic checks (greedy equivalence, rollback, byte counts) have no false
failures: a correct decoder reproduces the target's greedy tokens and the caches
of a fresh prefill (up to float rounding, tolerance ATOL). The sampling check
(autograder/checks/lab2_sampling.py: the design) tests, on the toy pair of speclab.toy, the joint law of the
first two tokens at T = 1 (enumerated) and, at knobs drawn per run, every emitted token against the target's
processed law given its prefix (randomised PIT): false-failure probability <= ALPHA_CELL for any seed, and power
>= 0.999 against every law at total variation >= EPS_TARGET from the exact one in each case; a token the
processed target gives probability 0 fails at once. Timing checks run in the grading run itself,
the course's own measurement timed alongside the student's code, interleaved, with the student's
sandbox paused while ours runs: paired rounds against the course's baseline
(speclab.sampling.generate) for the decoder, each timed call on a prompt no earlier call got and
its tokens checked; alternating copies for the bandwidth.
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from speclab import speedtest

from . import CellSpec, Rule, defer_to_grader, spec_of, under
from .alone import alone
from .calls import call_each
from .models import rebuildable
from .lab2_rollback import ATOL, cache_checker, counted, speculated, steps_emit_what_they_report
from .stats import check_case
from .lab2_sampling import (EPS_SEQUENCE, EPS_TARGET, NO_KNOB_SHARE, PIT_BINS, SEQUENCE_BINS,  # noqa: F401
                            SEQUENCE_CASE, SEQUENCE_RANGES, SUPPORT_SLACK, TOKEN_CASES, TOKEN_NEW, TOY_NEW, TOY_PROMPT, _support, draw_setting,
                            sampling_cases, sequence_case, token_pits, toy_pair, worst_case_eps)

ALPHA_CELL = 1e-6  # false-failure budget of the statistical test cell
SPEEDUP_CPU = speedtest.DECODE_BAR_CPU  # best-k speedup over the course baseline required on a CPU
THEORY_FRACTION = speedtest.THEORY_FRACTION  # measured S >= 0.75 * the S predicted from the run's alpha and c
K_GRID = speedtest.K_GRID  # draft lengths timed for "the best k"
GRADING = os.environ.get("NBGRADER_EXECUTION") is not None
# Lab 2's notebook shrinks its sweeps when NBGRADER_EXECUTION is set (its GRADING switch): the verdict's harness
# sets it too (autograder/inside/harness.py), so that grading stays within its time budget.
NOTEBOOK_READS_GRADING = True

# ------------------------------------------------------------------------------ the rules
# Every requirement a check below enforces, in the words `make labs` writes into the solution cell
# (autograder/authoring/labs.py); a failing check names the rule it found broken (`under`).
R_PREFILL = Rule("prefill", "`prefill(model, prompt, cache)` feeds the whole prompt through the cache, leaves "
                 "`cache.length == len(prompt)`, and returns the logits of the last position (within 1e-3 of a "
                 "forward without a cache).")
R_BASELINE = Rule("baseline", "`autoregressive_decode(model, prompt, max_new_tokens, temperature=0.0)` returns "
                  "the new tokens (a sequence of ints), which at temperature 0 are exactly the model's greedy "
                  "tokens.")
R_GREEDY = Rule("greedy", "At temperature 0, `speculative_decode` returns exactly the target's greedy tokens, "
                "for every k, and stops right after `eos` when it is emitted (even inside an accepted block).")
R_ROLLBACK = Rule("rollback", "`speculative_decode` returns `max_new_tokens` new tokens when no `eos` stops it, "
                  "and calls `on_step(target_cache, draft_cache, seq)` after every step; then both caches hold "
                  "exactly `len(seq) - 1` positions, whose K and V equal a fresh prefill of those tokens "
                  "(within 1e-4).")
R_SPECULATES = Rule("speculates", "`speculative_decode` speculates and rolls back: a step that reports "
                    "`accepted[s]` = a emits a + 1 new tokens (fewer only when `eos` ends it); a step that accepts a draft "
                    "has run the draft model; the target checks all of a step's drafts in one forward and its cache is "
                    "rolled back, never rebuilt, so a run of S steps (S calls of `on_step`) makes at most S + 1 target "
                    "forwards (one for the prompt) and feeds the target at most len(prompt) + S * (k + 1) tokens.")
R_SAMPLING_RNG = Rule("sampling rng", "Called with a `generator`, `speculative_decode` takes every random number "
                      "from it: two runs with generators seeded alike return the same tokens, and the global torch "
                      "and numpy random states are never touched (with `generator=None`, torch's default generator "
                      "may be used, as `torch.multinomial(..., generator=None)` does).")
R_K = Rule("k", "`speculative_decode` raises `ValueError` when k < 1.")
R_SAMPLING_LAW = Rule("sampling law", "Sampled with `temperature`, `top_k` and `top_p`, the tokens of "
                      "`speculative_decode` follow the target's law exactly, at every setting, and with no knob "
                      "given. It is tested on a 4-token toy pair, at settings the grader draws anew for every "
                      "decode (temperature 0.3 to 2, top-k 1 to 4, top-p 0.5 to 1 or neither, k 1 to 4): every "
                      "token emitted, and the first two together, each against the law that the target's "
                      "processed logits give it after its prefix. A token that law gives probability 0 fails at "
                      "once.")
R_POOLED = Rule("pooled alpha", "`pooled_alpha(accepted, k)` returns accepted drafts / verified drafts over all "
                "steps, where a step that accepted a < k drafts verified a + 1 and a step that accepted k "
                "verified k (within 1e-9).")
R_PREDICTED = Rule("predicted speedup", "`predicted_speedup(alpha, k, c, c_verify)` returns "
                   "E[N] / (k / c + c_verify) with E[N] = (1 - alpha^(k+1)) / (1 - alpha), and k + 1 at alpha = 1 "
                   "(within 1e-9).")
R_SPEEDUP = Rule("speedup", "Timed by the grader against the course's baseline, at k = 3, 4 and 6: on a CPU, "
                 "the best k reaches 1.2 times the baseline's speed, and the measured speedup is at least 0.75 times "
                 "the one predicted with the draft's catch-up, (k + alpha^k) / c + c_verify, with the alpha of the "
                 "accepted counts each timed call returns. Each timed call gets fresh inputs: a prompt of 32 bytes "
                 "drawn by `speedtest.decode_prompts` from a seed of the grader's run (half the target's own "
                 "samples, half random characters of the text), which no earlier call got and no table can "
                 "hold, so answers computed before the call do not help. Every "
                 "timed output is checked: it must be the target's greedy tokens on that call's prompt. "
                 "On a CPU each call is timed by the CPU time it worked (your decoder's: every process of "
                 "yours, as the kernel counts it; the baseline's: the grader's), on a GPU by the wall clock. "
                 "Points are lost only on a clear failing verdict of the grader's sign test at every k; a timing "
                 "it cannot decide is timed again alone at the end of the class's grading, and if it is still "
                 "unclear its points are held, neither given nor taken, until your instructor times it again; "
                 "your feedback says which.")
R_BYTES = Rule("bytes", "`decode_bytes(cfg, context_len)` returns the exact number of bytes one decode step "
               "moves at least: every weight read once, the K and V of the context read, and the new position's "
               "K and V written.")
R_BANDWIDTH = Rule("bandwidth", "`copy_bandwidth(n_bytes)` returns bytes per second of a device copy of "
                   "`n_bytes`, within a factor of 3 of the grader's own copy measurement. It is measured "
                   "interleaved with the course's copy: 5 calls of each, in turn, and the medians are compared. "
                   "Each call must copy `n_bytes` itself: a call that returns B must work at least n_bytes / B "
                   "seconds (half the read and write of one copy at that speed), as the grader counts it: on a "
                   "CPU the CPU time of your processes, which the kernel counts, on a GPU the call's wall time. "
                   "A constant, a value kept from an earlier call, or one computed without copying fails.")


_PAIR = {}


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@rebuildable
def shipped_pair():
    """(target, draft) on the grading device, loaded once per kernel."""
    if "pair" not in _PAIR:
        from speclab.checkpoints import load_pair

        # float32 on every device: greedy equivalence compares argmaxes of a (k+1)-token verify with
        # one-token steps, and half precision can flip near-ties between the two
        _PAIR["pair"] = load_pair(device=device(), dtype=torch.float32)
    return _PAIR["pair"]


def prompts(n: int, length: int = 24, seed: int = 3) -> list[torch.Tensor]:
    """Windows of the held-out text as shipped with the package: the same bytes on every machine and Python."""
    from speclab.data import shipped_windows

    return [w.to(device()) for w in shipped_windows(n, length, seed=seed)]


def greedy_reference(target, prompt: torch.Tensor, n_new: int) -> list[int]:
    from speclab.sampling import generate

    return generate(target, prompt[None], n_new, temperature=0)[0, prompt.numel():].tolist()


def _first_diff(a: list, b: list) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


# ------------------------------------------------------------------------------ part 1
def check_baseline(prefill: Callable, autoregressive_decode: Callable) -> None:
    """prefill fills the cache and returns the next-token logits; greedy decoding matches the target's."""
    target, _ = shipped_pair()
    for pr in prompts(3):
        with under(R_PREFILL):
            cache = target.new_cache(batch=1, max_len=64)
            logits = prefill(target, pr, cache)
            want = target.reference_forward(pr[None])[0, -1]
            assert cache.length == pr.numel(), (f"prefill of a {pr.numel()}-token prompt: expected the cache to hold "
                                                f"{pr.numel()} positions, got {cache.length}")
            err = float((logits.float() - want).abs().max())
            assert err < 1e-3, (f"prefill's logits: expected those of a forward without a cache (within 1e-3), "
                                f"got a difference of up to {err:.3g}")
        with under(R_BASELINE):
            got = [int(t) for t in autoregressive_decode(target, pr, 40, temperature=0.0)]
            ref = greedy_reference(target, pr, 40)
            assert got == ref, (f"greedy autoregressive decoding: expected the target's greedy tokens, got tokens "
                                f"that differ from new token {_first_diff(got, ref)} on")


# ------------------------------------------------------------------------------ part 2
def check_greedy_equivalence(speculative_decode: Callable) -> None:
    """Greedy speculative decoding emits the target's greedy tokens for every k, and stops at eos."""
    target, draft = shipped_pair()
    n_new = 24 if GRADING else 48
    with under(R_GREEDY):
        for i, pr in enumerate(prompts(4)):
            ref = greedy_reference(target, pr, n_new)
            for k in (1, 2, 4, 8):
                got, _ = speculative_decode(target, draft, pr, n_new, k, temperature=0.0)
                got = [int(t) for t in got]
                assert got == ref, (f"prompt {i}, k={k}: expected the target's greedy tokens, got tokens that differ "
                                    f"from new token {_first_diff(got, ref)} on (lengths {len(got)}, {len(ref)})")
            # an end token inside a block: output stops right after its first occurrence
            eos = ref[n_new // 2]
            got, _ = speculative_decode(target, draft, pr, n_new, 4, temperature=0.0, eos=eos)
            want = ref[: ref.index(eos) + 1]
            assert [int(t) for t in got] == want, (f"prompt {i}, end token {eos}: expected the output to stop right "
                                                   f"after it (length {len(want)}), got length {len(got)}")


def check_rollback(speculative_decode: Callable) -> None:
    """After every step both KV caches equal a fresh prefill of the emitted tokens (rollback is exact); and the
    decoder speculates: steps emit what they report, the draft runs, one target forward per step, no rebuild."""
    t, d = toy_pair(0)
    gen = torch.Generator().manual_seed(1)
    # sampled runs on the toy pair: rejections at the first position and full acceptances both occur
    seen_zero = seen_full = False
    for k in (1, 2, 3):
        for trial in range(4):
            log: list = []
            with counted(t) as target_fed, counted(d) as draft_fed:
                with under(R_ROLLBACK):
                    new, acc = speculative_decode(t, d, torch.tensor([0, 1, 2]), 12, k, temperature=1.0,
                                                  generator=gen, on_step=cache_checker(t, d, log))
            with under(R_ROLLBACK):
                assert len(new) == 12, f"k={k}: asked for 12 new tokens (the caches' capacity), got {len(new)}"
                assert log, "expected on_step to be called after every step; it was never called"
            with under(R_SPECULATES):
                steps_emit_what_they_report(log, acc, 3)
                speculated(target_fed, draft_fed, acc, 3, k, f"k = {k}, sampled")
            seen_zero |= 0 in acc
            seen_full |= k in acc
    with under(R_SPECULATES):
        assert seen_zero and seen_full, ("the sampled runs on the toy pair (k = 1, 2, 3, 12 tokens each) reported "
                                         "no rejection at the first position or no full acceptance; a speculative "
                                         "decoder meets both there")
    # the draft IS the target: every draft is accepted at temperature 0 (the draft cache must catch up)
    log = []
    with under(R_ROLLBACK):
        new, acc = speculative_decode(t, t, torch.tensor([3, 1]), 13, 3, temperature=0.0, on_step=cache_checker(t, t, log))
    with under(R_SPECULATES):
        assert all(a == min(3, 13 - 1 - sum(acc[:i]) - i) or a == 3 for i, a in enumerate(acc)), f"draft == target at temperature 0: expected every draft accepted, got accepted={acc}"
        steps_emit_what_they_report(log, acc, 2)
    # an end token inside an accepted block, with the shipped pair
    target, draft = shipped_pair()
    pr = prompts(1)[0]
    ref = greedy_reference(target, pr, 20)
    eos = ref[7]
    log = []
    with counted(target) as target_fed, counted(draft) as draft_fed:
        with under(R_ROLLBACK):
            new, acc = speculative_decode(target, draft, pr, 20, 4, temperature=0.0, eos=eos,
                                          on_step=cache_checker(target, draft, log))
    with under(R_ROLLBACK):
        assert list(new) == ref[: ref.index(eos) + 1], f"with end token {eos}: expected the output to stop right after it, got {list(new)}"
    with under(R_SPECULATES):
        steps_emit_what_they_report(log, acc, len(pr), eos)
        speculated(target_fed, draft_fed, acc, len(pr), 4, "the shipped pair, k = 4")


# ------------------------------------------------------------------------------ sampling (lab2_sampling.py: the design)


def check_sampling_contracts(speculative_decode: Callable) -> None:
    """Same generator seed, same tokens; global RNG states untouched; k < 1 raises ValueError."""
    t, d = toy_pair(0)
    prompt = torch.tensor(TOY_PROMPT)

    def run(seed: int) -> list:
        gen = torch.Generator().manual_seed(seed)
        return [[int(x) for x in out[0]] for out in call_each(speculative_decode, [(t, d, prompt, 6, 2)] * 20,
                                                              temperature=1.0, generator=gen)]

    with under(R_SAMPLING_RNG):
        with alone():  # no other check of the grader's process may move the global states meanwhile
            torch_state, np_state = torch.get_rng_state(), np.random.get_state()
            first, second = run(5), run(5)
            torch_after, after = torch.get_rng_state(), np.random.get_state()
        if not torch.equal(torch_state, torch_after):
            raise AssertionError("speculative_decode: expected torch's global random state untouched, but it changed: "
                                 "every random number must come from the generator argument "
                                 "(torch.multinomial(..., generator=generator), torch.rand(..., generator=generator))")
        if not (np_state[0] == after[0] and np.array_equal(np_state[1], after[1]) and np_state[2:] == after[2:]):
            raise AssertionError("speculative_decode: expected numpy's global random state untouched, but it changed: "
                                 "every random number must come from the generator argument")
        if first != second:
            raise AssertionError(f"speculative_decode: expected the same tokens from two generators seeded alike, got "
                                 f"{first[:2]}... and {second[:2]}...: every random number must come from the "
                                 f"generator argument")
    with under(R_K):
        for what, call in {
            "k = 0": lambda: speculative_decode(t, d, prompt, 4, 0, temperature=1.0),
            "k = -1": lambda: speculative_decode(t, d, prompt, 4, -1, temperature=1.0),
        }.items():
            try:
                got = call()
            except ValueError:
                continue
            except Exception as err:  # noqa: BLE001 - the contract asks for ValueError
                raise AssertionError(f"speculative_decode with {what}: expected a ValueError, got "
                                     f"{type(err).__name__}: {err}") from None
            raise AssertionError(f"speculative_decode with {what}: expected a ValueError, nothing was raised "
                                 f"(you returned {got!r})")


def check_sampling_exactness(speculative_decode: Callable) -> None:
    """Sampled speculative decoding follows the target's law on the toy pair (distance test with a stated eps);
    under a grading run's key the seed is drawn from it (autograder/checks/hidden.py)."""
    cases = sampling_cases()
    rng = np.random.default_rng(spec_of(CELLS, "test_sampling").draw_seed())
    with under(R_SAMPLING_LAW):
        # progress on stdout: nbgrader scores a test cell that wrote to stderr as failed
        for case in tqdm(cases, desc="sampling exactness", disable=not GRADING, mininterval=10, file=sys.stdout):
            check_case(case, speculative_decode, rng, ALPHA_CELL / len(cases))


# ------------------------------------------------------------------------------ part 3
def check_metrics(pooled_alpha: Callable, predicted_speedup: Callable) -> None:
    """pooled_alpha counts every verified draft; predicted_speedup follows the book's formula."""
    with under(R_POOLED):
        # k = 4: steps accepting 4 (4 verified), 0 (1 verified), 2 (3 verified): 6 accepted of 8 verified
        got = pooled_alpha([4, 0, 2], 4)
        assert abs(got - 6 / 8) < 1e-9, f"pooled_alpha([4, 0, 2], k=4): expected 6/8 = 0.75, got {got}"
        got = pooled_alpha([1, 1, 1], 1)
        assert abs(got - 1.0) < 1e-9, f"pooled_alpha([1, 1, 1], k=1): expected 1.0, got {got}"
    with under(R_PREDICTED):
        # alpha=0.5, k=2: E[N] = 1 + 0.5 + 0.25 = 1.75; cost 2/4 + 1.5 = 2 -> S = 0.875
        got = predicted_speedup(0.5, 2, 4.0, 1.5)
        assert abs(got - 0.875) < 1e-9, f"predicted_speedup(0.5, 2, c=4, c_verify=1.5): expected 0.875, got {got}"
        got = predicted_speedup(1.0, 3, 2.0, 1.0)
        assert abs(got - 4 / 2.5) < 1e-9, (f"predicted_speedup(1.0, 3, c=2, c_verify=1): every step emits k + 1 = 4 "
                                           f"tokens, expected 4 / 2.5 = 1.6, got {got}")


TIMING_BUDGET_S = speedtest.DECODE_BUDGET_S  # seconds of timed rounds after which no new look starts
TIMING_HARD_LIMIT_S = speedtest.DECODE_HARD_LIMIT_S  # never time longer; the lab's cell limit leaves room for
# this, the wait for the graders' lock (timing.LOCK_WAIT_S), loading the pair and the untimed greedy runs that
# check the outputs (2 per round, about 0.4 s each on a CPU)
TIMING_NEW = speedtest.DECODE_NEW  # tokens per timed call


def check_speedup(speculative_decode: Callable) -> dict:
    """Best-k speedup over the course baseline, and measured >= THEORY_FRACTION * predicted.

    `speclab.speedtest.decoder_speedup` (what the notebook's sweep runs) under the graders' lock:
    paired rounds of the course baseline (greedy generate with the target), the same with the
    draft (their ratio is this round's c), the student's decoder at every k of K_GRID, and loops of
    target forwards over 1 and k + 1 tokens (this round's c_verify(k)); the student's sandbox is
    paused while the course's code is timed. On a CPU the decoder is timed by the CPU time of the student's
    code and the course's code by this thread's (timing.cpu_clocks), as the notebook's speed cell times both
    by its CPU time; on a GPU by the wall clock. Every call of the decoder gets a prompt no earlier
    call got, drawn by speedtest.decode_prompts from a seed the grading run's key draws (hidden.py),
    and every output must be the target's greedy tokens (an AssertionError, not a timing failure,
    if one is not). A clause fails only on a clear verdict of the sequential sign test, for every
    k: false-failure probability <= ALPHA_CLAUSE (1.23 %) per clause, <= 2.5 % for the cell, for a
    decoder whose per-round ratios at some k have a median at or above the bar (5 % with the
    pipeline's re-check).
    """
    from . import timing

    target, draft = shipped_pair()
    with under(R_SPEEDUP):  # a wrong token in a timed call fails here, before any verdict
        speed, theory = speedtest.decoder_speedup(
            speculative_decode, target, draft, spec_of(CELLS, "test_speedup").draw_seed(),
            ks=K_GRID, n_new=TIMING_NEW, budget_s=TIMING_BUDGET_S, hard_limit_s=TIMING_HARD_LIMIT_S,
            section=timing.timing_lock, around=timing.student_paused({f"k={k}" for k in K_GRID}),
            clock_of=timing.cpu_clocks({f"k={k}" for k in K_GRID}, target.device))
    d = speed.details
    table = ", ".join(f"k={k}: {s:.2f}x" for k, s in d["measured"].items())
    how = (f"{d['rounds']} paired rounds; a clear verdict of a sign test, false-failure probability <= "
           f"{timing.ALPHA_CLAUSE:.0%}" + (f"; {speed.note}" if speed.note else ""))
    best_k = d["best_k"]
    if speed.verdict == "fail":
        with under(R_SPEEDUP):
            raise timing.TimingFailure(
                f"speedup over the course's baseline: expected at least {speed.bar}x at some k, measured clearly "
                f"below it at every k (median per k: {table}; {how})")
    if theory.verdict == "fail":
        with under(R_SPEEDUP):
            raise timing.TimingFailure(
                f"measured speedup against the predicted one: expected at least {THEORY_FRACTION} x predicted at "
                f"some k, measured clearly below it at every k (at k={best_k}: {d['measured'][best_k]:.2f}x against "
                f"{d['predicted']:.2f}x predicted, alpha={d['alpha'][best_k]:.3f}, c={d['c']:.2f}, "
                f"c_verify={d['c_verify']:.2f}; {how}): your loop has overhead the cost model does not")
    timing.figure("Lab 2 speed-up (best k)", round(d["measured"][best_k], 3))
    timing.figure("Lab 2 acceptance rate α (best k)", round(d["alpha"][best_k], 4))
    if "inconclusive" in (speed.verdict, theory.verdict):
        timing.undecided(f"speedup timing not clear after {d['rounds']} paired rounds (median per k: {table}); "
                         f"the grader times it again alone; if it stays unclear, the points are held until it is "
                         f"timed again")
    return {"measured": d["measured"], "best_k": best_k, "alpha": d["alpha"][best_k], "c": d["c"],
            "c_verify": d["c_verify"], "predicted": d["predicted"], "rounds": d["rounds"],
            "verdicts": (speed.verdict, theory.verdict), "theory_ratio": d["theory_ratio"]}


# ------------------------------------------------------------------------------ part 4
def check_decode_bytes(decode_bytes: Callable) -> None:
    """decode_bytes counts the least bytes one decode step moves (weights, K and V read and written)."""
    from speclab.measure import decode_step_bytes
    from speclab.model import GPTConfig, PRESETS

    cfgs = [PRESETS["target"], PRESETS["draft"], GPTConfig(n_layer=3, n_head=2, d_model=64, vocab_size=100, mlp_ratio=2)]
    with under(R_BYTES):
        for cfg in cfgs:
            for L in (0, 1, 100, 511):
                want = decode_step_bytes(cfg, L).total
                got = decode_bytes(cfg, L)
                assert got == want, (f"decode_bytes for n_layer={cfg.n_layer}, d_model={cfg.d_model}, context {L}: "
                                     f"expected {want}, got {got} (off by {got - want})")


BANDWIDTH_CALLS = 5  # calls of each side, in turn
BANDWIDTH_FACTOR = 3.0  # the student's median within this factor of ours, either way
BANDWIDTH_BYTES = 64 * 2**20  # the copy each call measures


def check_bandwidth(copy_bandwidth: Callable) -> None:
    """copy_bandwidth is within a factor of BANDWIDTH_FACTOR of the course's own copy measurement: under the
    graders' lock, BANDWIDTH_CALLS calls of each side in turn (ours first, the student's sandbox paused
    while ours runs), then the median of the student's values against the median of ours. Interleaving
    keeps a slow-down of the machine from hitting one side only.

    And each call measured a copy it made: a call that returns B worked at least n_bytes / B seconds, half
    the read and write of one copy at B, as counted by `timing.student_seconds` (on a CPU the CPU time of the
    student's processes, which the kernel counts and no code of the student's can set; on a GPU, where the
    copy is the device's work, the call's wall time). An honest call makes at least one copy and works at least
    2 n_bytes / B; a constant, a value kept from an earlier call or a figure computed without copying returns
    in microseconds."""
    from speclab.measure import copy_bandwidth as course_copy

    from . import timing

    n_bytes = BANDWIDTH_BYTES
    on_cpu = device().type == "cpu"
    paused = timing.student_paused(set())
    ours, theirs, worked = [], [], []
    with under(R_BANDWIDTH):
        with timing.timing_lock():
            for _ in range(BANDWIDTH_CALLS):
                with paused("course copy"):
                    ours.append(course_copy(n_bytes, device=device()).bytes_per_s)
                t0, c0 = time.perf_counter(), timing.student_seconds()
                theirs.append(float(copy_bandwidth(n_bytes)))
                worked.append(timing.student_seconds() - c0 if on_cpu else time.perf_counter() - t0)
        mine, yours = speedtest.median(ours), speedtest.median(theirs)
        assert mine / BANDWIDTH_FACTOR <= yours <= BANDWIDTH_FACTOR * mine, (
            f"copy_bandwidth({n_bytes}): expected within a factor of {BANDWIDTH_FACTOR:g} of torch's own copy "
            f"measured in turn with yours ({mine / 1e9:.2f} GB/s, median of {BANDWIDTH_CALLS}), got a median of "
            f"{yours / 1e9:.2f} GB/s over {BANDWIDTH_CALLS} calls")
        for i, (value, spent) in enumerate(zip(theirs, worked), 1):
            need = n_bytes / value if value > 0 else math.inf
            what = "CPU time" if on_cpu else "wall time"
            assert spent >= need, (
                f"copy_bandwidth({n_bytes}), call {i} of {BANDWIDTH_CALLS}: it returned {value / 1e9:.2f} GB/s, so "
                f"one copy of {n_bytes} bytes at that speed takes {2 * need * 1e3:.2f} ms (read and write), but the "
                f"call worked only {spent * 1e3:.2f} ms of {what}, less than half of that: each call must copy "
                f"n_bytes itself (not return a constant or a value kept from an earlier call)")


# ------------------------------------------------------------------------------ registry
CELLS: list[CellSpec] = [
    CellSpec("test_baseline", 1, 2, check_baseline, ("prefill", "autoregressive_decode"), rules=(R_PREFILL, R_BASELINE),
             note=f"0 up to float rounding: logits compared with a fresh forward (tolerance {ATOL}), greedy tokens"),
    CellSpec("test_greedy", 2, 4, check_greedy_equivalence, ("speculative_decode",), rules=(R_GREEDY,),
             note="0: greedy tokens compared with the course's greedy generate, no randomness"),
    CellSpec("test_rollback", 2, 4, check_rollback, ("speculative_decode",), rules=(R_ROLLBACK, R_SPECULATES),
             note=f"0 up to float rounding: caches compared with a fresh prefill (tolerance {ATOL})",
             in_grader=False),  # passes the student an on_step callback: judged inside the notebook
    CellSpec("test_sampling_contracts", 2, 1, check_sampling_contracts, ("speculative_decode",),
             rules=(R_SAMPLING_RNG, R_K), note="0: the same seed twice, the global states compared, ValueError for k < 1"),
    CellSpec("test_sampling", 2, 3, check_sampling_exactness, ("speculative_decode",), sampling_cases, 2026,
             rules=(R_SAMPLING_LAW,), seed_name="test_sampling_exactness"),
    CellSpec("test_metrics", 3, 2, check_metrics, ("pooled_alpha", "predicted_speedup"), rules=(R_POOLED, R_PREDICTED),
             note="0: values worked by hand, tolerance 1e-9, no randomness"),
    CellSpec("test_speedup", 3, 4, check_speedup, ("speculative_decode",), rules=(R_SPEEDUP,),
             seed=speedtest.DECODE_POOL_SEED, seed_name="test_speedup prompts", timed=True, randomised=True,
             note=f"timing, paired rounds under the graders' lock: fails only on a clear sign-test verdict that the "
                  f"speedup is < {SPEEDUP_CPU}x (CPU) or measured < {THEORY_FRACTION} x predicted at every k; "
                  f"false-failure probability <= 2.5 % per timed run (1.25 % per clause), <= 5 % with the re-check"),
    CellSpec("test_bytes", 4, 2, check_decode_bytes, ("decode_bytes",), rules=(R_BYTES,),
             note="0: exact integer byte counts"),
    CellSpec("test_bandwidth", 4, 1, check_bandwidth, ("copy_bandwidth",), rules=(R_BANDWIDTH,), timed=True,
             randomised=True, note="timing: fails only if the copy bandwidth is off by more than 3x from torch's own "
                                   "copy (medians of 5 calls each, interleaved)"),
]

defer_to_grader(globals())  # the grading pipeline's nbgrader run leaves these checks to the grader
