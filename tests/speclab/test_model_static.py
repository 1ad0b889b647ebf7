"""The static (graph-capturable) decode path: `forward_static` on a `StaticKVCache` gives the same
logits as the readable eager path `model(tokens, positions, cache)`, chunk by chunk and after
rollbacks; it never reads a device value on the host (no sync per step); and `GraphedStep` replays
it as a CUDA graph where there is a GPU (those tests are marked `gpu` and skipped without CUDA).

Models have random weights with a large spread (as in test_model.py) so that a masking or position
mistake moves logits by O(1), far above the fp32 tolerance.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from speclab.model import GPT, GPTConfig, GraphedStep, StaticKVCache

ATOL = 1e-4  # fp32, logits of order 10
CUDA = torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")

# aten ops that hand a device value to the host (a GPU sync): .item()/int()/bool() and friends
HOST_READS = {"_local_scalar_dense", "equal", "nonzero", "is_nonzero", "item", "masked_select", "unique", "_unique2",
              "Tensor.tolist", "Tensor.numpy"}  # the last two read without an aten op: OpRecorder wraps them


def make_model(preset: str = "tiny", seed: int = 0, dtype: torch.dtype = torch.float32, device: str = "cpu") -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig.preset(preset)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.5 / math.sqrt(param.shape[-1]) * 4)
    return model.to(device=device, dtype=dtype)


def random_tokens(B: int, T: int, seed: int, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (B, T), generator=g).to(device)


def eager_chunks(model, tokens, chunks, cache):
    outs, start = [], cache.length
    for size in chunks:
        pos = torch.arange(start, start + size, device=tokens.device)
        outs.append(model(tokens[:, start : start + size], pos, cache))
        start += size
    return torch.cat(outs, dim=1)


@torch.no_grad()
def static_chunks(model, tokens, chunks, cache, start: int):
    outs = []
    for size in chunks:
        outs.append(model.forward_static(tokens[:, start : start + size], cache).clone())
        start += size
    return torch.cat(outs, dim=1)


class OpRecorder(TorchDispatchMode):
    """Names of the aten ops a piece of code runs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))

    # reads of device values that run no aten op, so the dispatch mode alone would not see them
    WRAPPED = ("tolist", "numpy")

    def __enter__(self):
        self._saved = {name: getattr(torch.Tensor, name) for name in self.WRAPPED}
        for name, original in self._saved.items():
            def wrapper(tensor, *args, _original=original, _name=name, **kwargs):
                self.ops.add(f"Tensor.{_name}")
                return _original(tensor, *args, **kwargs)
            setattr(torch.Tensor, name, wrapper)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        return super().__exit__(*exc)


# -- equality with the eager path -------------------------------------------------------


@pytest.mark.parametrize("chunks", [[1] * 24, [9, 1, 1, 13], [24], [5, 4, 1, 1, 1, 12]])
def test_static_path_matches_eager_path_chunk_by_chunk(chunks):
    model = make_model(seed=1)
    tokens = random_tokens(2, sum(chunks), 1)
    want = eager_chunks(model, tokens, chunks, model.new_cache(batch=2, max_len=40))
    cache = model.new_static_cache(batch=2, max_len=40)
    got = static_chunks(model, tokens, chunks, cache, 0)
    assert cache.length == sum(chunks)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    torch.testing.assert_close(got, model.reference_forward(tokens), atol=ATOL, rtol=0)


@pytest.mark.parametrize("keep, as_tensor", [(0, False), (7, True), (15, False), (19, True)])
def test_static_rollback_matches_eager_rollback(keep, as_tensor):
    """Decode 20 tokens, roll back to keep, decode a different continuation: same logits as the eager
    cache doing the same, although the static path attends over all capacity slots (stale ones masked)."""
    model = make_model(seed=2)
    old = random_tokens(1, 20, 2)
    tail = random_tokens(1, 10, 3)
    new = torch.cat([old[:, :keep], tail], dim=1)

    eager = model.new_cache(batch=1, max_len=32)
    eager_chunks(model, old, [12, 1, 7], eager)
    eager.rollback(keep)
    want = eager_chunks(model, new, [4, 1, 5], eager)

    static = model.new_static_cache(batch=1, max_len=32)
    static_chunks(model, old, [12, 1, 7], static, 0)
    static.rollback(torch.tensor(keep) if as_tensor else keep)
    assert static.length == keep
    got = static_chunks(model, new, [4, 1, 5], static, keep)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    torch.testing.assert_close(got, model.reference_forward(new)[:, keep:], atol=ATOL, rtol=0)


