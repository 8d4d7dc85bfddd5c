"""One op's kernels in a real step against Nsight Compute: which of their bytes came from DRAM
and which from L2, grouped by the op's input dims (T5 training's aten::add_ at 99.8 % of the
datasheet bandwidth, t5_2026-12-03.txt; RAFT's grid sampler, fourth/raft_2026-12-03.txt).

    python3 op_vs_ncu.py SPEC OP WORD list OUT.json  # one step profiled: each kernel, its op
    ncu --clock-control none --profile-from-start off --csv --kernel-name regex:WORD \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,\
lts__t_sectors_srcunit_tex_op_write.sum \
      python3 op_vs_ncu.py SPEC OP WORD ncu > ncu.csv  # one step inside cudaProfilerStart/Stop
    python3 op_vs_ncu.py SPEC OP WORD merge OUT.json ncu.csv

SPEC is MODULE:FUNC of fixtures/workloads/ (its inputs from FUNC_inputs), e.g. unseen:t5_train
aten::add_ elementwise, or fourth:raft aten::grid_sampler_2d grid_sampler. Two processes, one
step each after three warm ones: the kernels of a step come in the same order (the names are
checked), so the n-th kernel named WORD of one is the n-th of the other.
"""

import csv
import json
import re
import sys
from collections import defaultdict

sys.path.insert(0, "fixtures/workloads")


SPEC, OP, WORD = sys.argv[1:4]


def step_fn():
    import importlib

    import torch

    module, name = SPEC.split(":")
    mod = importlib.import_module(module)
    fn = getattr(mod, name)
    args = getattr(mod, name + "_inputs")(device="cuda")
    with torch.no_grad() if "train" not in name else torch.enable_grad():
        for _ in range(3):
            fn(*args)
    torch.cuda.synchronize()

    def step():
        with torch.no_grad() if "train" not in name else torch.enable_grad():
            fn(*args)

    return torch, step


def listing(out):
    import torch

    _, step = step_fn()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        record_shapes=True,
    ) as prof:
        step()
        torch.cuda.synchronize()
    prof.export_chrome_trace("/tmp/op_vs_ncu.json")
    with open("/tmp/op_vs_ncu.json") as f:
        events = json.load(f)["traceEvents"]
    ops = {}
    for e in events:
        if e.get("cat") == "cpu_op":
            ops.setdefault(e["args"].get("External id"), []).append(e)
    kernels = []
    for e in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        owners = ops.get(e["args"].get("External id"), [])
        # the innermost op of that id: the shortest
        inner = min(owners, key=lambda o: o.get("dur", 0)) if owners else {}
        op = inner.get("name", "?")
        dims = str(inner.get("args", {}).get("Input Dims", ""))
        types = inner.get("args", {}).get("Input type", [])
        kernels.append(
            {"name": e["name"], "op": op, "dims": dims, "types": types, "us": e.get("dur", 0)}
        )
    with open(out, "w") as f:
        json.dump(kernels, f)
    print(len(kernels), "kernels;", sum(k["op"] == OP for k in kernels), "of", OP)


