"""What a user would write by hand: import torch, warm schedule, export a trace. Run cold."""

import gzip
import os
import shutil
import sys
import tempfile
import time

t0 = time.perf_counter()
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures", "workloads"))
from matmul_add import matmul_add, matmul_add_inputs  # noqa: E402

args = matmul_add_inputs()
matmul_add(*args)  # cold call
out = tempfile.mkdtemp()
with profile(
    activities=[ProfilerActivity.CPU],
    schedule=schedule(wait=1, warmup=3, active=5),
    record_shapes=True,
    with_stack=True,
    on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "t.json")),
) as prof:
    for _ in range(9):
        with record_function("call"):
            matmul_add(*args)
        prof.step()
prof.key_averages()
with (
    open(os.path.join(out, "t.json"), "rb") as src,
    gzip.open(os.path.join(out, "t.json.gz"), "wb") as dst,
):
    shutil.copyfileobj(src, dst)
shutil.rmtree(out)
print(f"{(time.perf_counter() - t0) * 1e6:.0f}")
