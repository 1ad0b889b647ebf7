"""speclab.graphed: greedy decoding on CUDA graphs (the static path run eagerly where there is no CUDA).

Greedy speculative decoding must emit exactly the tokens of greedy autoregressive decoding, and
those must be the argmax of the cache-free oracle; the equality is shown to catch an off-by-one
rollback. Deterministic: no error rates to state.
"""

from __future__ import annotations

import pytest
import torch

from speclab.graphed import GraphedPair, graphed_greedy_autoregressive, graphed_greedy_speculative, static_capacity
from speclab.model import StaticKVCache

CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("needed, max_len, expected", [(1, 1024, 16), (16, 1024, 16), (17, 1024, 32),
                                                       (129, 1024, 144), (1000, 1010, 1008), (1000, 1005, 1005), (64, 64, 64)])
def test_static_capacity_rounds_up_to_16_within_max_len(needed, max_len, expected):
    assert static_capacity(needed, max_len) == expected


@pytest.fixture(scope="module")
def shipped():
    from speclab.checkpoints import load_pair
    from speclab.data import heldout_windows

    target, draft = load_pair()
    return target, draft, heldout_windows(1, 16, seed=5)[0]


def test_pair_holds_one_step_per_shape(shipped):
    target, draft, _ = shipped
    pair = GraphedPair(target, draft, capacity=40, ks=[2, 5])
    assert pair.tc.capacity == pair.dc.capacity == 48  # 40 rounded up to a multiple of 16
    assert isinstance(pair.tc, StaticKVCache) and pair.tc.n_layer == target.cfg.n_layer
    assert pair.t1.T == pair.d1.T == 1 and {k: s.T for k, s in pair.verify.items()} == {2: 3, 5: 6}
    with pytest.raises(ValueError, match="no verify graph for k=3"):
        graphed_greedy_speculative(pair, torch.arange(40, 50), 4, 3)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 4])
def test_graphed_greedy_speculative_emits_the_greedy_tokens(shipped, k):
    target, draft, prompt = shipped
    pair = GraphedPair(target, draft, capacity=16 + 40 + 8, ks=[k])
    want = graphed_greedy_autoregressive(pair, prompt, 40)
    got, accepted = graphed_greedy_speculative(pair, prompt, 40, k)
    assert got == want
    # the oracle: greedy decoding by one cache-free forward of the whole sequence
    seq = torch.tensor([prompt.tolist() + want])
    assert target.reference_forward(seq)[0, 15:-1].argmax(-1).tolist() == want
    assert 0 < sum(accepted) < k * len(accepted)  # some drafts accepted, some rejected: both branches ran


@pytest.mark.slow
def test_equality_check_catches_an_off_by_one_rollback(shipped):
    # the equality above can fail: a decoder whose target rollback keeps one position too few
    # verifies against a shifted context and emits other tokens
    target, draft, prompt = shipped
    pair = GraphedPair(target, draft, capacity=16 + 40 + 8, ks=[3])
    want = graphed_greedy_autoregressive(pair, prompt, 40)
    pair.tc.rollback_unchecked = lambda n: StaticKVCache.rollback_unchecked(pair.tc, n - 1)
    got, _ = graphed_greedy_speculative(pair, prompt, 40, 3)
    assert got != want


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_graphed_decoders_on_cuda_emit_the_greedy_tokens():
    """The CUDA-graph decoders in float32 (bf16 may flip near-ties between a 1-token and a k+1-token
    forward): speculative output equals autoregressive output, and no step reads the host mid-draft."""
    from speclab.checkpoints import load_pair
    from speclab.data import heldout_windows

    target, draft = load_pair(device="cuda", dtype=torch.float32)
    prompt = heldout_windows(1, 16, seed=5)[0].cuda()
    pair = GraphedPair(target, draft, capacity=16 + 64 + 10, ks=[2, 5])
    assert pair.t1.captured and pair.verify[5].captured
    want = graphed_greedy_autoregressive(pair, prompt, 64)
    for k in (2, 5):
        got, accepted = graphed_greedy_speculative(pair, prompt, 64, k)
        assert got == want and sum(accepted) > 0
