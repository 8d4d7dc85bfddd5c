"""Ground truth in a fresh process that never profiles: Block.forward (and GPT.forward) of
tests/workloads/minigpt at config/h200.py's shapes, train mode, grad on, fp32 or under bf16
autocast, timed with CUDA events: median of 200 calls each between its own events, and 200
calls back to back. Usage: python truth.py fp32|bf16 block|gpt"""

import statistics
import sys

import torch
from block_provider import CONFIG, Block
from model import GPT


def main():
    dtype, what = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if what == "block":
        module = Block(CONFIG).cuda().train()
        args = (torch.randn(32, 512, 1024, device="cuda"),)
    else:
        module = GPT(CONFIG).cuda().train()
        idx = torch.randint(0, 43, (32, 512), device="cuda")
        args = (idx, torch.randint(0, 43, (32, 512), device="cuda"))
    ctx = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if dtype == "bf16"
        else torch.autocast("cuda", enabled=False)
    )

    def call():
        with ctx:
            return module(*args)

    for _ in range(30):
        call()
    torch.cuda.synchronize()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(200)
    ]
    for a, b in events:
        a.record()
        call()
        b.record()
    torch.cuda.synchronize()
    each = [a.elapsed_time(b) * 1e3 for a, b in events]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(200):
        call()
    end.record()
    end.synchronize()
    median = statistics.median(each)
    back_to_back = start.elapsed_time(end) * 1e3 / 200
    print(f"{what} {dtype} median {median:.1f} us  back-to-back {back_to_back:.1f} us")


if __name__ == "__main__":
    main()
