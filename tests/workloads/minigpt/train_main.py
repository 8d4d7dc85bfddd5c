"""The same training as train.py, written as functions under a main guard, so the data
workers can be started with any method (fork, spawn, forkserver): a spawn or forkserver
worker imports this file as __mp_main__ and finds only definitions.

    python train_main.py --start_method spawn --max_iters 10

Settings: the defaults below, then a config file (--config, plain assignments), then the
command-line options. MINIGPT_SEED in the environment sets the seed.
"""

import argparse
import contextlib
import math
import os
import time

import torch

from data import CharDataset, make_loader
from model import GPT, GPTConfig

DEFAULTS = dict(
    data_path="data/input.txt",
    out_dir="out",
    save_checkpoint=True,
    n_layer=4,
    n_head=4,
    n_embd=128,
    block_size=64,
    dropout=0.0,
    bias=True,
    batch_size=16,
    grad_accum_steps=1,
    max_iters=200,
    learning_rate=1e-3,
    min_lr=1e-4,
    warmup_iters=10,
    weight_decay=0.1,
    grad_clip=1.0,
    eval_interval=50,
    eval_iters=5,
    log_interval=10,
    num_workers=2,
    start_method="fork",
)


def parse_settings(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/tiny.py", help="a file of assignments")
    parser.add_argument("--max_iters", type=int)
    parser.add_argument("--num_workers", type=int)
    parser.add_argument("--start_method", choices=["fork", "spawn", "forkserver"])
    parser.add_argument("--device", help="cuda, cuda:N or cpu (default: cuda if there is one)")
    args = parser.parse_args(argv)

    settings = dict(DEFAULTS)
    if args.config:
        assigned = {}
        with open(args.config) as f:
            exec(compile(f.read(), args.config, "exec"), {}, assigned)
        unknown = sorted(set(assigned) - set(settings))
        if unknown:
            parser.error(f"{args.config} sets unknown settings: {', '.join(unknown)}")
        settings.update(assigned)
    for key in ("max_iters", "num_workers", "start_method"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    settings["device"] = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if settings["device"].startswith("cuda"):
        settings["dtype"] = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    else:
        settings["dtype"] = "float32"
    return argparse.Namespace(**settings)


def lr_at(it, cfg):
    """Linear warmup, then a cosine down to min_lr at max_iters."""
    if it < cfg.warmup_iters:
        return cfg.learning_rate * (it + 1) / (cfg.warmup_iters + 1)
    progress = min(1.0, (it - cfg.warmup_iters) / max(1, cfg.max_iters - cfg.warmup_iters))
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.learning_rate - cfg.min_lr)


class Batches:
    """Endless batches from a DataLoader, moved to the device; a new pass starts when one ends."""

    def __init__(self, loader, device):
        self.loader = loader
        self.device = torch.device(device)
        self.iterator = None

    def next(self):
        try:
            if self.iterator is None:
                raise StopIteration
            X, Y = next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.loader)
            X, Y = next(self.iterator)
        non_blocking = self.device.type == "cuda"
        return X.to(self.device, non_blocking=non_blocking), Y.to(self.device, non_blocking=non_blocking)


@torch.no_grad()
def estimate_loss(model, batches, ctx, eval_iters):
    """Mean loss over eval_iters batches of each split, with dropout off."""
    model.eval()
    means = {}
    for split, source in batches.items():
        total = 0.0
        for _ in range(eval_iters):
            X, Y = source.next()
            with ctx:
                _, loss = model(X, Y)
            total += loss.item()
        means[split] = total / eval_iters
    model.train()
    return means


def train_step(model, optimizer, scaler, ctx, X, Y, grad_clip=1.0):
    """One optimizer step over the micro-batches X[i], Y[i] (gradient accumulation).
    Returns the mean loss of the micro-batches, as a tensor."""
    steps = len(X)
    total = torch.zeros((), device=X[0].device)
    for xb, yb in zip(X, Y):
        with ctx:
            _, loss = model(xb, yb)
            loss = loss / steps
        scaler.scale(loss).backward()
        total += loss.detach().float()
    if grad_clip > 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return total


def main(argv=None):
    cfg = parse_settings(argv)
    torch.manual_seed(int(os.environ.get("MINIGPT_SEED", "1337")))
    device_type = "cuda" if cfg.device.startswith("cuda") else "cpu"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.dtype]
    if device_type == "cuda":
        ctx = torch.autocast(device_type=device_type, dtype=ptdtype)
    else:
        ctx = contextlib.nullcontext()

    train_set = CharDataset(cfg.data_path, cfg.block_size, split="train")
    val_set = CharDataset(cfg.data_path, cfg.block_size, split="val")
    train_loader = make_loader(
        train_set, cfg.batch_size, cfg.num_workers, cfg.start_method, pin_memory=device_type == "cuda"
    )
    batches = {
        "train": Batches(train_loader, cfg.device),
        "val": Batches(make_loader(val_set, cfg.batch_size, num_workers=0), cfg.device),
    }
    print(f"data workers: {cfg.num_workers} ({cfg.start_method})")

    model_args = dict(
        vocab_size=train_set.vocab_size,
        block_size=cfg.block_size,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_embd=cfg.n_embd,
        dropout=cfg.dropout,
        bias=cfg.bias,
    )
    model = GPT(GPTConfig(**model_args)).to(cfg.device)
    print(f"{model.num_params() / 1e3:.1f}k parameters on {cfg.device} ({cfg.dtype})")
    optimizer = model.configure_optimizer(cfg.learning_rate, cfg.weight_decay)
    scaler = torch.amp.GradScaler(device_type, enabled=device_type == "cuda" and cfg.dtype == "float16")

    best_val_loss = float("inf")
    t_start = t_last = time.time()
    for iter_num in range(cfg.max_iters + 1):
        lr = lr_at(iter_num, cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if iter_num % cfg.eval_interval == 0:
            losses = estimate_loss(model, batches, ctx, cfg.eval_iters)
            best_val_loss = min(best_val_loss, losses["val"])
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        micro = [batches["train"].next() for _ in range(cfg.grad_accum_steps)]
        X, Y = [x for x, _ in micro], [y for _, y in micro]
        loss = train_step(model, optimizer, scaler, ctx, X, Y, grad_clip=cfg.grad_clip)
        if iter_num % cfg.log_interval == 0:
            now = time.time()
            print(f"iter {iter_num}: loss {loss.item():.4f}, lr {lr:.2e}, {(now - t_last) * 1000:.0f} ms")
            t_last = now

    print(f"trained {cfg.max_iters + 1} iterations in {time.time() - t_start:.1f} s, "
          f"best val loss {best_val_loss:.4f}")
    if cfg.save_checkpoint:
        os.makedirs(cfg.out_dir, exist_ok=True)
        path = os.path.join(cfg.out_dir, "ckpt.pt")
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "model_args": model_args,
                "iter_num": cfg.max_iters + 1,
                "best_val_loss": best_val_loss,
                "chars": train_set.chars,
            },
            path,
        )
        print(f"saved {path}")


if __name__ == "__main__":
    main()
