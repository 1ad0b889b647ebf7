"""The statistical design of Lab 2's sampling cell: the toy pair's settings, the knobs a grading run draws, and
the cases (`stats.ExactnessCase`) that draw from a student's decoder. Two kinds of case:

* the token cases (top-k, top-p): every token of every decode against the target's processed law given its
  prefix, which the grader computes with the cache-free forward. A token that law gives probability 0 fails at
  once, named. The others are mapped to their randomised probability integral transform in the target's rank
  order, u = P(tokens ranked before it) + V * p(token), V uniform on [0, 1] from the grader's generator: for an
  exact decoder the u of all emitted tokens are independent and uniform (the Rosenblatt transform: given its
  prefix, each token follows p), so PIT_BINS equal bins of u are a case whose law is uniform, whatever the
  knobs, and whose power grows with every token decoded, not with every decode. Every decode's knobs are drawn
  from wide ranges (TOKEN_CASES).
* the sequence case ("first two tokens"): the joint law of the first two emitted tokens' transforms (4 x 4 equal
  bins, uniform for an exact decoder), one short decode per setting, each drawn where the knobs change the law
  most (SEQUENCE_RANGES: temperature 1 to 2, a top-k of 2 or 3 or a top-p of 0.5 to 0.8). A knob error in the
  first step, where the toy's draft and target differ most, is diluted in the token cases by the later tokens,
  which the toy's target nearly forces: `knobs_on_p_only` of the catalog moves the token cases' pooled transform
  by about 0.01, and this case's law by about 0.10 (eps 0.06).

The check that uses them is `lab2.check_sampling_exactness`; `python -m autograder.audit.power lab2` computes
each case's false-failure bound, its eps and its power against the catalog. Notation: see the `speclab` package
docstring.
"""
from __future__ import annotations

import numpy as np
import torch

from .calls import call_each
from .models import rebuildable
from .stats import ExactnessCase, ExactnessFailure

TOY_PROMPT = [0, 1]
TOY_NEW = 3  # the sequence case's tokens asked for per decode; it tests the first two
TOKEN_NEW = 12  # the token cases' tokens asked for per decode: each is tested
CHECKED_EVERY = 32  # decodes whose tokens the token cases transform (and check for impossible ones) at a time
PIT_BINS = 8  # equal bins of the randomised PIT: the token cases' outcomes, uniform for an exact decoder
EPS_TARGET = 0.03  # the token cases' design distance (the sequence case's: EPS_SEQUENCE)
SEQUENCE_CASE = "first two tokens"
SEQUENCE_BINS = 4  # equal bins of each of the first two tokens' transforms: 4 x 4 outcomes
# The token cases: name -> (k range, temperature range, top-k choices, top-p range, n tokens). Every decode gets
# its own setting, drawn from these ranges with the case's generator (seeded from the grading run's key), so one
# hidden test meets n / TOKEN_NEW settings across the whole range, and its decodes are independent; a top-k of 4
# (the vocabulary) or a top-p of 1 keeps every token. The law of the PIT bins is uniform at every setting, so
# pooling them is exact, and the eps of a case holds over its range. n: eps <= 0.03 with the early looks
# (stats.n_for_eps on the uniform law of PIT_BINS), rounded up to whole decodes.
TOKEN_CASES = {
    "top-p": ((1, 4), (0.3, 2.0), None, (0.5, 1.0), 32256),
    "top-k": ((1, 4), (0.3, 2.0), (1, 4), None, 32256),
}
# The sequence case's ranges: (k, temperature, top-k choices, top-p range, n decodes); each decode takes a top-k or
# a top-p, with probability 1/2 each. Where the knobs bite: a temperature of at least 1 and cuts that keep a few
# tokens (the range is the check's, not any student's). n: eps <= EPS_SEQUENCE on the uniform law of 16
# outcomes with the early looks (stats.n_for_eps); a correct decoder usually passes at 0.3 n to 0.55 n.
SEQUENCE_RANGES = ((1, 4), (1.0, 2.0), (2, 3), (0.5, 0.8), 9613)
EPS_SEQUENCE = 0.06
# In the token cases a knob is left out (None, the decoder's default: no cut) for this share of decodes, so the
# path that takes no knob at all is tested too.
NO_KNOB_SHARE = 0.2

# A token outside the target's processed support by float rounding only (the decoder's cached forward and the
# grader's cache-free one differ in the last bits) is not failed: the support is widened by this much, on the
# scaled logits for top-k and on the mass before a token for top-p; such a token's u is drawn uniform.
SUPPORT_SLACK = 1e-4


@rebuildable
def toy_pair(seed: int):
    """speclab.toy's (target, draft) toy pair, which the grader's verdict hands the student's decoder as a
    reference the student's side rebuilds (autograder/checks/models.py)."""
    from speclab import toy

    return toy.toy_pair(seed)


