"""`python -m speclab.gpu_report` on the CPU with tiny sizes: the JSON fits benchmarks/gpu/schema.json,
the schema rejects broken reports, the graphed greedy speculative decoder emits exactly the greedy
autoregressive tokens, and the spec rows are consistent with the cost model. Timings are not
asserted here (a shared 2-core machine); what a GPU must reach is checked by the GPU-marked test.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import torch

from speclab import gpu_report as G
from speclab.model import GPT, GPTConfig

CUDA = torch.cuda.is_available()


def tiny_pair(seed: int = 0) -> tuple[GPT, GPT]:
    """A random tiny target and a draft that is the target with noise: alpha well inside (0, 1)."""
    torch.manual_seed(seed)
    target = GPT(GPTConfig(n_layer=2, n_head=2, d_model=32, max_len=128)).eval()
    draft = GPT(GPTConfig(n_layer=2, n_head=2, d_model=32, max_len=128)).eval()
    with torch.no_grad():
        for (_, pt), (_, pd) in zip(target.named_parameters(), draft.named_parameters()):
            pt.mul_(6.0)  # sharp distributions, so argmax ties cannot occur
            pd.copy_(pt + 0.6 * pt.std() * torch.randn_like(pt))
    return target, draft


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "cpu.json"
    G.main(["--quick", "--sizes", "tiny", "--pairs", "none", "--out", str(out)])
    assert not out.with_name("cpu.partial.json").exists()  # the partial file goes once the report is whole
    return json.loads(out.read_text())


def test_cpu_report_fits_the_schema_with_every_key(cpu_report):
    G.validate(cpu_report)
    for key in ("device", "torch", "cuda", "date", "copy_bandwidth_GBps", "matmul_bf16_TFLOPs", "decode",
                "lab2_autograde", "spec"):
        assert key in cpu_report
    assert cpu_report["cuda"] is None and cpu_report["device"].startswith("cpu") and cpu_report["schema_checked"]
    assert [d["name"] for d in cpu_report["decode"]] == [name for name, _ in G.SIZES["tiny"]]
    for d in cpu_report["decode"]:
        # the fraction is bytes / time / copy bandwidth, recomputed from the stored fields
        want = d["step_bytes"] / (d["eager_ms"] / 1e3) / (cpu_report["copy_bandwidth_GBps"] * 1e9)
        assert d["eager_fraction_of_copy"] == pytest.approx(want, rel=1e-9)
        assert d["max_abs_logit_diff_eager_vs_graphs"] < 1e-3  # both paths computed the same step
        assert d["graphs"].startswith("static path")


def test_cost_model_hand_values():
    # alpha = 0.5, k = 2: E[N] = 1 + 0.5 + 0.25 = 1.75; cost = 2/4 + 1.5 = 2 target forwards -> S = 0.875
    assert G.predicted_speedup(0.5, 2, 4.0, 1.5) == pytest.approx(0.875)
    assert G.predicted_speedup(1.0, 3, 6.0, 1.0) == pytest.approx(4 / 1.5)
    # k = 3: steps accepting 3, 1, 0 verified 3, 2, 1 drafts: alpha = 4 / 6
    assert G.pooled_alpha([3, 1, 0], 3) == pytest.approx(4 / 6)


def test_decode_bytes_counts_weights_and_cache():
    cfg = GPTConfig(n_layer=2, n_head=2, d_model=32, max_len=64)
    model = GPT(cfg).to(torch.bfloat16)
    params = 256 * 32 + 2 * (2 * 32 + 4 * 32 * 32 + 8 * 32 * 32) + 32  # embedding, blocks, final norm
    kv_per_position = 2 * 2 * 32 * 2  # K and V, 2 layers, d_model 32, 2 bytes
    assert G.decode_bytes(model, 10) == 2 * params + kv_per_position * 11 + kv_per_position


@pytest.mark.parametrize(
    "breakage",
    [
        lambda r: r.pop("copy_bandwidth_GBps"),
        lambda r: r["decode"][0].pop("graphs_ms"),
        lambda r: r["decode"][0].update(eager_fraction_of_copy=-0.5),
        lambda r: r.update(date="yesterday"),
        lambda r: r.update(lab2_autograde={"points": 23}),
        lambda r: r.update(spec=[{"pair": "gpu", "k": 0, "temperature": 0, "alpha": 0.5, "c": 3, "c_verify": 1.1,
                                  "predicted_speedup": 1.5, "measured_speedup": 1.4, "measured_over_predicted": 0.93}]),
        lambda r: r.update(spec=[{"pair": "gpu", "k": 2, "temperature": 0, "alpha": 1.5, "c": 3, "c_verify": 1.1,
                                  "predicted_speedup": 1.5, "measured_speedup": 1.4, "measured_over_predicted": 0.93}]),
    ],
)
def test_schema_rejects_broken_reports(cpu_report, breakage):
    broken = copy.deepcopy(cpu_report)
    breakage(broken)
    with pytest.raises(jsonschema.ValidationError):
        G.validate(broken)


@pytest.fixture(scope="module")
def shipped():
    from speclab.checkpoints import load_pair
    from speclab.data import heldout_windows

    target, draft = load_pair()
    return target, draft, heldout_windows(1, 16, seed=5)[0]


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 4])
def test_graphed_greedy_speculative_emits_the_greedy_tokens(shipped, k):
    target, draft, prompt = shipped
    pair = G._GraphedPair(target, draft, capacity=16 + 40 + 8, ks=[k])
    want = G.graphed_greedy_autoregressive(pair, prompt, 40)
    got, accepted = G.graphed_greedy_speculative(pair, prompt, 40, k)
    assert got == want
    # the oracle: greedy decoding by one cache-free forward of the whole sequence
    seq = torch.tensor([prompt.tolist() + want])
    assert target.reference_forward(seq)[0, 15:-1].argmax(-1).tolist() == want
    assert 0 < sum(accepted) < k * len(accepted)  # some drafts accepted, some rejected: both branches ran


@pytest.mark.slow
def test_equality_check_catches_an_off_by_one_rollback(shipped):
    # the equality above can fail: a decoder whose target rollback keeps one position too few
    # verifies against a shifted context and emits other tokens
    from speclab.model import StaticKVCache

    target, draft, prompt = shipped
    pair = G._GraphedPair(target, draft, capacity=16 + 40 + 8, ks=[3])
    want = G.graphed_greedy_autoregressive(pair, prompt, 40)
    pair.tc.rollback_unchecked = lambda n: StaticKVCache.rollback_unchecked(pair.tc, n - 1)
    got, _ = G.graphed_greedy_speculative(pair, prompt, 40, 3)
    assert got != want


@pytest.mark.slow
def test_spec_rows_on_a_tiny_pair(monkeypatch):
    target, draft = tiny_pair()
    monkeypatch.setattr(G, "_load_pair", lambda pair, device, dtype: (target, draft))
    monkeypatch.setattr(G, "_prompt", lambda device, length=32: torch.arange(40, 72))
    rows = G.spec_entries("tiny-random", torch.device("cpu"), torch.float32, tokens=16, ks=(1, 2),
                          temperatures=(0.0, 1.0), repeats=1, graphs=True, cost_repeats=3)
    report = {"device": "cpu", "torch": torch.__version__, "cuda": None, "date": "2026-01-01T00:00:00Z",
              "command": None, "copy_bandwidth_GBps": 1.0, "matmul_bf16_TFLOPs": 1.0,
              "decode": [{"name": "x", "weights_bytes": 1, "step_bytes": 1, "eager_ms": 1, "graphs_ms": 1,
                          "eager_fraction_of_copy": 1, "graphs_fraction_of_copy": 1, "graphs": "x", "stable": True}],
              "lab2_autograde": None, "spec": rows}
    G.validate(report)
    assert [(r["decoder"].split()[0], r["temperature"], r["k"]) for r in rows] == [
        ("lab2-reference", 0.0, 1), ("lab2-reference", 0.0, 2), ("lab2-reference", 1.0, 1), ("lab2-reference", 1.0, 2),
        ("static", 0.0, 1), ("static", 0.0, 2)]
    for r in rows:
        e_n = (1 - r["alpha"] ** (r["k"] + 1)) / (1 - r["alpha"])
        assert r["predicted_speedup"] == pytest.approx(e_n / (r["k"] / r["c"] + r["c_verify"]), rel=1e-9)
        assert r["measured_over_predicted"] == pytest.approx(r["measured_speedup"] / r["predicted_speedup"], rel=1e-9)
    greedy = [r["alpha"] for r in rows if r["temperature"] == 0.0]
    assert greedy[0] == pytest.approx(greedy[2]) and greedy[1] == pytest.approx(greedy[3])  # same rule, same alpha


def test_missing_gpu_pair_is_recorded_not_fatal(monkeypatch):
    from speclab.checkpoints import CheckpointError

    def missing(pair, device, dtype):
        raise CheckpointError("checkpoint manifest .../gpu/manifest.json is missing. Retrain the pair with "
                              "`python -m speclab.train --pair gpu`")

    monkeypatch.setattr(G, "_load_pair", missing)
    monkeypatch.setattr(G, "decode_entry", lambda *a, **k: {"name": "x", "weights_bytes": 1, "step_bytes": 1,
                        "eager_ms": 1, "graphs_ms": 1, "eager_fraction_of_copy": 1, "graphs_fraction_of_copy": 1,
                        "graphs": "x", "stable": True})
    seen = []
    report = G.build_report(torch.device("cpu"), "tiny", quick=True, pairs=("gpu",),
                            on_progress=lambda r: seen.append(sorted(r)))
    assert report["spec"] == [] and "--pair gpu" in report["spec_errors"]["gpu"]
    # each finished section is handed out at once (main saves it): roofline first, spec last
    assert "copy_bandwidth_GBps" in seen[0] and "decode" not in seen[0] and "spec" in seen[-1]
    assert len(seen) == 1 + len(G.SIZES["tiny"]) + 1 + 1


def test_lab2_autograde_failure_is_reported_not_raised(monkeypatch, tmp_path):
    monkeypatch.setattr(G, "REPO", tmp_path)  # a checkout without the lab
    result = G.lab2_autograde(timeout_s=30)
    assert result["points"] is None and result["total"] is None and result["error"]


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_gpu_decode_reaches_the_memory_roof_with_graphs():
    """Issue 20: the >= 1 GB model's graphed bf16 decode step moves >= 80 % of the copy bandwidth."""
    dev = torch.device("cuda")
    copy_bw = G.copy_bandwidth_gbps(dev, 2 << 30, 0.5)["GBps"]
    name, cfg = next((n, c) for n, c in G.SIZES["full"] if n.startswith("d2048"))
    row = G.decode_entry(name, cfg, dev, torch.bfloat16, 128, copy_bw, 0.5)
    assert row["weights_bytes"] >= 1e9 and row["graphs"] == "cuda graph"
    assert row["graphs_fraction_of_copy"] >= 0.8, row


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_graphed_decoders_on_cuda_emit_the_greedy_tokens():
    """The CUDA-graph decoders in float32 (bf16 may flip near-ties between a 1-token and a k+1-token
    forward): speculative output equals autoregressive output, and no step reads the host mid-draft."""
    from speclab.checkpoints import load_pair
    from speclab.data import heldout_windows

    target, draft = load_pair(device="cuda", dtype=torch.float32)
    prompt = heldout_windows(1, 16, seed=5)[0].cuda()
    pair = G._GraphedPair(target, draft, capacity=16 + 64 + 10, ks=[2, 5])
    assert pair.t1.captured and pair.verify[5].captured
    want = G.graphed_greedy_autoregressive(pair, prompt, 64)
    for k in (2, 5):
        got, accepted = G.graphed_greedy_speculative(pair, prompt, 64, k)
        assert got == want and sum(accepted) > 0


def test_run_script_refuses_a_machine_without_cuda(tmp_path):
    """benchmarks/gpu/run.sh stops at once, with a message, where torch sees no GPU (and writes nothing)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(["bash", str(root / "benchmarks" / "gpu" / "run.sh"), str(tmp_path / "out")],
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr
    assert not (tmp_path / "out").exists()
