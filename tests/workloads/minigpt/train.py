"""Train a small character-level GPT on data/input.txt.

Run from this folder (paths are relative to it):

    python train.py config/tiny.py --max_iters=20

Settings are the globals below; a config file given as an argument and --key=value
overrides replace them (configurator.py). MINIGPT_SEED in the environment sets the seed.

Everything runs at module level, the way many training scripts are written; the data
workers are therefore forked (start_method="fork"). A spawn or forkserver worker would
import this file again and run the training in itself: use train_main.py for those.
"""

import contextlib
import math
import os
import time

import torch

from data import CharDataset, make_loader
from model import GPT, GPTConfig

# ---- settings ---------------------------------------------------------------------------
# where things are
data_path = "data/input.txt"
out_dir = "out"
save_checkpoint = True
# model
n_layer = 4
n_head = 4
n_embd = 128
block_size = 64
dropout = 0.0
bias = True
# batches
batch_size = 16
grad_accum_steps = 1
# optimizer and schedule
max_iters = 200
learning_rate = 1e-3
min_lr = 1e-4
warmup_iters = 10
weight_decay = 0.1
grad_clip = 1.0
# evaluation and logging
eval_interval = 50
eval_iters = 5
log_interval = 10
# data loading
num_workers = 2
start_method = "fork"
# hardware
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = "auto"  # float32 on the CPU; on CUDA bfloat16 where the GPU has it, else float16
exec(open("configurator.py").read())
# ------------------------------------------------------------------------------------------

seed = int(os.environ.get("MINIGPT_SEED", "1337"))
torch.manual_seed(seed)
device_type = "cuda" if device.startswith("cuda") else "cpu"
if dtype == "auto" and device_type == "cuda":
    dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
elif dtype == "auto":
    dtype = "float32"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
if device_type == "cuda":
    ctx = torch.autocast(device_type=device_type, dtype=ptdtype)
else:
    ctx = contextlib.nullcontext()

train_set = CharDataset(data_path, block_size, split="train")
val_set = CharDataset(data_path, block_size, split="val")
loaders = {
    "train": make_loader(
        train_set, batch_size, num_workers, start_method, pin_memory=device_type == "cuda"
    ),
    "val": make_loader(val_set, batch_size, num_workers=0),
}
iterators = {}
print(f"{len(train_set.tokens)} train / {len(val_set.tokens)} val characters, "
      f"vocabulary of {train_set.vocab_size}")


def get_batch(split):
    """The next batch of a split, on the device; a new pass starts when one ends."""
    try:
        X, Y = next(iterators[split])
    except (KeyError, StopIteration):
        iterators[split] = iter(loaders[split])
        X, Y = next(iterators[split])
    if device_type == "cuda":
        return X.to(device, non_blocking=True), Y.to(device, non_blocking=True)
    return X.to(device), Y.to(device)


model_args = dict(
    vocab_size=train_set.vocab_size,
    block_size=block_size,
    n_layer=n_layer,
    n_head=n_head,
    n_embd=n_embd,
    dropout=dropout,
    bias=bias,
)
model = GPT(GPTConfig(**model_args)).to(device)
print(f"{model.num_params() / 1e3:.1f}k parameters on {device} ({dtype})")
optimizer = model.configure_optimizer(learning_rate, weight_decay)
scaler = torch.amp.GradScaler(device_type, enabled=device_type == "cuda" and dtype == "float16")


@torch.no_grad()
def estimate_loss():
    """Mean loss over eval_iters batches of each split, with dropout off."""
    model.eval()
    means = {}
    for split in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                _, loss = model(X, Y)
            losses[k] = loss.item()
        means[split] = losses.mean().item()
    model.train()
    return means


def get_lr(it):
    """Linear warmup, then a cosine down to min_lr at max_iters."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    progress = min(1.0, (it - warmup_iters) / max(1, max_iters - warmup_iters))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (learning_rate - min_lr)


iter_num = 0
best_val_loss = float("inf")
t_start = t_last = time.time()
while True:
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group["lr"] = lr

    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        best_val_loss = min(best_val_loss, losses["val"])
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")

    for micro_step in range(grad_accum_steps):
        X, Y = get_batch("train")
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / grad_accum_steps
        scaler.scale(loss).backward()
    if grad_clip > 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)

    if iter_num % log_interval == 0:
        now = time.time()
        print(f"iter {iter_num}: loss {loss.item() * grad_accum_steps:.4f}, "
              f"lr {lr:.2e}, {(now - t_last) * 1000:.0f} ms")
        t_last = now
    iter_num += 1
    if iter_num > max_iters:
        break

print(f"trained {iter_num} iterations in {time.time() - t_start:.1f} s, "
      f"best val loss {best_val_loss:.4f}")
if save_checkpoint:
    os.makedirs(out_dir, exist_ok=True)
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "model_args": model_args,
        "iter_num": iter_num,
        "best_val_loss": best_val_loss,
        "chars": train_set.chars,
    }
    torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    print(f"saved {os.path.join(out_dir, 'ckpt.pt')}")
