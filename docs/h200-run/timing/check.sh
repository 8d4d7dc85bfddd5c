#!/usr/bin/env bash
# Issue 24, item 5 on the H200: host-bound unprofiled times against fresh processes, and the
# first job's wall against the torch floor (~4.5 min). Run from the repo root; results go
# under $OUT (default /tmp/out). try.sh beside it checks items 6 and 7.
#   bash docs/h200-run/timing/check.sh        (RUN_PYTEST=1: also the GPU test, ~4 min more)
set -u
. docs/h200-run/timing/env.sh
W=fixtures/workloads/host_timing.py
LOG=$OUT/timing_check.txt
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }

say "== 1. host-bound unprofiled time: the CLI's figure against 5 fresh processes timing as the worker does"
for fn in churn graph_break checkpointed loader_step; do
  json=$(timeout 200 python3 -m kernelscope profile "$W::$fn" --device cuda --json --no-lines 2>>"$OUT/stderr.txt")
  read -r cli reps process prof <<<"$(python3 -c '
import json, sys
t = json.loads(sys.stdin.read())["timing"]
print(t["unprofiled_us_per_call"], t["unprofiled_reps"], t["unprofiled_process"].replace(" ", "_"),
      t.get("profiling_worker_us_per_call"))' <<<"$json")"
  fresh=()
  for i in 1 2 3 4 5; do
    fresh+=("$(timeout 120 python3 tests/support/fresh_timing.py "$W::$fn" cuda "$reps" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["us_per_call"])')")
  done
  python3 - "$fn" "$cli" "$reps" "$process" "$prof" "${fresh[@]}" <<'PY' | tee -a "$LOG"
import statistics, sys
fn, cli, reps, process, prof, *fresh = sys.argv[1:]
fresh = sorted(float(f) for f in fresh)
med = statistics.median(fresh)
print(f"{fn:13s} CLI {float(cli):10.1f} us ({process}, {reps} calls; profiling worker {prof})"
      f"  fresh median {med:10.1f} us [{' '.join(f'{f:.1f}' for f in fresh)}]"
      f"  ratio {float(cli) / med:.3f}")
PY
done

say "== 2. the first job's wall against the floor (import torch + CUDA init), side by side"
timeout 150 python3 bench/first_job.py --device cuda --rounds 2 --json "$OUT/first_job.json" 2>&1 | tee -a "$LOG"

if [ "${RUN_PYTEST:-0}" = 1 ]; then  # ~3-4 min more: run it as a command of its own
  say "== 3. the GPU test of this work"
  timeout 300 python3 -m pytest -q -p no:cacheprovider -s tests/gpu/test_host_timing_gpu.py 2>&1 | tail -15 | tee -a "$LOG"
fi