def test_stale_slots_with_huge_values_are_not_read():
    # slots past the valid length hold whatever an abandoned continuation wrote; fill them with
    # huge finite values: the mask must give them probability exactly 0
    model = make_model(seed=4)
    tokens = random_tokens(1, 16, 4)
    clean = model.new_static_cache(batch=1, max_len=32)
    want = static_chunks(model, tokens, [10, 1, 5], clean, 0)
    dirty = model.new_static_cache(batch=1, max_len=32)
    for buf in dirty.k + dirty.v:
        buf.fill_(1e4)
    got = static_chunks(model, tokens, [10, 1, 5], dirty, 0)
    torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_stale_slot_detector_can_fail():
    # the test above can fail: a huge value inside the valid region does move the output
    model = make_model(seed=4)
    tokens = random_tokens(1, 11, 4)
    cache = model.new_static_cache(batch=1, max_len=32)
    with torch.no_grad():
        model.forward_static(tokens[:, :10], cache)
        a = model.forward_static(tokens[:, 10:], cache).clone()
        cache.rollback(10)
        cache.k[0][:, :, 3] = 1e4
        b = model.forward_static(tokens[:, 10:], cache)
    assert (a - b).abs().max() > 1e-2


def test_static_path_in_bfloat16_matches_eager_bfloat16():
    model = make_model(seed=5, dtype=torch.bfloat16)
    tokens = random_tokens(1, 20, 5)
    want = eager_chunks(model, tokens, [12, 1, 1, 6], model.new_cache(batch=1, max_len=32))
    got = static_chunks(model, tokens, [12, 1, 1, 6], model.new_static_cache(batch=1, max_len=32), 0)
    assert got.dtype == torch.float32 and model.new_static_cache().dtype == torch.bfloat16
    # bf16 has 8 bits of mantissa: logits of order 10 agree to a few hundredths, a wrong mask moves them by O(1)
    torch.testing.assert_close(got, want, atol=0.1, rtol=0.02)


# -- no host read per step ----------------------------------------------------------------


def test_static_step_reads_nothing_back_to_the_host():
    model = make_model(seed=6)
    cache = model.new_static_cache(batch=1, max_len=32)
    tokens = random_tokens(1, 4, 6)
    with torch.no_grad(), OpRecorder() as rec:
        model.forward_static(tokens[:, :3], cache)
        model.forward_static(tokens[:, 3:], cache)
        cache.rollback(torch.zeros((), dtype=torch.long))
    assert "index_copy_" in rec.ops  # the recorder sees the step's ops
    assert not rec.ops & HOST_READS, rec.ops & HOST_READS


def test_host_read_detector_flags_the_eager_path():
    # the readable path checks token values and positions on the host: the detector must see it
    model = make_model(seed=6)
    with torch.no_grad(), OpRecorder() as rec:
        model(random_tokens(1, 3, 6), torch.arange(3), model.new_cache(batch=1, max_len=8))
    assert rec.ops & HOST_READS


def test_static_step_compiles_without_graph_breaks():
    model = make_model(seed=7)
    cache = model.new_static_cache(batch=1, max_len=32)
    step = torch.compile(model.forward_static, fullgraph=True, backend="eager")  # raises on a graph break
    tokens = random_tokens(1, 3, 7)
    with torch.no_grad():
        got = torch.cat([step(tokens[:, i : i + 1], cache).clone() for i in range(3)], dim=1)
    torch.testing.assert_close(got, model.reference_forward(tokens), atol=ATOL, rtol=0)


# -- errors --------------------------------------------------------------------------------


