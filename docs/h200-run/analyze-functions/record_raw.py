"""Record a raw torch.profiler trace (with_stack=True) of a minigpt training step, as a user
would, from a copy of the project in another folder (so the trace names paths of "another
machine"), and time the same step with CUDA events in the same fresh process before the
profiler runs. Usage: python3 record_raw.py COPY_DIR OUT_DIR"""

import json
import sys
import time

copy, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, copy)

import torch  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

device = "cuda" if torch.cuda.is_available() else "cpu"
small = device == "cpu"  # a CPU check of the script itself
config = GPTConfig(
    vocab_size=512,
    block_size=64 if small else 256,
    n_layer=2 if small else 6,
    n_head=2 if small else 8,
    n_embd=64 if small else 512,
)
model = GPT(config).to(device)
opt = model.configure_optimizer(3e-4, 0.1)
shape = (2, 64) if small else (16, 256)
idx = torch.randint(0, 512, shape, device=device)
targets = torch.randint(0, 512, shape, device=device)


def train_step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
        _, loss = model(idx, targets)
    loss.backward()
    opt.step()
    return loss.detach()


for _ in range(10):
    train_step()
truth = {}
if device == "cuda":
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        train_step()
    end.record()
    torch.cuda.synchronize()
    truth["cuda_events_us_per_step"] = start.elapsed_time(end) * 1000 / 20
t = time.perf_counter()
for _ in range(20):
    train_step()
if device == "cuda":
    torch.cuda.synchronize()
truth["wall_us_per_step"] = (time.perf_counter() - t) * 1e6 / 20

acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
with profile(
    activities=acts,
    schedule=schedule(wait=1, warmup=1, active=3),
    record_shapes=True,
    with_stack=True,
    on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/raw.json"),
) as prof:
    for _ in range(5):
        train_step()
        prof.step()
truth.update(device=device, torch=torch.__version__, steps=3)
with open(f"{out}/truth.json", "w") as f:
    json.dump(truth, f, indent=1)
print(json.dumps(truth))
