"""A held-out model's optimizer rows (foreach and fused ops) three ways: the model on the raw
torch.profiler trace (its lists from the gradients the first step accumulated), the model on
the live trace (the sidecar's optimizer lists), and Nsight Compute (a report with --counters).

    python docs/h200-run/thirteenth/optimizer_rows.py RECORD_DIR MEASURED.json
"""

import json
import re
import subprocess
import sys
from pathlib import Path

OPT = re.compile(r"_foreach_|_fused_")


def rows(report):
    return {
        (r["name"], r.get("shapes", "")): r
        for r in report.get("roofline") or []
        if OPT.search(r["name"])
    }


d = Path(sys.argv[1])
raw = subprocess.run(
    [sys.executable, "-m", "kernelscope", "analyze", str(d / "raw.json.gz"), "--json"],
    capture_output=True, text=True, check=False,
)  # fmt: skip
if raw.returncode:
    sys.exit(f"analyze rc={raw.returncode}: {raw.stderr[-400:]}")
raw_rows = rows(json.loads(raw.stdout))
live = d / "report.json"  # the live report without counters, where recorded
live_rows = rows(json.loads(live.read_text())) if live.exists() else {}
measured = rows(json.loads(Path(sys.argv[2]).read_text()))
print(f"{len(raw_rows)} raw rows, {len(live_rows)} live, {len(measured)} in the counters report")
print(
    f"{'row':30} {'raw model B':>12} {'live model B':>12} {'measured B':>12} {'raw/m':>6} "
    f"{'live/m':>6} {'raw eff':>7} {'est raw':10}"
)
tot = [0.0, 0.0, 0.0]
for key in sorted(set(raw_rows) | set(live_rows) | set(measured)):
    r, lv, m = raw_rows.get(key, {}), live_rows.get(key, {}), measured.get(key, {})
    rb, lb = r.get("bytes_per_step") or 0, lv.get("bytes_per_step") or 0
    mb = (m.get("bytes_per_step") or 0) if m.get("measured") else 0
    if mb:
        tot = [tot[0] + rb, tot[1] + lb, tot[2] + mb]
    print(
        f"{key[0][:30]:30} {rb:12.4e} {lb:12.4e} {mb:12.4e} "
        f"{rb / mb if mb else 0:6.3f} {lb / mb if mb else 0:6.3f} "
        f"{(r.get('efficiency') or 0) * 100:6.0f}% {str(r.get('estimate', '-'))[:10]:10} "
        f"{key[1][:60]}"
    )
if tot[2]:
    print(f"measured rows: raw {tot[0] / tot[2]:.4f}, live {tot[1] / tot[2]:.4f} of ncu")
