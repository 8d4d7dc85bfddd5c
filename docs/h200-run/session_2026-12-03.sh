#!/usr/bin/env bash
# One device call (issue 24, ~6 min): compiled flex_attention live with --counters (the live
# block mask's density against Nsight Compute's FLOPs), then `kernelscope try` against the same
# variants written by hand in a fresh process. Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
mkdir -p /tmp/flex
timeout 150 python3 -m kernelscope profile fixtures/workloads/flex.py::causal --device cuda \
  --counters --no-memory --no-lines --json > /tmp/flex/flex.json 2> /tmp/flex/flex.err
echo "flex rc=$? t=$(( $(date +%s) - START )) s" | tee "$OUT/flex_live.txt"
tail -5 /tmp/flex/flex.err >> "$OUT/flex_live.txt"
python3 - /tmp/flex/flex.json <<'PY' 2>&1 | tee -a "$OUT/flex_live.txt"
import json, sys
r = json.load(open(sys.argv[1]))
side = json.load(open(r["trace"]["path"].replace(".pt.trace.json.gz", ".sidecar.json")))
print("block_masks", side.get("block_masks"))
for row in r["roofline"][:4]:
    print({k: v for k, v in row.items() if k not in ("shapes",)})
print("verdict", r["verdict"]["summary"])
PY
cp /tmp/flex/flex.json "$OUT/" 2>/dev/null
echo "== try (t=$(( $(date +%s) - START )) s)" | tee -a "$OUT/flex_live.txt"
timeout "$(left 330)" python3 docs/h200-run/timing/try_vs_hand.py > "$OUT/try_check.txt" 2>&1
echo "try rc=$?" >> "$OUT/try_check.txt"
cat "$OUT/try_check.txt"
echo "== end t=$(( $(date +%s) - START )) s"
