#!/usr/bin/env bash
# One device call (issue 24, <10 min): the host-timing and try GPU tests under the slowed-spell
# rule's current form (the thread's second-fastest loop, both blocks beside a slow loop, left
# out while a quarter remain, host-bound GPU timings only), never run on the H200 before.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
timeout 320 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "(churn|graph_break|checkpointed|loader_step):|passed|failed" "$OUT/host_timing.txt" | cut -c1-300
t=$(( 575 - ($(date +%s) - START) ))
timeout "$t" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_try_gpu.py -rA \
  --durations=5 > "$OUT/try.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try.txt"
grep -E "ratio|PASSED|FAILED|^E  |passed|failed|slowed" "$OUT/try.txt" | cut -c1-300 | tail -40
echo "== end t=$(( $(date +%s) - START )) s"
