"""Train the shipped pair: the target on bytes of the stdlib corpus, then the draft (distilled from the target).

Notation: see the `speclab` package docstring.

    python -m speclab.train                      # both, target first, then the distilled draft
    python -m speclab.train --only target
    python -m speclab.train --only draft --no-distill   # the comparison draft, saved as draft_undistilled

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
from speclab.model import GPT, GPTConfig

DEFAULT_OUT = Path(__file__).resolve().parent / "weights"
DEFAULT_WORK = Path("runs")

# Hyper-parameters of the shipped run (one place; the model card quotes them).
RECIPES = {
    "target": dict(steps=2000, batch=16, block=256, lr=2e-3, warmup=50),
    "draft": dict(steps=1500, batch=16, block=256, lr=3e-3, warmup=50),
}


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
) -> GPT:
    torch.manual_seed(seed)
    data = torch.frombuffer(bytearray(load_split("train")), dtype=torch.uint8)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], betas=(0.9, 0.95), weight_decay=0.1)
    state_path = work / f"{name}.state.pt"
    step, elapsed, schedule_changes = 0, 0.0, []
    if state_path.exists():
        state = torch.load(state_path, map_location=device)
        old = state["recipe"]
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
             "config": cfg.to_dict(), "recipe": recipe, "seed": seed, "schedule_changes": schedule_changes},
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
        x, y = xy[:, :-1], xy[:, 1:]
        logits = model(x)  # [B, T, V]
        if teacher is None:
            loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
        else:
            with torch.no_grad():
                p_log = F.log_softmax(teacher(x), dim=-1)  # target's log p, [B, T, V]
            q_log = F.log_softmax(logits, dim=-1)
            loss = F.kl_div(q_log.reshape(-1, cfg.vocab_size), p_log.reshape(-1, cfg.vocab_size),
                            log_target=True, reduction="batchmean")  # KL(p || q) per position
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
        "hardware": f"{platform.processor() or platform.machine()}, torch threads={torch.get_num_threads()}",
        "torch": torch.__version__, "python": platform.python_version(),
    }
    save_weights(model, name, out, meta)
    print(f"{name}: {total} steps in {elapsed / 60:.1f} min, final loss (ema) {ema:.4f}, saved to {out}")
    return model


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["target", "draft"], help="train just one model (draft needs a trained target in --out)")
    ap.add_argument("--no-distill", action="store_true",
                    help="train the draft on next-byte cross-entropy instead of KL to p; saved as draft_undistilled")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where the safetensors and manifest go (default {DEFAULT_OUT})")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="resumable training state (default ./runs)")
    ap.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best available)")
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
    recipes = {k: dict(v, steps=max(1, int(v["steps"] * args.steps_scale))) for k, v in RECIPES.items()}
    work = args.work / ("undistilled" if args.no_distill else "main")
    print(f"device {device}, threads {torch.get_num_threads()}, out {args.out}")

    target = None
    if args.only in (None, "target"):
        target = train_one("target", GPTConfig.preset("target"), recipes["target"], device, args.seed,
                           work, args.out, save_every=args.save_every, allow_new_schedule=args.allow_new_schedule)
    if args.only in (None, "draft"):
        teacher = None
        if not args.no_distill:
            # the teacher is the stored (fp16-rounded) target, exactly the p that ships
            from speclab.checkpoints import load_model
            teacher = load_model("target", device=device, dtype=torch.float32, directory=args.out)
            for p in teacher.parameters():
                p.requires_grad_(False)
        # the undistilled draft ships beside the pair only to report what distillation does to alpha
        name = "draft_undistilled" if args.no_distill else "draft"
        train_one(name, GPTConfig.preset("draft"), recipes["draft"], device, args.seed + 1,
                  work, args.out, teacher=teacher, save_every=args.save_every,
                  allow_new_schedule=args.allow_new_schedule)


if __name__ == "__main__":
    main()
