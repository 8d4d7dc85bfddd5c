"""Truth for the nanoGPT try on the H200, in a fresh process that never profiled: CUDA
events around Block.forward as train.py:300 calls it (train mode, bf16 autocast, grad on,
the shakespeare_char config's shapes). Run from nanoGPT's folder."""

import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from model import GPT, GPTConfig

cfg = GPTConfig(
    block_size=256, vocab_size=65, n_layer=6, n_head=6, n_embd=384, dropout=0.2, bias=False
)
model = GPT(cfg).cuda().train()
compiled = len(sys.argv) > 1 and sys.argv[1] == "compile"
x = torch.randn(64, 256, 384, device="cuda")
block = model.transformer.h[2]
fn = torch.compile(block) if compiled else block
with torch.autocast("cuda", dtype=torch.bfloat16):
    for _ in range(10):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(x)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1000)
times.sort()
print(
    "truth Block.forward{}: median {:.1f} us, p10 {:.1f}, p90 {:.1f}"
    " (50 calls, CUDA events)".format(
        " compiled" if compiled else "", times[25], times[5], times[45]
    )
)
