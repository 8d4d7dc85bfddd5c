#!/usr/bin/env bash
# One device call (issue 24): record the user-Triton fixture with its counters, the
# checkpointed step's memory pass re-run (issue 26 leftover), then the timing spread probe.
set -u
. docs/h200-run/timing/env.sh
START=$(date +%s)
echo "== triton fixture"
timeout 200 python3 fixtures/record_real.py "$OUT/fx" triton_softmax 2>&1 | tail -5
timeout 150 python3 -m kernelscope profile fixtures/workloads/custom_kernel.py::row_softmax --device cuda \
  --counters --no-memory --json > "$OUT/fx/triton_softmax/counters.json" 2> "$OUT/fx/triton_softmax/counters.err"
echo "counters rc=$?"; tail -3 "$OUT/fx/triton_softmax/counters.err"
python3 - "$OUT/fx/triton_softmax/counters.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for row in r["roofline"][:4]:
    print({k: row.get(k) for k in ("name", "kind", "bound", "estimate", "bytes_per_step", "achieved_gbps", "efficiency", "measured", "gpu_us_per_step")})
print("launches", r.get("launches") or "")
PY
echo "== memory: the checkpointed step (t=$(( $(date +%s) - START )) s)"
D=docs/h200-run/memory
timeout 150 python3 -m kernelscope profile "$D/workload.py::train_step_ckpt" --device cuda --no-lines --json \
  --batch-size 16 --wait 0 --warmup 2 --active 2 > "$OUT/ckpt.json" 2> "$OUT/ckpt.err"; echo "rc=$?"
timeout 100 python3 $D/truth.py train_step_ckpt 16 workload > "$OUT/ckpt.truth.json" 2> "$OUT/ckpt.truth.err"
python3 $D/compare.py "$OUT/ckpt.json" "$OUT/ckpt.truth.json" | tee "$OUT/ckpt.compare.txt"
echo "== spread (t=$(( $(date +%s) - START )) s)"
N=5 timeout $(( 570 - ($(date +%s) - START) )) bash docs/h200-run/timing/spread.sh
echo "== end t=$(( $(date +%s) - START )) s"