def ncu():
    torch, step = step_fn()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def merge(listing_path, csv_path):
    with open(listing_path) as f:
        kernels = [k for k in json.load(f) if re.search(WORD, k["name"])]
    rows = defaultdict(dict)
    names = {}
    with open(csv_path) as f:
        lines = [line for line in f if line.startswith('"')]
    for r in csv.DictReader(lines):
        i = int(r["ID"])
        names[i] = r["Kernel Name"]
        v = float(r["Metric Value"].replace(",", ""))
        unit = r["Metric Unit"]
        scale = {
            "byte": 1,
            "Kbyte": 1e3,
            "Mbyte": 1e6,
            "Gbyte": 1e9,
            "nsecond": 1e-3,
            "ns": 1e-3,
            "usecond": 1,
            "msecond": 1e3,
        }.get(unit, 1)
        rows[i][r["Metric Name"]] = v * scale
    ids = sorted(rows)
    print(len(kernels), "kernels matching", WORD, "listed,", len(ids), "measured")
    pairs = list(zip(kernels, ids, strict=False))
    mismatched = sum(1 for k, i in pairs if _words(k["name"]) != _words(names[i]))
    print("names that differ by position:", mismatched)
    total = defaultdict(float)
    groups = defaultdict(lambda: defaultdict(float))
    for k, i in pairs:
        if k["op"] != OP:
            continue
        m = rows[i]
        g = groups[k["dims"]]
        g["n"] += 1
        g["dram"] += m.get("dram__bytes_read.sum", 0) + m.get("dram__bytes_write.sum", 0)
        g["l2"] += m.get("lts__t_bytes.sum", 0)
        g["l2w"] += 32 * m.get("lts__t_sectors_srcunit_tex_op_write.sum", 0)
        g["read"] += m.get("dram__bytes_read.sum", 0)
        g["model"] += _elementwise_bytes(k)
        g["us"] += m.get("gpu__time_duration.sum", 0)
        g["trace_us"] += k["us"]
        total["n"] += 1
        total["dram"] += m.get("dram__bytes_read.sum", 0) + m.get("dram__bytes_write.sum", 0)
        total["l2"] += m.get("lts__t_bytes.sum", 0)
        total["us"] += m.get("gpu__time_duration.sum", 0)
        total["trace_us"] += k["us"]
    rate = total["dram"] / max(total["us"], 1e-9) / 1e6
    print(
        f"{OP} kernels {total['n']:.0f}: DRAM {total['dram'] / 1e9:.3f} GB, "
        f"L2 {total['l2'] / 1e9:.3f} GB, ncu {total['us']:.1f} us "
        f"(trace {total['trace_us']:.1f} us), DRAM rate {rate:.2f} TB/s"
    )
    print("by input dims, costliest first (trace us):")
    for dims, g in sorted(groups.items(), key=lambda kv: -kv[1]["trace_us"])[:12]:
        print(
            f"  {g['n']:3.0f}x trace {g['trace_us']:8.1f} us ncu {g['us']:8.1f} us  DRAM "
            f"{g['dram'] / 1e6:8.1f} MB  L2 {g['l2'] / 1e6:8.1f} MB  read+L2w "
            f"{(g['read'] + g['l2w']) / 1e6:8.1f} MB  model {g['model'] / 1e6:8.1f} MB  "
            f"{dims[:70]}"
        )


SIZES = {"float": 4, "c10::Half": 2, "c10::BFloat16": 2, "double": 8, "long int": 8, "int": 4}


def _elementwise_bytes(k):
    """An elementwise op's minimum bytes: each input tensor read once, the first written
    (an in-place op's; an out-of-place op's output is as large), broadcasts counted small."""
    import ast

    try:
        dims = ast.literal_eval(k["dims"]) if k["dims"] else []
    except (ValueError, SyntaxError):
        return 0
    total = 0
    for i, d in enumerate(dims):
        if not isinstance(d, list) or not d:
            continue
        n = 1
        for x in d:
            n *= x
        types = k.get("types") or []
        total += n * SIZES.get(types[i] if i < len(types) else "float", 4)
        if i == 0:
            total += n * SIZES.get(types[0] if types else "float", 4)
    return total


def _words(name):
    """A kernel's identifiers that name the kernel and its functor: the trace and ncu
    demangle the same name differently (at::native::(anonymous namespace) / unnamed)."""
    keep = ("kernel", "functor", "impl")
    return sorted(
        {w for w in re.findall(r"[A-Za-z_]\w*", name) if any(k in w.lower() for k in keep)}
    )


if __name__ == "__main__":
    {
        "list": lambda: listing(sys.argv[5]),
        "ncu": ncu,
        "merge": lambda: merge(sys.argv[5], sys.argv[6]),
    }[sys.argv[4]]()
