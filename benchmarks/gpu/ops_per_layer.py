"""How many device operations one static decode step runs per layer (benchmarks/gpu/README.md, "Where the
decode step's time goes"): torch.profiler on the CPU, the difference between a 3-layer and a 1-layer model
of the same width, halved. Each operation that computes is one kernel on a GPU, and a replayed CUDA graph
still pays a few microseconds per kernel, so this count, times that cost, is the per-layer fixed time.

    python -m benchmarks.gpu.ops_per_layer
"""
from __future__ import annotations

import collections

import torch
from torch.profiler import ProfilerActivity, profile

from speclab.model import GPT, GPTConfig

# operations that only describe a tensor (no kernel on a GPU)
VIEWS = {"aten::as_strided", "aten::view", "aten::transpose", "aten::reshape", "aten::t", "aten::_unsafe_view",
         "aten::slice", "aten::select", "aten::unsqueeze", "aten::permute", "aten::flatten", "aten::unbind",
         "aten::expand", "aten::resolve_conj", "aten::result_type", "aten::empty", "aten::empty_strided",
         "aten::empty_like", "aten::to", "aten::_to_copy", "aten::linear", "aten::matmul",
         "aten::scaled_dot_product_attention", "aten::scalar_tensor"}


def step_ops(n_layer: int, d_model: int = 128, context: int = 128) -> collections.Counter:
    """Operator name -> calls in one static decode step (the path CUDA graphs capture)."""
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=256, d_model=d_model, n_head=4, n_layer=n_layer, max_len=2 * context)
    model = GPT(cfg).eval()
    cache = model.new_static_cache(batch=1, max_len=context + 32)
    token = torch.randint(256, (1, 1))
    with torch.inference_mode():
        model.forward_static(torch.randint(256, (1, context)), cache)
        cache.rollback_unchecked(context)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            model.forward_static(token, cache)
    return collections.Counter(e.name for e in prof.events())


def per_layer() -> dict[str, float]:
    """Operator name -> calls per layer, for the operators that launch work (views left out)."""
    one, three = step_ops(1), step_ops(3)
    return {name: (three[name] - one[name]) / 2 for name in three
            if three[name] != one[name] and name not in VIEWS}


def main() -> None:
    ops = per_layer()
    for name, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{n:5.1f}  {name}")
    print(f"{sum(ops.values()):5.1f}  operations that launch work, per layer "
          f"({sum(n for k, n in ops.items() if k in ('aten::mm', 'aten::bmm', 'aten::addmm')):g} matrix products)")


if __name__ == "__main__":
    main()
