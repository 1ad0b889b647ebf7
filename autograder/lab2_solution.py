"""Lab 2 reference solution, cell by cell (the build script puts these strings in the notebook).

Notation: p = target distribution, q = draft distribution, k = draft length,
alpha = acceptance rate, c = T_target / T_draft.
Each string is the body of one nbgrader solution cell; BEGIN/END SOLUTION markers
delimit what the student version replaces with a stub.
"""

SETUP = '''
import math
import os
import time

import numpy as np
import torch
import matplotlib.pyplot as plt

from speclab.model import GPT, GPTConfig
from speclab.sampling import process_logits
from speclab import theory

GRADING = os.environ.get("NBGRADER_EXECUTION") is not None  # smaller sweeps under the autograder
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # picked once, used everywhere
if DEVICE.type == "cpu":
    torch.set_num_threads(1)  # one thread: stable timings on a shared machine, as in the book


def sync():
    """Wait for queued GPU work before reading a clock (no-op on the CPU)."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
'''

PART1 = '''
@torch.no_grad()
def prefill(model, prompt: torch.Tensor, cache) -> torch.Tensor:
    """Run the prompt [T0] through model, filling cache; return the logits [V] of the next token."""
    ### BEGIN SOLUTION
    if prompt.dim() != 1 or prompt.numel() < 1:
        raise ValueError(f"prompt must be a non-empty 1-D LongTensor, got shape {tuple(prompt.shape)}")
    if cache.length != 0:
        raise ValueError(f"prefill needs an empty cache, this one holds {cache.length} positions")
    T0 = prompt.numel()
    positions = torch.arange(T0, device=prompt.device)
    return model(prompt[None], positions, cache)[0, -1]  # [V]
    ### END SOLUTION


@torch.no_grad()
def autoregressive_decode(model, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 0.0,
                          top_k=None, top_p=None, eos=None, generator=None) -> list:
    """Baseline: one cached forward per new token. Returns the new tokens (stops after eos)."""
    ### BEGIN SOLUTION
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    out: list = []
    if max_new_tokens == 0:
        return out
    cache = model.new_cache(batch=1, max_len=prompt.numel() + max_new_tokens)
    logits = prefill(model, prompt, cache)
    while True:
        probs = process_logits(logits, temperature, top_k, top_p)  # [V]
        tok = int(torch.multinomial(probs, 1, generator=generator))
        out.append(tok)
        if len(out) == max_new_tokens or tok == eos:
            return out
        x = torch.tensor([[tok]], device=prompt.device)
        logits = model(x, torch.tensor([cache.length], device=prompt.device), cache)[0, -1]
    ### END SOLUTION
'''

