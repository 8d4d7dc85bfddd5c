#!/usr/bin/env bash
# One device call (issue 24, items 6 and 5): try against the hand-written variants with a
# block as its own probe of the host's spells (all four cases), then the host-timing test
# (the worker's timing judging its blocks by themselves too) on checkpointed and churn.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
timeout 270 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_try_gpu.py -rA \
  > "$OUT/try.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try.txt"
grep -E "ratio|loops|PASSED|FAILED|XFAIL|^E  |passed|failed|rc=" "$OUT/try.txt" | cut -c1-300 | tail -24
timeout "$(left 590)" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py \
  -rA -k "checkpointed or churn" > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "checkpointed:|churn:|passed|failed|skipped|SKIP|rc=" "$OUT/host_timing.txt" | cut -c1-900
echo "== end t=$(( $(date +%s) - START )) s"
