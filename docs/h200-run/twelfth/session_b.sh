#!/usr/bin/env bash
# One device call (issue 24, item 5): the host-timing test with its rounds interleaved (one job
# on the worker, one fresh process; 20 rounds for checkpointed, 5 for the others), all four
# patterns; the pinned case only if time is left.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
cat /proc/loadavg > "$OUT/host_timing.txt"
timeout 560 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  -k "not one_vcpu" >> "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "churn:|graph_break:|loader_step:|checkpointed( on vCPU [0-9]+)?:|passed|failed|rc=" "$OUT/host_timing.txt" | grep -oE "^[a-z_]+( on vCPU [0-9]+)?:|at the host.*|.*(passed|failed|rc=).*" | cut -c1-300
t=$(left 590)
if [ "$t" -gt 200 ]; then
  timeout "$t" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
    -k one_vcpu > "$OUT/pinned.txt" 2>&1
  echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/pinned.txt"
  grep -oE "at the host.*|.*(passed|failed|rc=).*" "$OUT/pinned.txt" | cut -c1-300
fi
echo "== end t=$(( $(date +%s) - START )) s"
