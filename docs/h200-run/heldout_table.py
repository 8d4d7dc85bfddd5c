"""Tabulate fixtures/record_real.py's output for held-out models (run where it ran):
kernelscope's live numbers and `kernelscope analyze` of each raw trace, against the fresh
process's CUDA events. Usage: python docs/h200-run/heldout_table.py OUTDIR NAME..."""

import json
import subprocess
import sys
from pathlib import Path

out = Path(sys.argv[1])
print(
    f"{'workload':16} {'src':5} {'GPU/step':>9} {'unprof':>9} {'truth':>9} {'Δunprof':>8}  verdict"
)
for name in sys.argv[2:]:
    d = out / name
    if not (d / "meta.json").exists():
        print(f"{name:16} missing (see record.txt)")
        continue
    truth = json.loads((d / "meta.json").read_text())["cuda_events"] or {}
    t = truth.get("median_us", float("nan"))
    live = json.loads((d / "report.json").read_text())
    raw = subprocess.run(
        [sys.executable, "-m", "kernelscope", "analyze", str(d / "raw.json.gz"), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = [("live", live)]
    if raw.returncode == 0:
        rows.append(("raw", json.loads(raw.stdout)))
    else:
        print(f"{name:16} raw   analyze rc={raw.returncode}: {raw.stderr.strip()[-300:]}")
    for src, rep in rows:
        tm = rep["timing"]
        v = rep.get("verdict") or {}
        unprof = tm.get("unprofiled_us_per_call") or 0.0
        delta = f"{(unprof - t) / t * 100:+.1f}%" if unprof else "-"
        print(
            f"{name:16} {src:5} {tm['cuda_us_per_step']:8.0f}µ {unprof:8.0f}µ {t:8.0f}µ "
            f"{delta:>8}  "
            f"{v.get('bound', '?')}: {v.get('summary', '')[:150]}"
        )
        effs = [r for r in rep.get("roofline") or [] if r.get("efficiency") is not None]
        top = max(effs, key=lambda r: r["efficiency"], default=None)
        over = sum(r["efficiency"] > 1 for r in effs)
        if top is not None:
            print(
                f"{'':22} highest efficiency {top['efficiency'] * 100:.0f}% "
                f"({top.get('kind', '')}, {top.get('estimate', '')}, {top.get('bound', '')}) "
                f"{top.get('name', '')[:70]}  [{over} rows > 100%]"
            )
        for f in (rep.get("findings") or [])[:2]:
            print(f"{'':22} {f.get('code', '')} {f.get('message', '')[:140]}")
