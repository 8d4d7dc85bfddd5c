"""Counters probe: one warm call of each workload inside cudaProfilerStart/Stop, for
`ncu --profile-from-start off`. Each call sits in an NVTX range named for its workload."""

import os
import sys

import torch
import torch.nn.functional as F

dev = "cuda"
torch.manual_seed(0)


def mm():
    a, b, c = (torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16) for _ in range(3))
    return lambda: a @ b + c


def cos_cos():
    x = torch.randn(64 * 2**20, device=dev)
    return lambda: x.cos().cos()


def embedding_bag():
    table = torch.randn(4 * 2**20, 128, device=dev)
    idx = torch.randint(0, table.shape[0], (16384, 32), device=dev)
    return lambda: F.embedding_bag(idx, table, mode="sum")


def gather_gpt2():
    wte = torch.randn(50257, 768, device=dev, dtype=torch.bfloat16)
    ids = torch.randint(0, 50257, (8, 512), device=dev)
    return lambda: F.embedding(ids, wte)


def gather_dim0():
    src = torch.randn(50257, 768, device=dev)
    idx = torch.randint(0, 50257, (4096, 768), device=dev)
    return lambda: torch.gather(src, 0, idx)


def index_select():
    src = torch.randn(1 << 20, 256, device=dev)
    idx = torch.randint(0, src.shape[0], (65536,), device=dev)
    return lambda: src.index_select(0, idx)


def gemv():
    w = torch.randn(16384, 16384, device=dev, dtype=torch.bfloat16)
    v = torch.randn(16384, device=dev, dtype=torch.bfloat16)
    return lambda: w @ v


def copy_fill():
    a = torch.empty(256 * 2**20 // 4, device=dev)
    b = torch.randn(256 * 2**20 // 4, device=dev)
    t = torch.randn(4096, 4096, device=dev)

    def run():
        a.fill_(1.0)
        a.copy_(b)
        return t.t().contiguous()  # strided copy

    return run


def conv():
    x = torch.randn(128, 256, 56, 56, device=dev, dtype=torch.bfloat16)
    w = torch.randn(256, 256, 3, 3, device=dev, dtype=torch.bfloat16)
    xc, wc = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    return lambda: (F.conv2d(x, w, padding=1), F.conv2d(xc, wc, padding=1))


def sdpa():
    q, k, v = (torch.randn(8, 16, 2048, 128, device=dev, dtype=torch.bfloat16) for _ in range(3))
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)


def flex():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = (torch.randn(4, 16, 4096, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, 4096, 4096, device=dev)
    print("flex block mask sparsity %", mask.sparsity(), flush=True)
    fn = torch.compile(flex_attention)
    return lambda: fn(q, k, v, block_mask=mask)


def triton_softmax():
    x = torch.randn(32768, 4096, device=dev)
    fn = torch.compile(lambda t: torch.softmax(t, dim=-1))
    return lambda: fn(x)


def layernorm_unfused():
    x = torch.randn(8192, 4096, device=dev)
    w = torch.randn(4096, device=dev)

    def run():
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5) * w

    return run


WORKLOADS = [
    mm,
    cos_cos,
    embedding_bag,
    gather_gpt2,
    gather_dim0,
    index_select,
    gemv,
    copy_fill,
    conv,
    sdpa,
    flex,
    triton_softmax,
    layernorm_unfused,
]

if __name__ == "__main__":
    # KS_PROBE_TRACE=PATH: the same single calls under torch.profiler instead (shapes, each in
    # a record_function named as the NVTX range), for the model-vs-counters fixture
    trace_to = os.environ.get("KS_PROBE_TRACE")
    prof = None
    if trace_to:
        from torch.profiler import ProfilerActivity, profile, record_function

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)
    only = set(sys.argv[1:])
    ready = []
    for make in WORKLOADS:
        if only and make.__name__ not in only:
            continue
        try:
            fn = make()
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                fn()
            end.record()
            torch.cuda.synchronize()
            print(
                f"{make.__name__}: {start.elapsed_time(end) * 100:.1f} us per call"
                " (events, 10 calls)",
                flush=True,
            )
            if prof is not None:
                ready.append((make.__name__, fn))
                continue
            torch.cuda.nvtx.range_push(make.__name__)
            torch.cuda.profiler.start()
            fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            torch.cuda.nvtx.range_pop()
        except Exception as e:  # one workload failing must not lose the others
            print(f"{make.__name__} FAILED: {e!r}", flush=True)
    if prof is not None:  # all warmed first: the trace holds the single calls only
        prof.start()
        for name, fn in ready:
            with record_function(name):
                fn()
            torch.cuda.synchronize()
        prof.stop()
        prof.export_chrome_trace(trace_to)