def test_static_cache_errors():
    model = make_model()
    cache = model.new_static_cache(batch=1, max_len=8)
    assert isinstance(cache, StaticKVCache) and cache.length == 0 and cache.capacity == 8
    with pytest.raises(TypeError, match="StaticKVCache"):
        model.forward_static(random_tokens(1, 1, 0), model.new_cache(batch=1, max_len=8))
    with pytest.raises(ValueError, match="batch mismatch"):
        model.forward_static(random_tokens(2, 1, 0), cache)
    with pytest.raises(ValueError, match="capacity"):
        model.forward_static(random_tokens(1, 9, 0), cache)
    with torch.no_grad():
        model.forward_static(random_tokens(1, 3, 0), cache)
    with pytest.raises(ValueError, match="roll back"):
        cache.rollback(4)
    with pytest.raises(ValueError, match="0-d integer"):
        cache.rollback(torch.tensor([1]))
    assert cache.length == 3
    with pytest.raises(ValueError, match="max_len"):
        model.new_static_cache(max_len=model.cfg.max_len + 1)


def test_graphed_step_on_cpu_is_the_static_forward():
    model = make_model(seed=8)
    cache = model.new_static_cache(batch=1, max_len=16)
    step = GraphedStep(model, cache, T=2)
    assert not step.captured and cache.length == 0
    tokens = random_tokens(1, 4, 8)
    got = torch.cat([step(tokens[:, :2]).clone(), step(tokens[:, 2:]).clone()], dim=1)
    torch.testing.assert_close(got, model.reference_forward(tokens), atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match="captured for tokens of shape"):
        step(tokens[:, :1])


# -- GPU only ------------------------------------------------------------------------------


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_graphed_step_replays_match_eager_on_cuda(dtype):
    model = make_model(seed=9, dtype=dtype, device="cuda")
    tokens = random_tokens(1, 24, 9, device="cuda")
    want = eager_chunks(model, tokens, [16] + [1] * 8, model.new_cache(batch=1, max_len=32))
    cache = model.new_static_cache(batch=1, max_len=32)
    with torch.no_grad():
        prefill = model.forward_static(tokens[:, :16], cache).clone()
    step = GraphedStep(model, cache, T=1)
    assert step.captured and cache.length == 16
    torch.cuda.set_sync_debug_mode("error")  # any host sync inside the replays raises
    try:
        outs = [step(tokens[:, 16 + i : 17 + i]).clone() for i in range(8)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    got = torch.cat([prefill] + outs, dim=1)
    tol = dict(atol=ATOL, rtol=0) if dtype == torch.float32 else dict(atol=0.1, rtol=0.02)
    torch.testing.assert_close(got, want, **tol)
    cache.rollback(20)
    again = step(tokens[:, 20:21]).clone()
    torch.testing.assert_close(again, want[:, 20:21], **tol)


@gpu
@needs_cuda
def test_reduce_overhead_compile_matches_on_cuda():
    model = make_model(seed=10, dtype=torch.bfloat16, device="cuda")
    cache = model.new_static_cache(batch=1, max_len=32)
    step = torch.compile(model.forward_static, mode="reduce-overhead", fullgraph=True)
    tokens = random_tokens(1, 12, 10, device="cuda")
    with torch.no_grad():
        got = torch.cat([step(tokens[:, i : i + 1], cache).clone() for i in range(12)], dim=1)
    want = model.reference_forward(tokens)
    torch.testing.assert_close(got, want, atol=0.15, rtol=0.03)


def test_graphed_step_takes_a_compiled_forward():
    # GraphedStep(forward=torch.compile(...)) is how benchmarks/gpu/report.py --compile captures fused kernels;
    # on a CPU nothing is captured and the compiled function runs as is
    model = make_model(seed=11)
    cache = model.new_static_cache(batch=1, max_len=16)
    step = GraphedStep(model, cache, T=1, forward=torch.compile(model.forward_static, fullgraph=True, backend="eager"))
    tokens = random_tokens(1, 5, 11)
    got = torch.cat([step(tokens[:, i : i + 1]).clone() for i in range(5)], dim=1)
    torch.testing.assert_close(got, model.reference_forward(tokens), atol=ATOL, rtol=0)