PART2 = '''
@torch.no_grad()
def speculative_decode(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                       temperature: float = 0.0, top_k=None, top_p=None, eos=None,
                       generator=None, on_step=None):
    """Speculative decoding with the target p and the draft q, both with a KV cache.

    Returns (new_tokens, accepted) where accepted[s] is the number of drafted tokens
    accepted in step s. Invariant after every step: both caches hold exactly the
    positions of prompt + new_tokens except the last token, i.e.
    cache.length == len(prompt) + len(new_tokens) - 1; on_step(target_cache,
    draft_cache, sequence) is called then, sequence being prompt + new tokens (a list).
    """
    ### BEGIN SOLUTION
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    dev = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    T0 = len(seq)
    new: list = []
    accepted: list = []
    if max_new_tokens == 0:
        return new, accepted
    capacity = T0 + max_new_tokens
    tc = target.new_cache(batch=1, max_len=capacity)
    dc = draft.new_cache(batch=1, max_len=capacity)
    # both caches hold the prompt except its last token: the loop feeds the last token of seq
    if T0 > 1:
        prefill(target, prompt[:-1], tc)
        prefill(draft, prompt[:-1], dc)

    def forward(model, cache, toks):  # toks: list of ints -> logits [T, V]
        x = torch.tensor([toks], device=dev)
        pos = torch.arange(cache.length, cache.length + len(toks), device=dev)
        return model(x, pos, cache)[0]

    while len(new) < max_new_tokens:
        n = len(seq)  # both caches hold n - 1 positions
        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
        # 1. draft k_step tokens, one cached draft forward each, keeping q of each
        drafts, qs = [], []
        last = seq[-1]
        for _ in range(k_step):
            logits = forward(draft, dc, [last])[-1]  # [V]
            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG, no sync)
                last = int(logits.argmax())
            else:
                q = process_logits(logits, temperature, top_k, top_p)  # [V]
                last = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            drafts.append(last)
        # 2. verify: ONE target forward over seq[-1] and the k_step drafts -> k_step + 1 rows of p
        target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]
        # 3. accept/reject left to right (the Lab 1 rule)
        emitted = []
        if temperature == 0:
            # p and q are one-hot: accept x iff it is the target's argmax; the residual and the
            # bonus are both one-hot at the target's argmax. Same rule, one host transfer.
            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]
            for i, x in enumerate(drafts):
                emitted.append(best[i])
                if best[i] != x:
                    break
            else:
                emitted.append(best[k_step])
            drafts = []  # nothing left for the sampling loop below
        else:
            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
        for i, x in enumerate(drafts):
            u = float(torch.rand((), generator=generator, device=dev))
            if u * float(qs[i][x]) < float(ps[i, x]):  # u < p(x)/q(x)
                emitted.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)  # [V]
            emitted.append(int(torch.multinomial(residual / residual.sum(), 1, generator=generator)))
            break
        else:
            if temperature != 0:
                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
        accepted.append(len(emitted) - 1)
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        seq.extend(emitted)
        new.extend(emitted)
        # 4. roll both caches back to len(seq) - 1 positions; the draft catches up if it is short
        keep = len(seq) - 1
        tc.rollback(min(keep, tc.length))
        dc.rollback(min(keep, dc.length))
        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
            forward(draft, dc, seq[dc.length:keep])
        if on_step is not None:
            on_step(tc, dc, list(seq))
        if eos is not None and new[-1] == eos:
            break
    return new, accepted
    ### END SOLUTION
'''

PART3 = '''
def pooled_alpha(accepted: list, k: int, emitted_per_step=None) -> float:
    """alpha pooled over every verified draft token: accepted / drafted."""
    ### BEGIN SOLUTION
    if not accepted:
        raise ValueError("no steps to estimate alpha from")
    # a step stops at its first rejection, so a step with a accepted < k verified a + 1 drafts
    verified = sum(min(a + 1, k) for a in accepted)
    return sum(accepted) / verified
    ### END SOLUTION


def predicted_speedup(alpha: float, k: int, c: float, c_verify: float) -> float:
    """S = E[N] / (k / c + c_verify): tokens per step over the step's cost in target forwards."""
    ### BEGIN SOLUTION
    if not 0 <= alpha <= 1 or k < 1 or c <= 0 or c_verify <= 0:
        raise ValueError(f"need 0 <= alpha <= 1, k >= 1, c > 0, c_verify > 0; got {alpha}, {k}, {c}, {c_verify}")
    tokens = k + 1 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return tokens / (k / c + c_verify)
    ### END SOLUTION
'''

PART4 = '''
def decode_bytes(cfg, context_len: int, bytes_per_value: int = 4) -> int:
    """Least bytes one decode step (one new token after context_len cached) must move:
    every weight read once, K and V of context_len + 1 positions read, K and V of the new one written."""
    ### BEGIN SOLUTION
    C, Lyr, V = cfg.d_model, cfg.n_layer, cfg.vocab_size
    hidden = cfg.mlp_ratio * C
    per_block = 4 * C * C + 2 * C * hidden + 2 * C  # q, k, v, out projections; MLP in/out; two RMSNorm gains
    params = V * C + Lyr * per_block + C  # tied embedding/head, blocks, final norm
    kv_per_position = 2 * Lyr * C  # K and V, every layer, every head
    return bytes_per_value * (params + kv_per_position * (context_len + 1) + kv_per_position)
    ### END SOLUTION


def copy_bandwidth(n_bytes: int, repeats: int = 7) -> float:
    """Measured bytes/s of dst.copy_(src) on DEVICE (read + write counted), median after a warm-up."""
    ### BEGIN SOLUTION
    src = torch.ones(n_bytes // 4, device=DEVICE)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        dst.copy_(src)
        sync()
        times.append(time.perf_counter() - t0)
    return 2 * src.numel() * 4 / float(np.median(times))
    ### END SOLUTION
'''
