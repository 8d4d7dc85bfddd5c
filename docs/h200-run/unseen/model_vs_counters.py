"""The model's bytes and FLOPs per roofline row (a report without --counters) against the same
rows measured by Nsight Compute (a report with --counters), matched by op name and shapes.

    python docs/h200-run/unseen/model_vs_counters.py MODEL.json MEASURED.json
"""

import json
import sys
from pathlib import Path


def rows(path):
    report = json.loads(Path(path).read_text())
    return report, {(r["name"], r.get("shapes", "")): r for r in report.get("roofline") or []}


def ratio(measured, model):
    if not measured or not model:
        return "    -"
    return f"{measured / model:5.2f}"


_, model = rows(sys.argv[1])
report, measured = rows(sys.argv[2])
c = report.get("counters") or {}
print(
    f"counters: {len(c.get('kernels', []))} kernels in {c.get('seconds', 0):.1f} s, "
    f"error {c.get('error')!r}"
)
print(
    f"{'row':34} {'kind':11} {'us':>8} {'bytes model':>12} {'measured':>12} {'m/mod':>5} "
    f"{'FLOP model':>11} {'measured':>11} {'m/mod':>5} {'eff mod':>7} {'eff meas':>8}"
)
for key, m in sorted(measured.items(), key=lambda kv: -kv[1]["gpu_us_per_step"])[:25]:
    if not m.get("measured"):
        continue
    o = model.get(key) or {}
    eff = o.get("efficiency")
    print(
        f"{key[0][:34]:34} {m['kind'][:11]:11} {m['gpu_us_per_step']:8.1f} "
        f"{(o.get('bytes_per_step') or 0):12.3e} {(m.get('bytes_per_step') or 0):12.3e} "
        f"{ratio(m.get('bytes_per_step'), o.get('bytes_per_step'))} "
        f"{(o.get('flops_per_step') or 0):11.3e} {(m.get('flops_per_step') or 0):11.3e} "
        f"{ratio(m.get('flops_per_step'), o.get('flops_per_step'))} "
        f"{(eff or 0) * 100:6.0f}% {(m.get('efficiency') or 0) * 100:7.0f}%  "
        f"{o.get('estimate', 'unmatched')}"
    )
