"""A tiny byte-level GPT with a pre-allocated, rollback-able KV cache.

Notation: see the `speclab` package docstring.
This module only builds models; whether a model plays p (target) or q (draft)
is decided by the preset it is built from.

Shape glossary (used in every shape comment below):
    B  batch size            T  number of new tokens in this forward
    L  valid cache length before this forward (cache.length)
    S  L + T, the number of key/value slots a query may look at
    C  d_model = nh * hs     nh number of heads    hs head size
    V  vocabulary size (256: one token per byte)

Three ways to run the same weights:
    model(tokens, positions, cache)   incremental: reads slots [0, L), writes [L, L+T)
    model(tokens, positions, None)    plain causal forward over a contiguous run of positions
    model.reference_forward(tokens)   slow, cache-free oracle with hand-written attention

and one fast path for accelerators (see "The static path" below):
    model.forward_static(tokens, static_cache)   same arithmetic, fixed shapes, L kept on the device

Rollback is `cache.rollback(n)`: it only moves the length pointer. Stale slots
past the pointer are never read because attention slices the buffers to
[0, L+T) before any arithmetic, so even NaN left there cannot reach an output.
The two caches live in `speclab.kvcache` (and are importable from here); the input
checks, shared with `speclab.hf`, in `speclab.inputs`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from speclab.inputs import check_cache_room, check_positions, check_tokens
from speclab.kvcache import KVCache, StaticKVCache

__all__ = ["GPTConfig", "GPT", "KVCache", "StaticKVCache", "GraphedStep", "PRESETS", "PAIRS"]

Device = torch.device | str | None  # where a cache is allocated (None: the model's device)
DType = torch.dtype | None  # what a cache holds (None: the model's dtype)


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a decoder-only transformer; every field is a hyper-parameter."""

    n_layer: int = 6  # number of transformer blocks
    n_head: int = 8  # attention heads per block (nh)
    d_model: int = 256  # residual stream width (C = nh * hs)
    vocab_size: int = 256  # one token per byte; draft and target must agree
    max_len: int = 1024  # longest sequence (positions 0 .. max_len-1) the model accepts
    mlp_ratio: int = 4  # hidden width of the MLP is mlp_ratio * d_model
    rope_base: float = 10000.0  # base of the rotary position embedding frequencies
    norm_eps: float = 1e-5  # epsilon of the RMS norms

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_head", "d_model", "vocab_size", "max_len", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")
        if self.head_dim % 2:
            raise ValueError(f"head size d_model/n_head={self.head_dim} must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        """hs: width of one attention head."""
        return self.d_model // self.n_head

    @classmethod
    def preset(cls, name: str) -> "GPTConfig":
        """The named configuration (see PRESETS)."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return PRESETS[name]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# The shipped pair. Sizes were chosen by measuring the cached per-token decode
# latency on a 2-core CPU (see MODEL_CARD.md): at these widths the cost of a
# forward is dominated by per-layer overhead, so the draft has one block and the
# target several; both read the same 256-byte vocabulary.
PRESETS: dict[str, GPTConfig] = {
    "target": GPTConfig(n_layer=6, n_head=4, d_model=256),
    "draft": GPTConfig(n_layer=1, n_head=4, d_model=256),
    # a very small model for fast unit tests; never shipped
    "tiny": GPTConfig(n_layer=2, n_head=2, d_model=32, max_len=64),
    "tiny-draft": GPTConfig(n_layer=1, n_head=2, d_model=32, max_len=64),
    # The GPU pair, trained by `python -m speclab.train --pair gpu` on a GPU and not
    # shipped (the target is ~400 MB in fp16). Why these shapes, for batch-1 decoding on an
    # H100-class GPU (about 3 TB/s of copy bandwidth, launches of a few microseconds):
    # - below a few hundred MB of weights a decode step is bound by kernel launches, about a
    #   dozen per block, so T_target / T_draft grows with the ratio of block COUNTS; width is
    #   almost free. Sixteen target blocks against one draft block put c near 10 with CUDA
    #   graphs (launch-bound both), and higher still in eager mode.
    # - width 1024 makes each target block read 25 MB of bf16 weights, so the target is
    #   starting to feel the memory roof (16 * 25 MB / 3 TB/s ~ 0.13 ms) while the draft, one
    #   block of the same width, stays launch-bound; the same width lets the draft reuse the
    #   target's embedding geometry and helps alpha (a wider single block predicts better).
    # - training cost is 6 N D: at a sustained 100 TFLOP/s in bf16 (an eighth of the H100's
    #   measured 800 on big matmuls: these are small, un-fused, un-compiled steps) the
    #   201M-parameter target sees 100e12 * 240 s / (6 * 2e8) ~ 2e7 bytes, two epochs of the
    #   10 MB corpus, in the default 4-minute budget (both models then train in one 10-minute
    #   device call; --budget-min 9.5 buys 2.4 times as many, within the 10 minutes per
    #   model). The distilled draft pays mostly for the teacher's forward (2 N_target + 6 N_draft
    #   ~ 4.8e8 FLOPs per byte against 1.2e9), so it sees about 2.5 times as many bytes. Steps are
    #   fitted to the budget on the machine (speclab/train.py).
    # - predicted S = E[N] / (k / c + c_verify) with alpha ~ 0.8, c ~ 10, c_verify(5) ~ 1.15
    #   is about 2.2 at k = 4..6 (E[N] = 3.4..3.8), the 2x goal with some margin.
    "gpu-target": GPTConfig(n_layer=16, n_head=16, d_model=1024),
    "gpu-draft": GPTConfig(n_layer=1, n_head=16, d_model=1024),
}

# Named (target, draft) pairs: the preset names of p and q. "shipped" is the committed pair.
PAIRS: dict[str, tuple[str, str]] = {
    "shipped": ("target", "draft"),
    "gpu": ("gpu-target", "gpu-draft"),
    "tiny": ("tiny", "tiny-draft"),  # unit tests of the training script only
}


def rope_tables(max_len: int, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, each [max_len, hs/2], in float32."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))  # [hs/2]
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [max_len, hs/2]
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (even, odd) pair of x by the angle of its position.

    x: [..., T, hs] (e.g. [B, nh, T, hs]); cos, sin: [T, hs/2] for the positions of the T rows.
    """
    x1, x2 = x[..., 0::2], x[..., 1::2]  # [B, nh, T, hs/2] each
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)  # [B, nh, T, hs/2, 2]
    return out.flatten(-2)  # [B, nh, T, hs]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def _heads(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        B, T, C = x.shape
        qkv = self.qkv(x)  # [B, T, 3C]: q, k, v side by side
        # q and k rotated together (one set of element-wise ops for both, the same arithmetic as one by one)
        qk = qkv[..., : 2 * C].view(B, T, 2, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)  # [2, B, nh, T, hs]
        q, k = apply_rope(qk, cos, sin).unbind(0)  # [B, nh, T, hs] each
        v = qkv[..., 2 * C :].view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # [B, nh, T, hs]
        return q, k, v

    def _merge(self, y: torch.Tensor) -> torch.Tensor:
        B, nh, T, hs = y.shape
        return self.proj(y.transpose(1, 2).reshape(B, T, nh * hs))  # [B, T, C]

    def forward(self, x, cos, sin, cache: KVCache | None, layer: int) -> torch.Tensor:
        q, k, v = self._heads(x, cos, sin)  # [B, nh, T, hs]
        T = q.shape[2]
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, nh, T, hs]
            return self._merge(y)
        L = cache.length
        S = L + T
        cache.k[layer][:, :, L:S] = k
        cache.v[layer][:, :, L:S] = v
        # Slice BEFORE any arithmetic: slots >= S (stale after a rollback) are never touched.
        keys = cache.k[layer][:, :, :S]  # [B, nh, S, hs]
        values = cache.v[layer][:, :, :S]  # [B, nh, S, hs]
        if T == 1:
            y = F.scaled_dot_product_attention(q, keys, values)  # the one query sees all S slots
        else:
            # query i sits at position L+i and may see slots j <= L+i
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=L)  # [T, S]
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self._merge(y)

    def forward_static(self, x, cos, sin, cache: StaticKVCache, layer: int, positions, visible) -> torch.Tensor:
        """Static-shape attention: write the new keys/values at `positions` [T] (device tensor),
        attend over every slot with `visible` [T, capacity] masking slots past each query.

        Masked slots get probability exactly 0; they hold zeros or finite values of an
        earlier, rolled-back continuation, never NaN, so 0 * value stays 0.
        """
        q, k, v = self._heads(x, cos, sin)  # [B, nh, T, hs]
        cache.k[layer].index_copy_(2, positions, k)  # slots L .. L+T-1
        cache.v[layer].index_copy_(2, positions, v)
        y = F.scaled_dot_product_attention(q, cache.k[layer], cache.v[layer], attn_mask=visible)  # [B, nh, T, hs]
        return self._merge(y)

    def reference(self, x, cos, sin) -> torch.Tensor:
        """Attention written out by hand: softmax(q k^T / sqrt(hs) + causal mask) v."""
        q, k, v = self._heads(x, cos, sin)  # [B, nh, T, hs]
        T = q.shape[2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # [B, nh, T, T]
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1).to(v.dtype)  # [B, nh, T, T]
        return self._merge(weights @ v)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, cache, layer) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin, cache, layer)
        return x + self.mlp(self.norm2(x))

    def forward_static(self, x, cos, sin, cache, layer, positions, visible) -> torch.Tensor:
        x = x + self.attn.forward_static(self.norm1(x), cos, sin, cache, layer, positions, visible)
        return x + self.mlp(self.norm2(x))

    def reference(self, x, cos, sin) -> torch.Tensor:
        x = x + self.attn.reference(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """Decoder-only transformer over bytes. The output head is tied to the embedding."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if not isinstance(cfg, GPTConfig):
            raise TypeError(f"GPT needs a GPTConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm_f = RMSNorm(cfg.d_model, cfg.norm_eps)
        cos, sin = rope_tables(cfg.max_len, cfg.head_dim, cfg.rope_base)
        # not saved in checkpoints: rebuilt from the config
        self.register_buffer("rope_cos", cos, persistent=False)  # [max_len, hs/2]
        self.register_buffer("rope_sin", sin, persistent=False)  # [max_len, hs/2]
        self.apply(self._init_weights)
        for block in self.blocks:  # scale residual projections as in GPT-2
            for lin in (block.attn.proj, block.mlp.down):
                nn.init.normal_(lin.weight, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    # -- properties -----------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch: int = 1, max_len: int | None = None, device: Device = None, dtype: DType = None) -> KVCache:
        """An empty KV cache for this model; defaults: cfg.max_len slots, the model's device and dtype."""
        return self._empty_cache(KVCache, batch, max_len, device, dtype)

    def new_static_cache(self, batch: int = 1, max_len: int | None = None, device: Device = None,
                         dtype: DType = None) -> StaticKVCache:
        """An empty StaticKVCache for `forward_static` (same defaults as new_cache)."""
        return self._empty_cache(StaticKVCache, batch, max_len, device, dtype)

    def _empty_cache(self, kind: type, batch: int, max_len: int | None, device: Device, dtype: DType):
        max_len = self.cfg.max_len if max_len is None else max_len
        if not 1 <= max_len <= self.cfg.max_len:
            raise ValueError(f"cache max_len must lie in [1, {self.cfg.max_len}] (the model's max_len), got {max_len}")
        return kind(
            self.cfg.n_layer,
            batch,
            self.cfg.n_head,
            max_len,
            self.cfg.head_dim,
            device=self.device if device is None else device,
            dtype=self.dtype if dtype is None else dtype,
        )

    # -- forwards -------------------------------------------------------------------
    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Logits [B, T, V] (float32) for tokens [B, T] at positions [T].

        With a cache, positions must equal cache.length + arange(T); the new keys and
        values are written at those slots and cache.length advances by T. Without a
        cache, positions default to arange(T) and may be any contiguous run start + arange(T).
        """
        check_tokens(tokens, self.device, self.cfg.vocab_size)
        B, T = tokens.shape
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a KVCache or None, got {type(cache).__name__}")
            cache.check_fits(self.cfg, B, self.dtype, self.device)
            check_cache_room(cache, T)
            start = cache.length
        else:
            start = 0
            if isinstance(positions, torch.Tensor) and positions.numel() > 0:
                start = int(positions.reshape(-1)[0])
        if positions is not None:
            check_positions(positions, start, T)
        if start + T > self.cfg.max_len:
            raise ValueError(f"positions {start}..{start + T - 1} exceed the model's max_len {self.cfg.max_len}")
        cos = self.rope_cos[start : start + T]  # [T, hs/2]
        sin = self.rope_sin[start : start + T]
        x = self.embed(tokens)  # [B, T, C]
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, cache, i)
        if cache is not None:
            cache._advance(T)
        logits = F.linear(self.norm_f(x), self.embed.weight)  # [B, T, V]
        return logits.float()

    @torch.no_grad()
    def reference_forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Slow, cache-free oracle: full causal forward over positions 0..T-1 with explicit attention."""
        check_tokens(tokens, self.device, self.cfg.vocab_size)
        T = tokens.shape[1]
        if T > self.cfg.max_len:
            raise ValueError(f"sequence length {T} exceeds the model's max_len {self.cfg.max_len}")
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        x = self.embed(tokens)  # [B, T, C]
        for block in self.blocks:
            x = block.reference(x, cos, sin)
        return F.linear(self.norm_f(x), self.embed.weight).float()  # [B, T, V]

    # -- the static path ------------------------------------------------------------
    def forward_static(self, tokens: torch.Tensor, cache: StaticKVCache) -> torch.Tensor:
        """Logits [B, T, V] (float32) of tokens [B, T] at positions L .. L+T-1, L = cache.length_t.

        The same arithmetic as `model(tokens, positions, cache)`, arranged so that no Python
        number depends on a device value: positions are L + arange(T) on the device, rotary
        angles are gathered with them, keys and values are written with index_copy_, and the
        causal mask compares slot indices with positions on the device. Every shape depends
        only on (B, T, capacity), so one step can be captured as a CUDA graph (GraphedStep)
        or compiled with torch.compile(mode="reduce-overhead", fullgraph=True).

        Checked here: shapes, dtypes, devices (host metadata, no sync). NOT checked, because
        that would read the device: token values in [0, V) and L + T <= capacity; callers
        (the decoders) know their lengths on the host and must keep within capacity.
        """
        if not isinstance(cache, StaticKVCache):
            raise TypeError(f"forward_static needs a StaticKVCache (model.new_static_cache()), got {type(cache).__name__}")
        check_tokens(tokens, self.device)  # not the ids: reading them would synchronise (see above)
        B, T = tokens.shape
        cache.check_fits(self.cfg, B, self.dtype, self.device)
        if T > cache.capacity:
            raise ValueError(f"T={T} new tokens exceed the cache capacity {cache.capacity}")
        positions = cache.length_t + torch.arange(T, device=tokens.device)  # [T], L .. L+T-1
        cos = self.rope_cos.index_select(0, positions)  # [T, hs/2]
        sin = self.rope_sin.index_select(0, positions)
        visible = cache.slots[None, :] <= positions[:, None]  # [T, capacity]: slot j visible to query i iff j <= L+i
        x = self.embed(tokens)  # [B, T, C]
        for i, block in enumerate(self.blocks):
            x = block.forward_static(x, cos, sin, cache, i, positions, visible)
        cache.length_t.add_(T)
        return F.linear(self.norm_f(x), self.embed.weight).float()  # [B, T, V]


class GraphedStep:
    """`model.forward_static` on inputs of one fixed shape [B, T], captured once as a CUDA graph.

        step = GraphedStep(model, cache, T=1)
        logits = step(tokens)   # [B, T, V]; advances cache.length_t by T, like forward_static

    On CUDA the call copies tokens into a static input buffer and replays the graph (one
    launch for the whole forward instead of a dozen per block); the returned logits are a
    static output buffer, overwritten by the next call, so use or copy them first. On any
    other device it simply calls forward_static (same results, nothing captured), which is
    what lets the CPU tests exercise the decoders built on it.

    Capturing runs the forward a few times; the cache's length is restored afterwards and the
    slots it wrote lie past the valid length, so the cache's contents are unchanged in effect.
    """

    def __init__(self, model: GPT, cache: StaticKVCache, T: int = 1, warmup: int = 3, forward=None) -> None:
        if T < 1:
            raise ValueError(f"T must be >= 1, got {T}")
        self.model, self.cache, self.T = model, cache, T
        # what is captured: model.forward_static, or e.g. torch.compile(model.forward_static) for fused kernels
        self.forward = model.forward_static if forward is None else forward
        self.tokens = torch.zeros(cache.batch, T, dtype=torch.long, device=model.device)  # static input [B, T]
        self.graph = None
        self.logits = None
        if model.device.type != "cuda":
            return
        saved = cache.length_t.clone()
        stream = torch.cuda.Stream(model.device)
        stream.wait_stream(torch.cuda.current_stream(model.device))
        with torch.no_grad(), torch.cuda.stream(stream):  # warm-up outside capture (allocator, cuBLAS handles)
            for _ in range(warmup):
                cache.length_t.copy_(saved)
                self.forward(self.tokens, cache)
        torch.cuda.current_stream(model.device).wait_stream(stream)
        cache.length_t.copy_(saved)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.logits = self.forward(self.tokens, cache)
        cache.length_t.copy_(saved)  # capture records kernels without running them; restore anyway for clarity

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        if tuple(tokens.shape) != tuple(self.tokens.shape):
            raise ValueError(f"this step was captured for tokens of shape {tuple(self.tokens.shape)}, got {tuple(tokens.shape)}")
        if self.graph is None:
            with torch.no_grad():
                return self.forward(tokens, self.cache)
        self.tokens.copy_(tokens)
        self.graph.replay()
        return self.logits
