"""Train the shipped pair: the target on bytes of the stdlib corpus, then the draft (distilled from the target).

Notation: see the `speclab` package docstring.

    python -m speclab.train                      # both, target first, then the distilled draft
    python -m speclab.train --only target
    python -m speclab.train --only draft --no-distill   # the comparison draft, saved as draft_undistilled
    python -m speclab.train --pair gpu                  # the GPU pair (presets gpu-target, gpu-draft) on a GPU:
                                                        # bf16 autocast, batch 64, steps fitted to 4 min each,
                                                        # written to speclab/weights/gpu/ (not committed)

Distillation trains q to match p at every position by minimising KL(p || q) (the cross-entropy
of q against the target's full distribution p, at temperature 1) instead of the cross-entropy
against the next byte alone. Since alpha = sum_x min(p(x), q(x)) = 1 - TV(p, q), pulling q
towards p is what raises alpha.

Training is deterministic for a given seed, device and thread count, shows a tqdm bar with the
loss, saves a resumable state to --work every --save-every seconds (rerun the same command to
resume), and finally writes fp16 safetensors plus a sha256 manifest to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from speclab.data import load_split
from speclab.model import GPT, PAIRS, GPTConfig

DEFAULT_OUT = Path(__file__).resolve().parent / "weights"
DEFAULT_WORK = Path("runs")

# Hyper-parameters, one recipe per preset (one place; the model card quotes them).
# The shipped pair's recipes are those of the committed run. The GPU pair uses the same
# recipe otherwise, with a 4x bigger batch (a GPU is underused at 16 x 256 bytes) and a lower
# peak learning rate for the 40x bigger target; its step counts are ceilings: with
# --budget-min (default 4 for the GPU pair, so target + draft fit one 10-minute device
# call) the run first times a few throw-away steps, then trains min(steps, what fits the
# budget), recording both in the manifest.
RECIPES = {
    "target": dict(steps=2000, batch=16, block=256, lr=2e-3, warmup=50),
    "draft": dict(steps=1500, batch=16, block=256, lr=3e-3, warmup=50),
    "gpu-target": dict(steps=6000, batch=64, block=256, lr=1e-3, warmup=100),
    "gpu-draft": dict(steps=6000, batch=64, block=256, lr=2e-3, warmup=100),
    "tiny": dict(steps=20, batch=4, block=32, lr=3e-3, warmup=5),  # unit tests only
    "tiny-draft": dict(steps=20, batch=4, block=32, lr=3e-3, warmup=5),
}
DEFAULT_BUDGET_MIN = {"shipped": None, "gpu": 4.0, "tiny": None}  # minutes per model (gpu: both fit one 10-min call)


def default_out(pair: str) -> Path:
    """Where a pair's weights go: the committed folder for the shipped pair, a sub-folder otherwise."""
    return DEFAULT_OUT if pair == "shipped" else DEFAULT_OUT / pair


