#!/usr/bin/env bash
# Device call 4 (issue 24): compiled flex_attention live with --counters (the mask's density
# against Nsight Compute's FLOPs), then `try` against hand-written variants (try.sh).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
mkdir -p /tmp/flex
timeout 200 python3 -m kernelscope profile fixtures/workloads/flex.py::causal --device cuda --counters \
  --no-memory --no-lines --json > /tmp/flex/flex.json 2> /tmp/flex/flex.err; echo "flex rc=$?"
python3 - /tmp/flex/flex.json <<'PY' | tee "$OUT/flex_live.txt"
import json, sys
r = json.load(open(sys.argv[1]))
side = json.load(open(r["trace"]["path"].replace(".pt.trace.json.gz", ".sidecar.json")))
print("block_masks", side.get("block_masks"))
for row in r["roofline"][:3]:
    print({k: row.get(k) for k in ("name", "bound", "estimate", "flops_per_step", "bytes_per_step", "achieved_tflops", "efficiency", "measured", "gpu_us_per_step")})
print("verdict", r["verdict"]["summary"])
PY
d=$(python3 -c "import json; print(json.load(open('/tmp/flex/flex.json'))['trace']['path'].rsplit('/',1)[0])")
tar -C "$d" -czf "$OUT/flex_run.tgz" . 2>/dev/null; cp /tmp/flex/flex.json "$OUT/"
echo "== try (t=$(( $(date +%s) - START )) s)"
timeout $(( 560 - ($(date +%s) - START) )) bash docs/h200-run/timing/try.sh > /dev/null 2>&1
cat "$OUT/try_check.txt"
echo "== end t=$(( $(date +%s) - START )) s"
