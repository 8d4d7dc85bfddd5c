"""Estimators of a call's steady time over the samples blocks.sh recorded, and how far the
fresh processes of one workload fall apart under each (max/min across processes)."""

import json
import statistics
import sys
from collections import defaultdict


def blocks(samples, block_s, min_calls=5):
    out, cur, acc = [], [], 0.0
    for s in samples:
        cur.append(s)
        acc += s
        if acc >= block_s * 1e6 and len(cur) >= min_calls:
            out.append(cur)
            cur, acc = [], 0.0
    if cur and len(cur) >= min_calls:
        out.append(cur)
    return out


def q(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * (len(values) - 1) + 0.5))]


def estimators(samples):
    est = {"median": statistics.median(samples), "mean": statistics.fmean(samples)}
    for b in (0.05, 0.1, 0.2):
        meds = [statistics.median(x) for x in blocks(samples, b)]
        if len(meds) >= 3:
            est[f"min blk{b}"] = min(meds)
            est[f"p25 blk{b}"] = q(meds, 0.25)
    return est


runs = defaultdict(list)
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        runs[r["fn"]].append(r)
for fn, rs in runs.items():
    print(f"== {fn}: {len(rs)} processes, {[len(r['samples']) for r in rs]} calls")
    for cut in (None, 0.5):
        table = defaultdict(list)
        for r in rs:
            s = r["samples"]
            if cut is not None:
                s = s[: max(20, sum(1 for m in r["marks"] if m <= cut))]
            for k, v in estimators(s).items():
                table[k].append(v)
        span = "2 s" if cut is None else "first 0.5 s"
        for k, vs in table.items():
            print(
                f"  {span:11s} {k:13s} "
                + " ".join(f"{v:8.1f}" for v in vs)
                + f"   max/min {max(vs) / min(vs):.3f}"
            )
    for r in rs:
        meds = [statistics.median(x) for x in blocks(r["samples"], 0.1)]
        print("  blocks 0.1 s: " + " ".join(f"{m:.0f}" for m in meds))