def worst_case_eps(case_name: str, n: int, alpha: float) -> float | None:
    """The largest eps of a sampling case over its knob ranges: every output law at TV >= that distance from the
    exact one fails with probability >= 0.999. Every case's law (uniform bins of the transforms) is the same at
    every setting, so its eps is the eps over its range."""
    from .stats import case_eps

    sequence = SEQUENCE_CASE in case_name
    K = SEQUENCE_BINS ** 2 if sequence else PIT_BINS
    return case_eps(ExactnessCase("range", np.full(K, 1 / K), n, lambda fn, rng, m: None,
                                  eps=EPS_SEQUENCE if sequence else EPS_TARGET), alpha)


def _support(rows: torch.Tensor, temp: float, top_k, top_p, slack: float) -> torch.Tensor:
    """Boolean [..., V]: the tokens process_logits(rows, temp, top_k, top_p) keeps, the cuts widened by slack."""
    z = rows.double() / temp
    keep = torch.ones_like(z, dtype=torch.bool)
    if top_k is not None and top_k < z.shape[-1]:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        keep &= z >= kth - slack
    if top_p is not None and top_p < 1:
        probs = torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        kept = (ordered.cumsum(dim=-1) - ordered) < top_p + slack
        keep &= torch.zeros_like(kept).scatter(-1, order, kept)
    return keep


@torch.no_grad()
def token_pits(target, tokens: np.ndarray, knobs: list, rng: np.random.Generator, name: str = "") -> np.ndarray:
    """u [D, L] for tokens [D, L] (D decodes of L tokens after TOY_PROMPT, decode d sampled at knobs[d] =
    (temperature, top_k, top_p)): each token's randomised PIT under the target's processed law given its prefix,
    in the target's rank order (more likely first, ties by token id). Raises ExactnessFailure, naming the token,
    when that law gives a token probability 0."""
    from speclab.sampling import process_logits

    D, L = tokens.shape
    seqs = torch.as_tensor(np.concatenate([np.tile(TOY_PROMPT, (D, 1)), tokens], axis=1), dtype=torch.long)
    start = len(TOY_PROMPT) - 1  # row t of the forward predicts token t + 1
    rows = target.reference_forward(seqs)[:, start:start + L]  # [D, L, V]
    probs = torch.stack([process_logits(rows[d], *knobs[d]) for d in range(D)]).double().numpy()  # [D, L, V]
    ptok = np.take_along_axis(probs, tokens[..., None], axis=-1)[..., 0]  # [D, L]
    rounding = ptok == 0  # outside the support: a failure unless only float rounding put it there
    for d, j in np.argwhere(rounding):
        if not _support(rows[d, j], *knobs[d], SUPPORT_SLACK)[tokens[d, j]]:
            temp, top_k, top_p = knobs[d]
            prefix = TOY_PROMPT + [int(x) for x in tokens[d, :j]]
            raise ExactnessFailure(
                f"[{name}] new token {j + 1} of a decode is {int(tokens[d, j])} after the tokens {prefix}, but the "
                f"target's processed law there (temperature {temp:g}, top-k {top_k}, top-p {top_p}) gives it "
                f"probability 0: {[round(float(x), 4) for x in probs[d, j]]}. An exact decoder never emits it.")
    ids = np.arange(probs.shape[-1])
    ahead = (probs > ptok[..., None]) | ((probs == ptok[..., None]) & (ids < tokens[..., None]))
    u = (probs * ahead).sum(axis=-1) + rng.random((D, L)) * ptok
    u[rounding] = rng.random(int(rounding.sum()))  # at a cut by float rounding only: carries no information
    return np.clip(u, 0.0, 1.0)


def _decode_all(fn, rng, calls: int, new: int, k: int, temp: float, top_k, top_p, name: str,
                pair: tuple | None = None) -> np.ndarray:
    """tokens [calls, new]: `calls` decodes of the toy pair (a fresh one unless given) from TOY_PROMPT, one
    generator seeded from rng."""
    t, d = toy_pair(0) if pair is None else pair
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    results = call_each(fn, [(t, d, torch.tensor(TOY_PROMPT), new, k)] * calls, temperature=temp, top_k=top_k,
                        top_p=top_p, generator=gen)
    out = np.empty((calls, new), dtype=np.int64)
    for j, result in enumerate(results):
        got, _ = result
        got = [int(x) for x in got]
        if len(got) != new or not all(0 <= x < 4 for x in got):
            raise AssertionError(f"[{name}] asked for {new} new tokens in a vocabulary of 4, got {got}")
        out[j] = got
    return out


def _ranges_of(name: str) -> tuple:
    return SEQUENCE_RANGES if name == SEQUENCE_CASE else TOKEN_CASES[name]


def draw_setting(name: str, rng: np.random.Generator) -> tuple:
    """(k, temperature, top_k, top_p) for one decode of a case (a token case, or the sequence case), drawn from
    its ranges (temperature and top-p rounded to 2 decimals). The sequence case takes a top-k or a top-p, with
    probability 1/2 each; a token case leaves its knob out (None) for NO_KNOB_SHARE of its decodes."""
    ks, temps, top_ks, top_ps, _ = _ranges_of(name)
    k = int(rng.integers(ks[0], ks[1] + 1))
    temp = round(float(rng.uniform(*temps)), 2)
    if name == SEQUENCE_CASE:
        top_ks, top_ps = (top_ks, None) if rng.random() < 0.5 else (None, top_ps)
    elif rng.random() < NO_KNOB_SHARE:
        top_ks = top_ps = None
    top_k = None if top_ks is None else int(rng.integers(top_ks[0], top_ks[1] + 1))
    top_p = None if top_ps is None else round(float(rng.uniform(*top_ps)), 2)
    return k, temp, top_k, top_p


