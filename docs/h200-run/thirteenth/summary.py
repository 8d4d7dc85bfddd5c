"""One held-out model's figures from session_d.sh: the fresh process's CUDA events against the
live report (with counters) and `kernelscope analyze` of the raw trace; rows above 100 %.

    python docs/h200-run/thirteenth/summary.py FRESH.txt RAW.json.gz COUNTERS.json
"""

import json
import subprocess
import sys
from pathlib import Path

fresh = [line for line in Path(sys.argv[1]).read_text().splitlines() if line.startswith("{")]
truth = json.loads(fresh[-1]) if fresh else {}
raw = subprocess.run(
    [sys.executable, "-m", "kernelscope", "analyze", sys.argv[2], "--json"],
    capture_output=True, text=True, check=False,
)  # fmt: skip
reports = [("live", json.loads(Path(sys.argv[3]).read_text()))]
if raw.returncode == 0:
    reports.append(("raw", json.loads(raw.stdout)))
else:
    print(f"analyze rc={raw.returncode}: {raw.stderr[-300:]}")
print(f"truth: CUDA events median {truth.get('median_us')} µs, back to back "
      f"{truth.get('back_to_back_wall_us_per_call')} µs")  # fmt: skip
for name, r in reports:
    t, v = r.get("timing") or {}, r.get("verdict") or {}  # a raw trace's report has no timing
    rows = [x for x in r.get("roofline") or [] if x.get("efficiency") is not None]
    over = [x for x in rows if x["efficiency"] > 1]
    gpu = t.get("cuda_us_per_step") or v.get("gpu_us_per_step") or 0.0
    print(f"{name}: GPU/step {gpu:.0f} µs, unprofiled "
          f"{t.get('unprofiled_us_per_call') or 0:.0f} µs, {v.get('bound')}: "
          f"{(v.get('summary') or '')[:160]}")  # fmt: skip
    top = max(rows, key=lambda x: x["efficiency"], default=None)
    if top is not None:
        print(f"   highest efficiency {top['efficiency'] * 100:.0f}% {top['name'][:60]} "
              f"({top.get('estimate')}), {len(over)} rows > 100%")  # fmt: skip
c = reports[0][1].get("counters") or {}
print(f"counters: {len(c.get('kernels') or [])} kernels in {c.get('seconds', 0):.0f} s, "
      f"error {c.get('error')!r}")  # fmt: skip
