#!/usr/bin/env bash
# The in-place path on CUDA (never run on a GPU before 2026-12-04): minGPT's train.py loop
# profiled in place, with the default event budget and with KERNELSCOPE_PROFILER_GB=0.001
# (the counting step must refuse or thin the recording), against the loop's own iteration
# times in a fresh run of the program; then a captured call's replay (Block.forward, call 3)
# on CUDA. ~2 min. Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
rm -rf /tmp/mg && cp -r tests/workloads/minigpt /tmp/mg && cd /tmp/mg
LOOP=$(grep -n "^while True:" train.py | cut -d: -f1)
ARGS="train.py config/tiny.py --max_iters=60 --eval_interval=1000 --device=${DEV:-cuda}"
for run in 1 2; do
  timeout 90 python3 $ARGS --log_interval=10 > "$OUT/mg_truth_$run.txt" 2>&1
done
grep -h "^iter" "$OUT"/mg_truth_*.txt | tee -a "$OUT/inplace.txt"
for gb in default 0.001; do
  if [ $gb = default ]; then unset KERNELSCOPE_PROFILER_GB; else export KERNELSCOPE_PROFILER_GB=$gb; fi
  timeout 150 python3 -m kernelscope profile "train.py:$LOOP" --via "$ARGS" --json \
    > "$OUT/mg_inplace_$gb.json" 2> "$OUT/mg_inplace_$gb.err"
  echo "== in place, GB $gb: rc=$?" | tee -a "$OUT/inplace.txt"
  python3 - "$OUT/mg_inplace_$gb.json" <<'PY' 2>&1 | tee -a "$OUT/inplace.txt"
import json, sys
r = json.load(open(sys.argv[1]))
if "error" in r: print("error", r["error"]); raise SystemExit
t, s = r["timing"], r.get("steps") or {}
print("unprofiled us/iter", round(t["unprofiled_us_per_call"], 1), "reps", t["unprofiled_reps"],
      "p10-p90", t.get("unprofiled_p10_us"), t.get("unprofiled_p90_us"), "|", t["unprofiled_process"])
print("cuda us/step", round(t["cuda_us_per_step"], 1), "cpu us/step", round(t["cpu_us_per_step"], 1))
print("call_site", r["call_site"]["modes"], r["call_site"].get("step"))
print("steps", {k: v for k, v in s.items() if v})
print("verdict", r["verdict"]["summary"][:300])
PY
  unset KERNELSCOPE_PROFILER_GB
done
timeout 150 python3 -m kernelscope profile model.py::Block.forward --via "$ARGS" --call 3 --json \
  > "$OUT/mg_block.json" 2> "$OUT/mg_block.err"
echo "== Block.forward --call 3 rc=$?" | tee -a "$OUT/inplace.txt"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); t = r.get("timing") or {}
print(r.get("error") or (t.get("unprofiled_us_per_call"), t.get("unprofiled_reps"), t.get("unprofiled_process"), t.get("replayed_from"), t.get("cuda_us_per_step"), r["call_site"]["modes"]))' "$OUT/mg_block.json" | tee -a "$OUT/inplace.txt"
