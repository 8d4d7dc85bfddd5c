#!/usr/bin/env bash
# One device call (issue 24, item 5; NEXT.md's first item): the host-timing test on all four
# host-bound patterns with the fast-block anchor and checkpointed on one vCPU, then
# checkpointed once more, each figure
# printed with its threads (name, last vCPU, CPU seconds): is checkpointed's spread between
# fresh processes the same work at another speed, or more work?
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
cat /proc/loadavg > "$OUT/host_timing.txt"
timeout 420 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  >> "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "churn:|graph_break:|loader_step:|checkpointed( on vCPU [0-9]+)?:|passed|failed|rc=" "$OUT/host_timing.txt" | cut -c1-900
t=$(left 590)
if [ "$t" -gt 100 ]; then
  timeout "$t" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
    -k checkpointed > "$OUT/checkpointed_again.txt" 2>&1
  echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/checkpointed_again.txt"
  grep -E "checkpointed:|pt_autograd|passed|failed|rc=" "$OUT/checkpointed_again.txt" | cut -c1-900
fi
echo "== end t=$(( $(date +%s) - START )) s"
