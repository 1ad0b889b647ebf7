"""process_logits (temperature, top-k, top-p), sample, and plain generation.

Notation: p = target distribution, q = draft distribution. process_logits is the one transform used
both to draw a draft token from q and in the acceptance test, so its values are checked by hand.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from speclab.data import decode, encode
from speclab.model import GPT, GPTConfig
from speclab.sampling import generate, process_logits, sample

BASE = torch.tensor([0.5, 0.3, 0.2])
LOGITS = BASE.log()


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, [0.5, 0.3, 0.2]),
        ({"top_k": 3}, [0.5, 0.3, 0.2]),
        ({"top_k": 2}, [0.625, 0.375, 0.0]),  # 0.5/0.8, 0.3/0.8
        ({"top_k": 1}, [1.0, 0.0, 0.0]),
        ({"top_p": 1.0}, [0.5, 0.3, 0.2]),
        ({"top_p": 0.6}, [0.625, 0.375, 0.0]),  # 0.5 < 0.6, so the 0.3 token is needed; 0.8 >= 0.6 stops
        ({"top_p": 0.5}, [1.0, 0.0, 0.0]),  # the first token alone reaches 0.5
        ({"top_p": 0.01}, [1.0, 0.0, 0.0]),  # never empty
        ({"temperature": 0}, [1.0, 0.0, 0.0]),
        ({"temperature": 0, "top_k": 2, "top_p": 0.1}, [1.0, 0.0, 0.0]),
        # T = 2: probabilities proportional to sqrt(0.5), sqrt(0.3), sqrt(0.2) = .70711, .54772, .44721 (sum 1.70204)
        ({"temperature": 2.0}, [0.415449, 0.321803, 0.262748]),
        # T = 0.5: proportional to .25, .09, .04 (sum .38)
        ({"temperature": 0.5}, [0.657895, 0.236842, 0.105263]),
        # T = 2 then top-k 2: .70711 / 1.25483, .54772 / 1.25483
        ({"temperature": 2.0, "top_k": 2}, [0.563508, 0.436492, 0.0]),
    ],
)
def test_process_logits_hand_values(kwargs, expected):
    probs = process_logits(LOGITS, **kwargs)
    torch.testing.assert_close(probs, torch.tensor(expected), atol=1e-5, rtol=0)


def test_process_logits_batched_rows_are_independent():
    logits = torch.stack([LOGITS, LOGITS.flip(0)])  # [2, 3]
    probs = process_logits(logits, top_k=2)
    torch.testing.assert_close(probs, torch.tensor([[0.625, 0.375, 0.0], [0.0, 0.375, 0.625]]), atol=1e-6, rtol=0)


def test_temperature_zero_breaks_ties_at_the_first_maximum():
    probs = process_logits(torch.tensor([1.0, 3.0, 3.0, 0.0]), temperature=0)
    assert probs.tolist() == [0.0, 1.0, 0.0, 0.0]


def test_top_k_keeps_ties_with_the_kth_logit():
    probs = process_logits(torch.tensor([2.0, 1.0, 1.0, 0.0]), top_k=2)
    e = math.e
    torch.testing.assert_close(probs, torch.tensor([e, 1, 1, 0]) / (e + 2), atol=1e-6, rtol=0)


def test_output_is_float32_and_normalised_for_half_inputs():
    probs = process_logits(torch.randn(4, 256).to(torch.bfloat16), temperature=0.7, top_p=0.9)
    assert probs.dtype == torch.float32
    torch.testing.assert_close(probs.sum(-1), torch.ones(4), atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 1.5}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_bad_settings_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        process_logits(LOGITS, **kwargs)


def test_nan_logits_raise():
    with pytest.raises(ValueError, match="NaN"):
        process_logits(torch.tensor([0.0, float("nan")]))


# Sampling follows the processed distribution. n = 6000 draws from [0.625, 0.375, 0] (top_k=2):
#   * the removed token must never appear (exact for a correct sampler);
#   * a chi-square goodness-of-fit test on the two kept tokens at level 1e-3: a correct sampler
#     fails with probability 1e-3 (and the seed is fixed, so the run is reproducible).
# Power against the known-wrong sampler that draws from the unprocessed softmax [0.5, 0.3, 0.2]:
#   the removed token appears with probability 1 - 0.8**6000 (= 1 to machine precision).
# Power against a sampler that ignores temperature 2 (draws [0.5, 0.3, 0.2] instead of
#   [0.4154, 0.3218, 0.2627]) is computed below with the noncentral chi-square distribution.
N_DRAWS = 6000
LEVEL = 1e-3


def chi2_power(true: list[float], claimed: list[float], n: int, df: int, level: float) -> float:
    nc = n * sum((t - c) ** 2 / c for t, c in zip(true, claimed))
    return float(stats.ncx2.sf(stats.chi2.isf(level, df), df, nc))


def test_power_of_the_sampling_tests_is_high():
    assert 1 - 0.8**N_DRAWS == 1.0
    assert chi2_power([0.5, 0.3, 0.2], [0.415449, 0.321803, 0.262748], N_DRAWS, 2, LEVEL) > 0.999


def test_sample_follows_process_logits_top_k():
    g = torch.Generator().manual_seed(0)
    probs = process_logits(LOGITS, top_k=2)
    draws = sample(probs.expand(N_DRAWS, 3), generator=g)
    counts = torch.bincount(draws, minlength=3)
    assert counts[2] == 0
    expected = probs[:2].double().numpy()
    result = stats.chisquare(counts[:2].numpy(), N_DRAWS * expected / expected.sum())
    assert result.pvalue > LEVEL


def test_sample_follows_process_logits_temperature():
    g = torch.Generator().manual_seed(1)
    probs = process_logits(LOGITS, temperature=2.0)
    counts = torch.bincount(sample(probs.expand(N_DRAWS, 3), generator=g), minlength=3)
    expected = probs.double().numpy()
    assert stats.chisquare(counts.numpy(), N_DRAWS * expected / expected.sum()).pvalue > LEVEL


# -- generation --------------------------------------------------------------------------


def tiny_model() -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig.preset("tiny")).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 2.0 / math.sqrt(param.shape[-1]))
    return model


def test_greedy_generation_is_deterministic_and_matches_reference_argmax():
    model = tiny_model()
    prompt = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(3))
    a = generate(model, prompt, 20, temperature=0)
    b = generate(model, prompt, 20, temperature=0)
    assert torch.equal(a, b)
    seq = prompt
    for _ in range(20):  # slow oracle: full reference forward each step, take the argmax
        seq = torch.cat([seq, model.reference_forward(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(a, seq)


def test_seeded_sampling_is_reproducible():
    model = tiny_model()
    prompt = torch.zeros(1, 3, dtype=torch.long)
    a = generate(model, prompt, 15, temperature=1.0, generator=torch.Generator().manual_seed(5))
    b = generate(model, prompt, 15, temperature=1.0, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


@pytest.mark.parametrize("text", ["", "def f(x):\n    return x", "caf\u00e9 \u2713"])
def test_encode_decode_round_trip(text):
    ids = encode(text)
    assert ids.dtype == torch.long and ids.tolist() == list(text.encode("utf-8"))
    assert decode(ids) == text


def test_encode_hand_values():
    assert encode("A\n\u00e9").tolist() == [65, 10, 0xC3, 0xA9]
