"""Catalog of known-wrong Lab 2 decoders; each must lose points.

Notation: p = target distribution, q = draft distribution, k = draft length.
Each mutant is the reference `speculative_decode` of autograder/lab2_solution.py
with one small, named edit (a student's typical mistake), so the catalog can never
drift from the reference: an edit whose text is no longer found raises at import.
`part` is the lab part whose graded cells must lose points.
"""
from __future__ import annotations

from autograder import lab2_solution
from autograder.mutants import BEGIN, END, Mutant

_HEAD, _REST = lab2_solution.PART2.split(BEGIN)
_BODY = _REST.split(END)[0]
_SIGNATURE = _HEAD.strip()

_VERIFY = "target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]"
_P = "ps = process_logits(target_logits, temperature, top_k, top_p)"

# name -> (part, what is wrong, [(reference text, replacement)])
EDITS: dict[str, tuple[int, str, list[tuple[str, str]]]] = {
    "no_rollback": (2, "Never rolls the caches back after a rejection.", [
        ("        tc.rollback(min(keep, tc.length))\n        dc.rollback(min(keep, dc.length))\n", ""),
        ("        if dc.length < keep:", "        if False:"),
    ]),
    "rollback_off_by_one": (2, "Rolls both caches back to one position more than the emitted length allows.", [
        ("keep = len(seq) - 1\n", "keep = len(seq)\n"),
    ]),
    "draft_not_caught_up": (2, "After a full acceptance the draft cache is never fed the last draft token.", [
        ("            forward(draft, dc, seq[dc.length:keep])\n", "            pass\n"),
    ]),
    "target_logits_shifted": (2, "Tests draft i against the target row of position i + 1 (logits shifted by one).", [
        (_VERIFY, _VERIFY + "\n        target_logits = torch.cat([target_logits[1:], target_logits[-1:]])"),
    ]),
    "transform_one_side": (2, "The target's p gets the temperature only; top-k/top-p shape the draft's q alone.", [
        (_P, "ps = process_logits(target_logits, temperature)"),
    ]),
    "recompute_without_cache": (2, "Correct but slow: every forward recomputes the whole prefix without the cache.", [
        ("    def forward(model, cache, toks):  # toks: list of ints -> logits [T, V]\n",
         "    history = {}\n\n"
         "    def forward(model, cache, toks):  # recomputes the prefix from scratch every time\n"
         "        past = history.get(id(cache), seq[: cache.length])[: cache.length] + list(toks)\n"
         "        history[id(cache)] = past\n"
         "        model(torch.tensor([toks], device=dev), torch.arange(cache.length, cache.length + len(toks), device=dev), cache)\n"
         "        return model(torch.tensor([past], device=dev), None, None)[0, -len(toks):]\n"
         "\n    def _unused(model, cache, toks):\n"),
    ]),
}


def _build() -> list[Mutant]:
    out = []
    for name, (part, doc, subs) in EDITS.items():
        body = _BODY
        for old, new in subs:
            if body.count(old) != 1:
                raise RuntimeError(f"mutant {name}: the reference no longer contains {old!r} exactly once")
            body = body.replace(old, new)
        out.append(Mutant(name, part, "speculative_decode", doc, f"{_SIGNATURE}\n{body}"))
    return out


MUTANTS: list[Mutant] = _build()
