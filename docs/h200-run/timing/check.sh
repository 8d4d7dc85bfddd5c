#!/usr/bin/env bash
# Issue 24, items 5 and 6 on the H200: host-bound unprofiled times against fresh processes,
# the first job's wall against the torch floor, and `kernelscope try` against the same
# variants written by hand. Run from the repo root; results go under $OUT (default /tmp/out).
#   bash docs/h200-run/timing/check.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
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
timeout 150 python3 bench/first_job.py --device cuda --rounds 3 --json "$OUT/first_job.json" 2>&1 | tee -a "$LOG"

say "== 3. kernelscope try against the same variants hand-written in a fresh process"
timeout 200 python3 docs/h200-run/timing/try_vs_hand.py 2>&1 | tee -a "$LOG"

if [ "${RUN_PYTEST:-0}" = 1 ]; then  # ~3-4 min more: run it as a second command
say "== 4. the GPU tests of this work"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_host_timing_gpu.py 2>&1 | tail -15 | tee -a "$LOG"
fi
