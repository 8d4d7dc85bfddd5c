"""The memory pass (a `kernelscope profile --json` report) beside a fresh process's truth."""

import json
import sys
from pathlib import Path

report, truth = (json.loads(Path(p).read_text()) for p in sys.argv[1:3])
m = report.get("memory_pass")
if not m:
    sys.exit(f"no memory pass in the report: {sys.argv[1]}")
MiB = 2**20
peak, true_peak = m["peak_allocated_bytes"], truth["max_memory_allocated"]
off = 100.0 * (peak - true_peak) / true_peak
reserved = (m.get("peak_reserved_bytes") or 0) / MiB
print(f"== {truth['function']} (batch {truth['batch_size']})")
print(f"peak allocated  memory pass {peak / MiB:.1f} MiB · fresh process {true_peak / MiB:.1f} MiB"
      f" · off {off:+.2f} %")  # fmt: skip
print(f"peak reserved   memory pass {reserved:.1f} MiB · fresh process "
      f"{truth['max_memory_reserved'] / MiB:.1f} MiB")  # fmt: skip
print(f"trace peak      {m['trace_peak_bytes'] / MiB:.1f} MiB (the history's running total; "
      f"entries {m['entries']}, truncated {m['truncated']})")  # fmt: skip
print(f"before the call memory pass {m['baseline_bytes'] / MiB:.1f} MiB · fresh process "
      f"{truth['allocated_before'] / MiB:.1f} MiB")  # fmt: skip
known = truth["known"]
before, during = m["baseline_kinds"], m["kinds_at_peak"]
held = {k: before.get(k, 0) + during.get(k, 0) for k in {*before, *during}}
for kind in ("parameters", "gradients", "optimizer_state"):
    print(f"{kind:16} memory pass {held.get(kind, 0) / MiB:.2f} MiB (before "
          f"{before.get(kind, 0) / MiB:.2f} + in the call {during.get(kind, 0) / MiB:.2f}) · "
          f"known {known[kind] / MiB:.2f} MiB")  # fmt: skip
after = m.get("kinds_after_call") or {}
for kind in ("parameters", "gradients", "optimizer_state"):
    print(f"{kind:16} after the call {after.get(kind, 0) / MiB:.2f} MiB · known "
          f"{known[kind] / MiB:.2f} MiB")  # fmt: skip
for kind in ("activations", "temporaries", "other"):
    print(f"{kind:16} {held.get(kind, 0) / MiB:.2f} MiB at the peak")
print(f"allocator       device allocs {m.get('device_allocs')}, frees {m.get('device_frees')}")
print("top lines at the peak:")
for r in sorted(m["lines"], key=lambda r: -r["live_at_peak_bytes"])[:8]:
    name = r["path"].rsplit("/", 1)[-1]
    where = f"{name}:{r['line']}" + (" (backward)" if r["via"] else "") if name else f"({r['via']})"
    kinds = ", ".join(f"{k} {v / MiB:.1f}" for k, v in sorted(r["kinds"].items()))
    print(f"  {where:40} {r['live_at_peak_bytes'] / MiB:9.1f} MiB  {kinds}")
codes = [f["code"] for f in report.get("findings", []) if f["code"] in ("KS131", "KS132", "KS133")]
print("memory findings:", codes or "none")
