"""The op families whose bytes the roofline used to overcount, recorded raw with torch.profiler
on the GPU and analyzed by kernelscope: each row's efficiency must stay at or under 100 %.
Also an L2-resident copy's rate (the L2 roof's figure) and, where ncu is on PATH, the model's
bytes against Nsight Compute's DRAM bytes for a few ops. Usage: python3 patterns.py OUT"""

import sys
import time
from pathlib import Path

import torch

OUT = Path(sys.argv[1])
DEV = "cuda"


class Items(torch.utils.data.Dataset):
    """A dataset whose items cost Python time (a decode-like loop), as real ones do."""

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        sum(j * j for j in range(3000))
        return torch.full((3, 64, 64), float(i % 7))


def patterns():
    g = torch.Generator(device=DEV).manual_seed(0)
    bag = torch.nn.EmbeddingBag(4 * 2**20, 128, mode="sum").to(DEV)
    bag_idx = torch.randint(0, 4 * 2**20, (16384 * 32,), device=DEV, generator=g)
    bag_off = torch.arange(0, 16384 * 32, 32, device=DEV)
    wte = torch.randn(50257, 768, device=DEV, dtype=torch.bfloat16)
    pos = torch.arange(4096, device=DEV).view(-1, 1).expand(4096, 768)
    tokens = torch.randint(0, 50257, (8, 512), device=DEV)
    big = torch.randn(4096, 4096, device=DEV)
    half = torch.empty(4096, 4096, device=DEV, dtype=torch.bfloat16)
    fillme = torch.empty(2048, 4096, device=DEV, dtype=torch.bfloat16)
    row = torch.randn(1, 4096, device=DEV)
    w = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    v = torch.randn(4096, device=DEV, dtype=torch.bfloat16)
    bn = torch.nn.BatchNorm2d(256).to(DEV)
    act = torch.randn(128, 256, 28, 28, device=DEV)
    conv = torch.nn.Conv2d(256, 256, 3, padding=1).to(DEV)
    conv_x = torch.randn(64, 256, 28, 28, device=DEV)
    feed = iter(torch.utils.data.DataLoader(Items(), batch_size=32))
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten()).to(
        DEV
    )
    return {
        "dataloader_step": lambda: net(next(feed).to(DEV, non_blocking=True)).sum(),
        "embedding_bag": lambda: bag(bag_idx, bag_off),
        "gather_gpt2": lambda: torch.gather(wte, 0, pos[:, :768]),
        "embedding": lambda: torch.nn.functional.embedding(tokens, wte),
        "index_select": lambda: torch.index_select(wte, 0, tokens.flatten()),
        "copy_fp32_to_bf16": lambda: half.copy_(big),
        "fill_bf16": lambda: fillme.fill_(1.0),
        "copy_broadcast_row": lambda: big.copy_(row.expand(4096, 4096)),
        "gemv_bf16": lambda: torch.mv(w, v),
        "bn_relu_inplace": lambda: torch.relu_(bn(act)),
        "conv_fp32": lambda: conv(conv_x),
    }


def record(name, fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    sched = torch.profiler.schedule(wait=0, warmup=2, active=3, repeat=1)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    path = OUT / "traces" / f"{name}.json.gz"
    with torch.profiler.profile(
        activities=acts,
        schedule=sched,
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(5):
            fn()
            torch.cuda.synchronize()
            prof.step()
    return path


def l2_rate():
    """Back-to-back copies of 8 MiB (16 MiB touched: fits the 50 MiB L2): bytes read and
    written per second."""
    a = torch.empty(2 * 2**20, device=DEV)
    b = torch.empty_like(a)
    for _ in range(20):
        b.copy_(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(500):
        b.copy_(a)
    end.record()
    end.synchronize()
    s = start.elapsed_time(end) / 1e3
    return 500 * 2 * a.numel() * 4 / s / 1e9


def flex():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = (torch.randn(4, 16, 4096, 64, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, 4096, 4096)
    compiled = torch.compile(flex_attention)
    return lambda: compiled(q, k, v, block_mask=mask)


def main():
    (OUT / "traces").mkdir(parents=True, exist_ok=True)
    print(f"L2-resident copy: {l2_rate():.0f} GB/s (read + written); the table's L2 roof: 10000")
    paths = {name: record(name, fn) for name, fn in patterns().items()}
    try:
        t = time.time()
        paths["flex_attention"] = record("flex_attention", flex())
        print(f"flex_attention compiled and recorded in {time.time() - t:.0f} s")
    except Exception as e:  # report and go on
        print("flex_attention: failed:", type(e).__name__, e)
    from kernelscope.analysis.diagnose import analyze
    from kernelscope.analysis.trace_load import load_trace

    worst = 0.0
    for name, path in paths.items():
        a = analyze(load_trace(path))
        print(f"\n{name}: {a.verdict.summary[:160]}")
        for f in a.findings:
            if f.code in ("KS101", "KS107"):
                print(f"  {f.code} line {f.line}: {f.message[:200]}")
        for r in a.roofline[:4]:
            eff = f"{r.efficiency:.0%} of {r.roof}" if r.efficiency is not None else "-"
            gb = (r.bytes_per_step or 0) / max(r.calls_per_step, 1) / 1e6
            print(
                f"  {r.name[:44]:44} {r.bound:8} {r.mean_kernel_us:8.1f} µs "
                f"{gb:9.1f} MB/call {r.achieved_gbps or 0:7.0f} GB/s "
                f"{r.achieved_tflops or 0:6.0f} TF/s {eff} [{r.estimate}]"
            )
            worst = max(worst, r.efficiency or 0.0)
    print(f"\nhighest efficiency of any row: {worst:.0%} (must be <= 100%)")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "one":  # under ncu: one warm call of a pattern
        fn = patterns()[sys.argv[3]]
        fn()
        fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    else:
        main()
