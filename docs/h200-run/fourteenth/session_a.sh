#!/usr/bin/env bash
# One device call (~90 s): a function profiled in place on the GPU, whose wall per step is
# now each active call's own, from CUDA events around it (bc8c87a), not the active window.
# Read wall against the trace's GPU time per step and the unprofiled time (CUDA events too).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
cd tests/workloads/minigpt
timeout 240 python3 -m kernelscope profile model.py::GPT.forward --via \
  "train.py config/tiny.py --max_iters=40 --eval_interval=1000 --device=cuda" \
  --in-place --skip 21 --json > /tmp/forward.json 2> "$OUT/forward.err"
echo "forward rc=$?" >> "$OUT/forward.err"
cd - >/dev/null
cp /tmp/forward.json "$OUT/forward.json" 2>/dev/null
python3 - <<'PY' >> "$OUT/forward.err" 2>&1
import json
t = json.load(open("/tmp/forward.json"))["timing"]
print({k: t.get(k) for k in ("wall_us_per_step", "cuda_us_per_step", "cpu_us_per_step",
                             "unprofiled_us_per_call", "unprofiled_method", "unprofiled_reps")})
print("wall >= GPU time per step:", t["wall_us_per_step"] >= 0.95 * t["cuda_us_per_step"])
PY
tail -n 4 "$OUT/forward.err" | cut -c1-300
