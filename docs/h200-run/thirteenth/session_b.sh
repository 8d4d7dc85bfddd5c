#!/usr/bin/env bash
# One device call (issue 24, NEXT.md's smaller items): the H200 row of bench/loop_latency.py;
# try's layernorm case again; minigpt's eval loop (estimate_loss, train.py:120) profiled in
# place on the GPU through sys.monitoring (Python 3.12 there).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
cat /proc/loadavg > "$OUT/loop_latency.txt"
timeout "$(left 200)" python3 bench/loop_latency.py --device cuda --jobs 4 >> "$OUT/loop_latency.txt" 2>&1
echo "loop_latency rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/loop_latency.txt"
cut -c1-220 "$OUT/loop_latency.txt" | tail -n 25
timeout "$(left 380)" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_try_gpu.py -rA \
  -k layernorm > "$OUT/try.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try.txt"
tail -n 25 "$OUT/try.txt" | cut -c1-300
cd tests/workloads/minigpt
t=$(left 560); [ "$t" -gt 30 ] && timeout "$t" python3 -m kernelscope profile train.py:120 --via \
  "train.py config/tiny.py --max_iters=30 --eval_interval=2 --eval_iters=10 --device=cuda" \
  --json > /tmp/eval.json 2> "$OUT/eval.err"
echo "eval rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/eval.err"
cd - >/dev/null
cp /tmp/eval.json "$OUT/eval.json" 2>/dev/null
python3 - <<'PY' >> "$OUT/eval.err" 2>&1
import json
r = json.load(open("/tmp/eval.json"))
names = [o["name"] for o in r.get("ops") or []]
bad = [n for n in names if "Optimizer" in n or "backward" in n.lower() or "Backward" in n]
t = r["timing"]
print("ops", len(names), "optimizer/backward ops:", bad[:8])
print({k: t.get(k) for k in ("cuda_us_per_step", "unprofiled_us_per_call", "unprofiled_method",
                             "cpu_us_per_step", "unprofiled_reps", "unprofiled_slowed",
                             "unprofiled_reference_us", "host_reference_us")})
print((r.get("verdict") or {}).get("summary"))
PY
tail -n 12 "$OUT/eval.err" | cut -c1-300
echo "== end t=$(( $(date +%s) - START )) s"