def _ranges(name: str) -> str:
    ks, temps, top_ks, top_ps, _ = _ranges_of(name)
    knob = " or ".join(([f"top-k {top_ks[0]} to {top_ks[1]}"] if top_ks else [])
                       + ([f"top-p {top_ps[0]:g} to {top_ps[1]:g}"] if top_ps else []))
    knob += "" if name == SEQUENCE_CASE else " or none"
    return f"{knob}, T {temps[0]:g} to {temps[1]:g}, k {ks[0]} to {ks[1]}"


def _group_pits(fn, rng, name: str, decodes: int, new: int, shown: str, t, first: int | None = None):
    """The randomised PITs of the tokens of `decodes` decodes of `new` tokens each (of the first `first` of each
    decode when given), each decode at its own setting of case `name`, CHECKED_EVERY decodes at a time: checked
    as they come, so an impossible token fails early. One toy pair serves each group (building it costs as much
    as a decode)."""
    for start in range(0, decodes, CHECKED_EVERY):
        settings = [draw_setting(name, rng) for _ in range(min(CHECKED_EVERY, decodes - start))]
        pair = toy_pair(0)
        tokens = np.concatenate([
            _decode_all(fn, rng, 1, new, k, temp, top_k, top_p,
                        f"{shown}: T={temp:g}, top-k={top_k}, top-p={top_p}, k={k}", pair)
            for k, temp, top_k, top_p in settings])
        if first is not None:
            tokens = tokens[:, :first]
        yield token_pits(t, tokens, [s[1:] for s in settings], rng, shown)


def token_case(name: str) -> ExactnessCase:
    """The token case `name` of TOKEN_CASES: PIT bins of every token of its decodes, each decode at its own
    setting (so decodes are independent, and so are the settings they meet)."""
    t, _ = toy_pair(0)
    n = TOKEN_CASES[name][-1]
    shown = f"speculative_decode on the toy pair, every emitted token, {_ranges(name)} (drawn for every decode)"

    def draw(fn, rng, n):
        decodes = -(-n // TOKEN_NEW)  # whole decodes; the last one's extra tokens are not used
        bins = [np.minimum((u * PIT_BINS).astype(np.int64), PIT_BINS - 1).reshape(-1)
                for u in _group_pits(fn, rng, name, decodes, TOKEN_NEW, shown, t)]
        return np.concatenate(bins)[:n]

    draw.block = TOKEN_NEW  # outcomes come TOKEN_NEW to a decode, dependent within it (autograder.audit.power)
    labels = [f"PIT in [{i / PIT_BINS:.3f}, {(i + 1) / PIT_BINS:.3f})" for i in range(PIT_BINS)]
    return ExactnessCase(
        shown, np.full(PIT_BINS, 1 / PIT_BINS), n, draw, labels, eps=EPS_TARGET,
        guarantee=f"every emitted token against the target's processed law given its prefix ({PIT_BINS} bins of its "
                  "randomised PIT in the target's rank order), at settings drawn for every decode",
        follows="the uniform law (each token's place in the target's processed law given its prefix)")


def sequence_case() -> ExactnessCase:
    """The sequence case: the joint law of the first two tokens' transforms (SEQUENCE_BINS equal bins each), one
    decode of TOY_NEW tokens per setting, each setting drawn from SEQUENCE_RANGES."""
    t, _ = toy_pair(0)
    n = SEQUENCE_RANGES[-1]
    shown = f"speculative_decode on the toy pair, {SEQUENCE_CASE}, {_ranges(SEQUENCE_CASE)} (drawn for every decode)"
    B = SEQUENCE_BINS

    def draw(fn, rng, n):
        out = []
        for u in _group_pits(fn, rng, SEQUENCE_CASE, n, TOY_NEW, shown, t, first=2):
            b = np.minimum((u * B).astype(np.int64), B - 1)
            out.append(B * b[:, 0] + b[:, 1])
        return np.concatenate(out)

    edges = [f"[{i / B:g}, {(i + 1) / B:g})" for i in range(B)]
    labels = [f"PITs of the first two tokens in {a} x {b}" for a in edges for b in edges]
    return ExactnessCase(
        shown, np.full(B * B, 1 / B ** 2), n, draw, labels, eps=EPS_SEQUENCE,
        guarantee=f"the joint law of the first two emitted tokens ({B} x {B} bins of their randomised PITs in the "
                  "target's rank order), at settings drawn for every decode",
        follows="the uniform law (each token's place in the target's processed law given its prefix)")


def sampling_cases() -> list[ExactnessCase]:
    """The sequence case, then the token cases."""
    return [sequence_case()] + [token_case(name) for name in TOKEN_CASES]
