#!/usr/bin/env bash
# One device call (issue 24, what is left of item 5 and 6 live): the host-timing test's
# loader_step (5 rounds) and checkpointed pinned to one vCPU (10 rounds); try's layernorm;
# minigpt's eval loop in place on the GPU (sys.monitoring); bench/loop_latency.py if time
# is left.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
cat /proc/loadavg > "$OUT/host_timing.txt"
timeout 330 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  -k "loader_step or one_vcpu" >> "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -oE "^[a-z_]+( on vCPU [0-9]+)?:|at the host.*|.*(passed|failed|rc=).*" "$OUT/host_timing.txt" | cut -c1-300
timeout "$(left 420)" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_try_gpu.py -rA \
  -k layernorm > "$OUT/try.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try.txt"
tail -n 12 "$OUT/try.txt" | cut -c1-300
cd tests/workloads/minigpt
t=$(left 500); [ "$t" -gt 30 ] && timeout "$t" python3 -m kernelscope profile train.py:120 --via \
  "train.py config/tiny.py --max_iters=30 --eval_interval=2 --eval_iters=10 --device=cuda" \
  --json > /tmp/eval.json 2> "$OUT/eval.err"
echo "eval rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/eval.err"
cd - >/dev/null
cp /tmp/eval.json "$OUT/eval.json" 2>/dev/null
python3 - <<'PY' >> "$OUT/eval.err" 2>&1
import json
r = json.load(open("/tmp/eval.json"))
names = [o["name"] for o in r.get("ops") or []]
bad = [n for n in names if "Optimizer" in n or "backward" in n.lower()]
t = r["timing"]
print("ops", len(names), "optimizer/backward ops:", bad[:8])
print({k: t.get(k) for k in ("cuda_us_per_step", "unprofiled_us_per_call", "unprofiled_method",
                             "cpu_us_per_step", "unprofiled_reps", "unprofiled_slowed",
                             "unprofiled_reference_us", "host_reference_us")})
print((r.get("verdict") or {}).get("summary"))
PY
tail -n 6 "$OUT/eval.err" | cut -c1-300
t=$(left 585)
if [ "$t" -gt 60 ]; then
  timeout "$t" python3 bench/loop_latency.py --device cuda --jobs 3 > "$OUT/loop_latency.txt" 2>&1
  echo "loop_latency rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/loop_latency.txt"
  tail -n 12 "$OUT/loop_latency.txt" | cut -c1-220
fi
echo "== end t=$(( $(date +%s) - START )) s"
