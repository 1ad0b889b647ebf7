"""Catalog of known-wrong Lab 2 decoders; each must lose points in its part.

Each mutant is the reference `speculative_decode` of solutions/lab2/lab2.md plus the edit that
makes it wrong (`autograder.audit.mutants`: "-" lines of the reference, "+" lines that replace them);
its doc says what is wrong. Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

from autograder.audit.mutants import Mutant, catalog

MUTANTS: list[Mutant] = catalog("lab2", [
    Mutant("no_rollback", 2, "speculative_decode", "Never rolls the caches back after a rejection.", """
-        tc.rollback(min(keep, tc.length))
-        dc.rollback(min(keep, dc.length))
-        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
-            forward(draft, dc, torch.tensor([seq[dc.length:keep]], device=dev))
"""),
    Mutant("rollback_off_by_one", 2, "speculative_decode",
           "Rolls both caches back to one position more than the emitted length allows.", """
-        keep = len(seq) - 1
+        keep = len(seq)
"""),
    Mutant("draft_not_caught_up", 2, "speculative_decode",
           "After a full acceptance the draft cache is never fed the last draft token.", """
-            forward(draft, dc, torch.tensor([seq[dc.length:keep]], device=dev))
+            pass
"""),
    Mutant("target_logits_shifted", 2, "speculative_decode",
           "Tests draft i against the target row of position i + 1 (logits shifted by one).", """
-        target_logits = forward(target, tc, block[:, : k_step + 1])  # [k_step+1, V]
+        target_logits = forward(target, tc, block[:, : k_step + 1])  # [k_step+1, V]
+        target_logits = torch.cat([target_logits[1:], target_logits[-1:]])
"""),
    Mutant("transform_one_side", 2, "speculative_decode",
           "The target's p gets the temperature only; top-k/top-p shape the draft's q alone.", """
-            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
+            ps = process_logits(target_logits, temperature)  # [k_step+1, V]
"""),
    Mutant("knobs_only_at_fixed_settings", 2, "speculative_decode",
           "Gives the target's p its temperature only at the settings written in the check file (1, 0.8, 1.2); at "
           "any other it uses temperature 1 for p. Caught only when the grading run draws the knobs.", """
-            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
+            fixed = temperature if temperature in (1.0, 0.8, 1.2) else 1.0  # the check file's settings only
+            ps = process_logits(target_logits, fixed, top_k, top_p)  # [k_step+1, V]
"""),
    Mutant("recompute_without_cache", 2, "speculative_decode",
           "Fills its caches but computes every forward's logits from the whole prefix without them: right tokens, slow.",
           """
-    def forward(model, cache, x):  # x: [1, T] token ids on dev -> logits [T, V]
-        return model(x, positions[cache.length : cache.length + x.shape[1]], cache)[0]
+    history = {}  # id(cache) -> the tokens it holds
+
+    def forward(model, cache, x):  # the cache is filled, but the logits come from the whole prefix
+        past = history.get(id(cache), seq[: cache.length])[: cache.length] + x[0].tolist()
+        history[id(cache)] = past
+        model(x, positions[cache.length : cache.length + x.shape[1]], cache)
+        return model(torch.tensor([past], device=dev), None, None)[0, -x.shape[1]:]
"""),
    # decoders with the right tokens that do not run the algorithm the lab asks for; the rollback
    # check counts the models' forwards (autograder.checks.lab2.check_rollback, rule "speculates")
    Mutant("rebuilds_caches", 2, "speculative_decode",
           "Rebuilds both caches with a fresh prefill of the whole sequence after every step instead of rolling back.",
           """
-        tc.rollback(min(keep, tc.length))
-        dc.rollback(min(keep, dc.length))
-        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
-            forward(draft, dc, torch.tensor([seq[dc.length:keep]], device=dev))
+        tc.rollback(0)
+        dc.rollback(0)
+        forward(target, tc, torch.tensor([seq[:keep]], device=dev))
+        forward(draft, dc, torch.tensor([seq[:keep]], device=dev))
"""),
    Mutant("verifies_token_by_token", 2, "speculative_decode",
           "Verifies the drafts with one target forward per position (k + 1 a step) instead of one over all of them.",
           """
-        target_logits = forward(target, tc, block[:, : k_step + 1])  # [k_step+1, V]
+        target_logits = torch.cat([forward(target, tc, block[:, i : i + 1]) for i in range(k_step + 1)])
"""),
    Mutant("never_speculates", 2, "speculative_decode",
           "Never drafts: every step feeds the target the last token and emits one token, plain decoding.", """
-        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
+        k_step = 0  # no drafts: one target forward, one token
"""),
    # issue 53: the knobs mishandled; caught by the token cases (every emitted token against its processed law)
    Mutant("bonus_without_knobs", 2, "speculative_decode",
           "Draws the bonus token (after a full acceptance) from the target's raw softmax: no temperature, top-k or "
           "top-p.", """
-                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
+                raw = torch.softmax(target_logits[k_step], dim=-1)  # the bonus without the knobs
+                emitted.append(int(torch.multinomial(raw, 1, generator=generator)))
"""),
    Mutant("knobs_in_wrong_order", 2, "speculative_decode",
           "Cuts top-k/top-p at temperature 1 and applies the temperature after, for p and q alike: exact "
           "speculative sampling of the wrong law (top-k commutes with the temperature; top-p does not).", """
-                q = process_logits(logits, temperature, top_k, top_p)  # [V]
+                cut = process_logits(logits, 1.0, top_k, top_p) > 0  # the cut first, at temperature 1
+                q = process_logits(logits.masked_fill(~cut, float("-inf")), temperature)  # [V]
-            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
+            cut = process_logits(target_logits, 1.0, top_k, top_p) > 0
+            ps = process_logits(target_logits.masked_fill(~cut, float("-inf")), temperature)  # [k_step+1, V]
"""),
    Mutant("knobs_on_p_only", 2, "speculative_decode",
           "Draws its drafts from q with every knob but tests them against q with the temperature only (top-k and "
           "top-p applied to p, not to the q of the acceptance ratio): it accepts a cut draft too often. Its "
           "error sits in the first step, where the toy's draft and target differ; the later tokens, nearly "
           "forced, dilute it in the token cases.", """
-                qs.append(q)
+                qs.append(process_logits(logits, temperature))  # verified against q without top-k/top-p
"""),
])