def pick_device(name: str | None) -> torch.device:
    if name:
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def batch_at(data: torch.Tensor, step: int, batch: int, block: int, seed: int) -> torch.Tensor:
    """Windows [batch, block+1] for a given step; depends only on (seed, step), so resuming is exact."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, data.numel() - block - 1, (batch,), generator=g)
    idx = starts[:, None] + torch.arange(block + 1)[None, :]  # [batch, block+1]
    return data[idx].long()


def train_loss(model: GPT, xy: torch.Tensor, teacher: GPT | None, autocast: dict) -> torch.Tensor:
    """Next-byte cross-entropy, or KL(p || q) to the teacher p at every position (float32 either way)."""
    x, y = xy[:, :-1], xy[:, 1:]
    V = model.cfg.vocab_size
    with torch.autocast(**autocast):  # bf16 matmuls when enabled; the model returns float32 logits
        logits = model(x)  # [B, T, V]
        if teacher is None:
            return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        with torch.no_grad():
            p_log = F.log_softmax(teacher(x).float(), dim=-1)  # target's log p, [B, T, V]
        q_log = F.log_softmax(logits, dim=-1)
        return F.kl_div(q_log.reshape(-1, V), p_log.reshape(-1, V), log_target=True, reduction="batchmean")  # KL(p || q)


def time_train_step(cfg: GPTConfig, recipe: dict, device: torch.device, data: torch.Tensor,
                    teacher: GPT | None, autocast: dict, warmup: int = 2, repeats: int = 5) -> float:
    """Median seconds of one training step (forward, backward, AdamW) on a throw-away model.

    Timed by speclab.timing on the course's stopwatch, so a test can put a fake clock in its place
    (speclab.measure.use_stopwatch) and check the budget's arithmetic whatever the machine's speed.
    """
    from speclab.timing import time_fn

    probe = GPT(cfg).to(device)
    opt = torch.optim.AdamW(probe.parameters(), lr=1e-4)
    xy = batch_at(data, 0, recipe["batch"], recipe["block"], 0).to(device)

    def step() -> None:
        loss = train_loss(probe, xy, teacher, autocast)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()

    seconds = time_fn(step, repeats=repeats, warmup=warmup, device=device, progress=False).median
    del probe, opt
    return seconds * 1.03  # the real loop also clips gradients and updates the bar


def save_weights(model: GPT, name: str, out: Path, meta: dict) -> None:
    """fp16 safetensors + an entry (sha256, config, how it was trained) in out/manifest.json."""
    from speclab.checkpoints import file_sha256, save_model

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.safetensors"
    save_model(model, path)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest[name] = {
        "file": path.name,
        "sha256": file_sha256(path),
        "config": model.cfg.to_dict(),
        "params": model.num_params(),
        "training": meta,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def train_one(
    name: str,
    cfg: GPTConfig,
    recipe: dict,
    device: torch.device,
    seed: int,
    work: Path,
    out: Path,
    teacher: GPT | None = None,
    save_every: float = 180.0,
    allow_new_schedule: bool = False,
    amp: str = "none",
    budget_s: float | None = None,
) -> GPT:
    if amp not in ("none", "bf16"):
        raise ValueError(f"amp must be 'none' or 'bf16', got {amp!r}")
    autocast = dict(device_type=device.type, dtype=torch.bfloat16, enabled=amp == "bf16")
    data = torch.frombuffer(bytearray(load_split("train")), dtype=torch.uint8)
    recipe = dict(recipe)
    budget = None
    state_path = work / f"{name}.state.pt"
    if budget_s is not None and not state_path.exists():
        step_s = time_train_step(cfg, recipe, device, data, teacher, autocast)
        fits = max(1, int(budget_s / step_s))
        budget = {"budget_s": budget_s, "measured_step_s": round(step_s, 5), "ceiling_steps": recipe["steps"]}
        recipe["steps"] = min(recipe["steps"], fits)
        print(f"{name}: {step_s * 1e3:.1f} ms per step, {fits} steps fit {budget_s / 60:.1f} min; training {recipe['steps']}")
    torch.manual_seed(seed)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], betas=(0.9, 0.95), weight_decay=0.1)
    step, elapsed, schedule_changes = 0, 0.0, []
    if state_path.exists():
        state = torch.load(state_path, map_location=device)
        old = state["recipe"]
        if budget_s is not None:  # resume the fitted schedule, whatever the budget says now
            recipe["steps"], budget = old["steps"], state.get("budget")
        only_steps_differ = {k: v for k, v in old.items() if k != "steps"} == {k: v for k, v in recipe.items() if k != "steps"}
        if state["config"] != cfg.to_dict() or state["seed"] != seed or not (
            old == recipe or (allow_new_schedule and only_steps_differ and state["step"] <= recipe["steps"])
        ):
            raise RuntimeError(
                f"{state_path} belongs to a different run (or a different step count: see --allow-new-schedule); "
                "delete it to start afresh"
            )
        schedule_changes = list(state.get("schedule_changes", []))
        if old != recipe:  # the cosine schedule is stretched/shrunk from here on; recorded in the manifest
            schedule_changes.append({"at_step": state["step"], "old_steps": old["steps"], "new_steps": recipe["steps"]})
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, elapsed = state["step"], state["elapsed"]
        print(f"resuming {name} at step {step}")

    def save_state() -> None:
        work.mkdir(parents=True, exist_ok=True)
        tmp = state_path.with_suffix(".tmp")
        torch.save(
            {"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": elapsed,
             "config": cfg.to_dict(), "recipe": recipe, "seed": seed, "schedule_changes": schedule_changes,
             "budget": budget},
            tmp,
        )
        os.replace(tmp, state_path)

    total = recipe["steps"]
    model.train()
    bar = tqdm(total=total, initial=step, desc=f"{name}{' (distilled)' if teacher else ''}", dynamic_ncols=True, mininterval=2.0)
    t0, last_save = time.perf_counter(), time.perf_counter()
    ema = None
    while step < total:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, total, recipe["lr"], recipe["warmup"])
        xy = batch_at(data, step, recipe["batch"], recipe["block"], seed).to(device)
        loss = train_loss(model, xy, teacher, autocast)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        bar.update(1)
        bar.set_postfix(loss=f"{ema:.3f}", lr=f"{opt.param_groups[0]['lr']:.2e}")
        if time.perf_counter() - last_save > save_every:
            elapsed += time.perf_counter() - t0
            t0 = last_save = time.perf_counter()
            save_state()
    bar.close()
    elapsed += time.perf_counter() - t0
    save_state()
    model.eval()
    meta = {
        "seed": seed, "steps": total, "batch": recipe["batch"], "block": recipe["block"], "lr": recipe["lr"],
        "warmup": recipe["warmup"], "distilled_from_target": teacher is not None,
        "final_loss_ema": round(ema, 4) if ema is not None else None,
        "objective": "KL(p || q) to the target at T=1" if teacher is not None else "next-byte cross-entropy",
        "train_seconds": round(elapsed, 1), "device": str(device), "schedule_changes": schedule_changes,
        "amp": amp, "budget": budget,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "hardware": f"{platform.processor() or platform.machine()}, torch threads={torch.get_num_threads()}",
        "torch": torch.__version__, "python": platform.python_version(),
    }
    save_weights(model, name, out, meta)
    print(f"{name}: {total} steps in {elapsed / 60:.1f} min, final loss (ema) {ema:.4f}, saved to {out}")
    return model


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", choices=sorted(PAIRS), default="shipped",
                    help="which (target, draft) presets to train: shipped (default), gpu, or tiny (tests)")
    ap.add_argument("--only", choices=["target", "draft"], help="train just one model (draft needs a trained target in --out)")
    ap.add_argument("--no-distill", action="store_true",
                    help="train the draft on next-byte cross-entropy instead of KL to p; saved as <draft>_undistilled")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"where the safetensors and manifest go (default {DEFAULT_OUT} for the shipped pair, "
                         f"{DEFAULT_OUT}/<pair> otherwise)")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="resumable training state (default ./runs)")
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: the best available)")
    ap.add_argument("--amp", choices=["auto", "none", "bf16"], default="auto",
                    help="bf16 autocast for matmuls (default auto: bf16 for the gpu pair on CUDA, none otherwise)")
    ap.add_argument("--budget-min", type=float, default=None,
                    help="fit each model's steps into this many minutes, measured on this machine "
                         "(default: 4 for the gpu pair, no budget otherwise); 0 turns it off")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (default: torch's choice, one per physical core; the shipped run used 2)")
    ap.add_argument("--steps-scale", type=float, default=1.0, help="multiply every step count (smoke tests)")
    ap.add_argument("--allow-new-schedule", action="store_true",
                    help="resume a saved state whose recipe differs only in its step count (recorded in the manifest)")
    ap.add_argument("--save-every", type=float, default=180.0, help="seconds between resumable saves")
    args = ap.parse_args(argv)

    if args.threads is not None:
        if args.threads < 1:
            ap.error(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            ap.error(f"--device {args.device}: this torch build sees no CUDA device")
        # fp32 parts of an autocast step (AdamW, norms) may use TF32 matmuls (cuDNN's convolutions do by default)
        torch.set_float32_matmul_precision("high")
    amp = args.amp
    if amp == "auto":
        amp = "bf16" if (args.pair == "gpu" and device.type == "cuda") else "none"
    budget_min = DEFAULT_BUDGET_MIN[args.pair] if args.budget_min is None else (args.budget_min or None)
    if budget_min is not None and budget_min < 0:
        ap.error(f"--budget-min must be >= 0, got {args.budget_min}")
    budget_s = None if budget_min is None else 60.0 * budget_min
    target_name, draft_name = PAIRS[args.pair]
    out = default_out(args.pair) if args.out is None else args.out
    recipes = {k: dict(v, steps=max(1, int(v["steps"] * args.steps_scale))) for k, v in RECIPES.items()}
    work = args.work / ("undistilled" if args.no_distill else "main")
    if args.pair != "shipped":
        work = work / args.pair
    print(f"pair {args.pair} ({target_name}, {draft_name}), device {device}, amp {amp}, "
          f"budget {'none' if budget_s is None else f'{budget_min} min per model'}, threads {torch.get_num_threads()}, out {out}")

    common = dict(save_every=args.save_every, allow_new_schedule=args.allow_new_schedule, amp=amp, budget_s=budget_s)
    if args.only in (None, "target"):
        train_one(target_name, GPTConfig.preset(target_name), recipes[target_name], device, args.seed, work, out, **common)
    if args.only in (None, "draft"):
        teacher = None
        if not args.no_distill:
            # the teacher is the stored (fp16-rounded) target, exactly the p that ships
            from speclab.checkpoints import load_model
            teacher_dtype = torch.bfloat16 if amp == "bf16" else torch.float32
            teacher = load_model(target_name, device=device, dtype=teacher_dtype, directory=out)
            for p in teacher.parameters():
                p.requires_grad_(False)
        # the undistilled draft ships beside the pair only to report what distillation does to alpha
        name = f"{draft_name}_undistilled" if args.no_distill else draft_name
        train_one(name, GPTConfig.preset(draft_name), recipes[draft_name], device, args.seed + 1,
                  work, out, teacher=teacher, **common)


if __name__ == "__main__":
    main()
