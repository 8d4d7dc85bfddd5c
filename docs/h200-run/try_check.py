"""Issue 12's check on the GPU host: `kernelscope try` against hand-written variants timed
with CUDA events in a separate fresh process. Usage there, from the repo root with kernelscope
importable: python docs/h200-run/try_check.py"""

import json
import subprocess
import sys

W = "fixtures/workloads/what_if_gpu.py"
CASES = [
    ("chain", "compile,graphs,bf16"),
    ("tiny_loop", "compile,graphs"),
    ("sgemm", "tf32,bf16,compile"),
    ("convs", "channels_last,compile"),
]

HAND = r"""
import importlib.util, json, statistics, sys, torch
path, name, variants = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
spec = importlib.util.spec_from_file_location("wl", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = getattr(mod, name)
args = getattr(mod, name + "_inputs")(device="cuda")

def tf32(inner):
    def call():
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            return inner()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = True
    return call

def bf16(inner):
    def call():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return inner()
    return call

def cl():
    import copy
    cl = torch.channels_last
    def conv(a):
        if isinstance(a, torch.nn.Module):
            return copy.deepcopy(a).to(memory_format=cl)
        if isinstance(a, torch.Tensor) and a.dim() == 4:
            return a.contiguous(memory_format=cl)
        return a
    new = [conv(a) for a in args]
    return lambda: fn(*new)

base = lambda: fn(*args)
build = {
    "compile": lambda: (lambda c: (lambda: c(*args)))(torch.compile(fn)),
    "graphs": lambda: (lambda c: (lambda: c(*args)))(torch.compile(fn, mode="reduce-overhead")),
    "tf32": lambda: tf32(base),
    "bf16": lambda: bf16(base),
    "channels_last": cl,
}
calls = {"baseline": base, **{v: build[v]() for v in variants}}
for c in calls.values():
    for _ in range(5):
        c()
torch.cuda.synchronize()
times = {k: [] for k in calls}
for r in range(15):
    for k, c in (list(calls.items()) if r % 2 == 0 else list(calls.items())[::-1]):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(10):
            c()
        e.record(); e.synchronize()
        times[k].append(s.elapsed_time(e) * 1e3 / 10)
med = {k: statistics.median(v) for k, v in times.items()}
print(json.dumps({"us": med, "speedup": {k: med["baseline"] / med[k] for k in med}}))
"""

HEAD = ("workload", "variant", "kernelscope", "hand (fresh)", "ks µs", "hand µs")
print("{:10} {:14} {:>12} {:>13} {:>9} {:>9}  kernelscope says".format(*HEAD))
for name, variants in CASES:
    hand = subprocess.run(
        [sys.executable, "-c", HAND, W, name, variants],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    ks = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelscope",
            "try",
            f"{W}::{name}",
            "--device",
            "cuda",
            "--variants",
            variants,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    if hand.returncode or ks.returncode:
        print(name, "FAILED", hand.stderr[-800:], ks.stderr[-800:])
        continue
    h = json.loads(hand.stdout.strip().splitlines()[-1])
    k = json.loads(ks.stdout)
    base = f"{k['baseline_us']:9.1f} {h['us']['baseline']:9.1f}"
    print(f"{name:10} {'baseline':14} {'':>12} {'':>13} {base}")
    for v in k["variants"]:
        hs = h["speedup"].get(v["name"])
        ksp = f"×{v['speedup']:.2f}" if v.get("speedup") else v["status"]
        hsp = f"×{hs:.2f}" if hs else "-"
        kus = f"{v['us_per_call']:9.1f}" if v.get("us_per_call") else f"{'-':>9}"
        hus = h["us"].get(v["name"], 0)
        print(f"{'':10} {v['name']:14} {ksp:>12} {hsp:>13} {kus} {hus:9.1f}  {v['summary'][:110]}")
