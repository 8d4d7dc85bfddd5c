#!/usr/bin/env bash
# One device call (issue 24 item 5, <10 min): churn's clean worker against fresh processes
# interleaved (churn_pairs.py), then the host-timing GPU test with room for all four
# workloads (its 320 s timeout cut loader_step on 2026-12-04). bash this from the root.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
timeout 150 python3 docs/h200-run/ninth/churn_pairs.py 3 > "$OUT/churn_pairs.txt" 2>&1
echo "churn_pairs rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/churn_pairs.txt"
cat "$OUT/churn_pairs.txt" | cut -c1-200 | tail -25
t=$(( 585 - ($(date +%s) - START) ))
timeout "$t" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "(churn|graph_break|checkpointed|loader_step):|passed|failed|rc=" "$OUT/host_timing.txt" | cut -c1-700
echo "== end t=$(( $(date +%s) - START )) s"
