"""Correct implementations written the plain way, from the student notebook's text alone.

The labs' references are written with care for speed. A student who follows the notebook's text
literally, without that care, writes slower code that is still correct, and the speed bars must leave
such code its points with room to spare: `timing_agreement` (autograder/audit/timing_agreement.py) times
these beside the reference, in the notebook and in the grader. Each is a `Mutant` of the reference (the
same edits, the same check that they still apply), but correct: it is no entry of any mutant catalog.
"""
from __future__ import annotations

from .mutants import Mutant, catalog

CORRECT = {
    "lab1": catalog("lab1", [
        # Part 5's text, step by step: every row's residual (not only the rejected rows'), a division for the
        # ratio, the residual normalised by a division, each draw by argmax over a boolean matrix
        Mutant("batch_plain", 5, "speculative_sample_batch",
               "the text followed literally: residual of every row, ratio by division, argmax draws",
               "-    def inverse_cdf(probs: np.ndarray) -> np.ndarray:  # (n, V) -> (n,) one draw per row\n"
               "-        cdf = np.cumsum(probs, axis=1)\n"
               "-        u = rng.random(len(probs))[:, None] * cdf[:, -1:]\n"
               "-        return np.minimum((cdf <= u).sum(axis=1), vocab - 1)\n"
               "+    def inverse_cdf(probs: np.ndarray) -> np.ndarray:\n"
               "+        probs = probs / probs.sum(axis=1, keepdims=True)\n"
               "+        cdf = np.cumsum(probs, axis=1)\n"
               "+        cdf[:, -1] = 1.0\n"
               "+        u = rng.random(len(probs))\n"
               "+        return np.argmax(cdf > u[:, None], axis=1)\n"
               "\n"
               "-    accept = rng.random(batch) * q[rows, x] < p[rows, x]  # u < p(x) / q(x), without dividing\n"
               "-    out = x.copy()\n"
               "-    rejected = np.flatnonzero(~accept)\n"
               "-    if rejected.size:\n"
               "-        resid = np.maximum(p[rejected] - q[rejected], 0.0)  # each rejected row has residual mass > 0\n"
               "-        out[rejected] = inverse_cdf(resid)\n"
               "-    return out\n"
               "+    u = rng.random(batch)\n"
               "+    accept = u < np.minimum(1.0, p[rows, x] / q[rows, x])\n"
               "+    residual = np.maximum(p - q, 0.0)\n"
               "+    mass = residual.sum(axis=1, keepdims=True)\n"
               "+    residual = np.where(mass > 0, residual, p)  # p == q: never used, every draft is accepted\n"
               "+    y = inverse_cdf(residual)\n"
               "+    return np.where(accept, x, y)\n"),
    ]),
    "lab2": catalog("lab2", [
        # the text's loop without the reference's care for the host: a fresh tensor and a host read per token,
        # positions built per forward, greedy acceptance read position by position
        Mutant("decode_plain", 3, "speculative_decode",
               "a host read per drafted token and per verified position, tensors built per forward",
               "-        return model(x, positions[cache.length : cache.length + x.shape[1]], cache)[0]\n"
               "+        return model(x, torch.arange(cache.length, cache.length + x.shape[1], device=dev), cache)[0]\n"
               "\n"
               "-            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG)\n"
               "-                block[0, i + 1] = logits.argmax()\n"
               "+            if temperature == 0:\n"
               "+                block[0, i + 1] = int(logits.argmax().item())\n"
               "\n"
               "-            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]\n"
               "-            for i, x in enumerate(drafts):\n"
               "-                emitted.append(best[i])\n"
               "-                if best[i] != x:\n"
               "-                    break\n"
               "-            else:\n"
               "-                emitted.append(best[k_step])\n"
               "+            for i, x in enumerate(drafts):\n"
               "+                best = int(target_logits[i].argmax().item())\n"
               "+                emitted.append(best)\n"
               "+                if best != x:\n"
               "+                    break\n"
               "+            else:\n"
               "+                emitted.append(int(target_logits[k_step].argmax().item()))\n"),
    ]),
}
