#!/usr/bin/env bash
# One device call (~6 min): why the clean worker timed the fifteenth pair 15-21 % under
# fresh processes (record_real, 2026-12-06 06:35). Each call's wall call after call in fresh
# processes (drift.py), fresh_timing.py twice (and once as the worker's start leaves it), and
# kernelscope's own figure, each workload in turn.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
export PYTHONPATH=$PYTHONPATH:$PWD/tests/support
START=$(date +%s)
W=fixtures/workloads/fifteenth.py
for f in llama_train efficientnet_train; do
  timeout 90 python3 docs/h200-run/sixteenth/drift.py $W::$f 200 >> "$OUT/drift.txt" 2>&1
  for i in 1 2; do
    echo "$f fresh $(timeout 90 python3 tests/support/fresh_timing.py $W::$f cuda | tail -c 600)" >> "$OUT/fresh.txt"
  done
  echo "$f as_worker $(KS_FRESH_AS_WORKER=1 timeout 90 python3 tests/support/fresh_timing.py $W::$f cuda | tail -c 600)" >> "$OUT/fresh.txt"
  timeout 150 python3 -m kernelscope profile $W::$f --device cuda --no-lines --json > /tmp/$f.json 2> /tmp/$f.err
  echo "$f profile rc=$? t=$(( $(date +%s) - START ))" >> "$OUT/ks.txt"
  python3 - /tmp/$f.json >> "$OUT/ks.txt" 2>&1 <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if "unprofiled_us_per_call" in o:
            return o
        for v in o.values():
            r = find(v)
            if r: return r
tm = find(t)
print({k: tm.get(k) for k in ("unprofiled_us_per_call", "unprofiled_reps", "unprofiled_p10_us", "unprofiled_p90_us", "unprofiled_slowed", "unprofiled_process", "profiling_worker_us_per_call", "unprofiled_reference_us", "host_reference_us")})
PY
  echo "t=$(( $(date +%s) - START ))"
done
cut -c1-400 "$OUT/drift.txt"; cut -c1-300 "$OUT/fresh.txt"; cut -c1-600 "$OUT/ks.txt"
