#!/usr/bin/env bash
# One device call (issue 24, ~7 min): the host-timing GPU test with the calls of slowed spells
# left out alike in the worker and the fresh processes (a pure-Python reference loop in the
# same thread), then RAFT again (the grid sampler's bytes model) live and raw against a fresh
# process, its recording tarred for a fixture. Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
timeout 330 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "^(churn|graph_break|checkpointed|loader_step):|^[.F]*(churn|graph_break|checkpointed|loader_step):|passed|failed" "$OUT/host_timing.txt"
t=$(left 440); [ "$t" -gt 100 ] && t=100
if [ "$t" -gt 40 ]; then
  timeout "$t" python3 fixtures/record_real.py /tmp/raft raft_small > "$OUT/raft_record.txt" 2>&1
  python3 docs/h200-run/heldout_table.py /tmp/raft raft_small > "$OUT/raft_table.txt" 2>&1
  tar czf "$OUT/raft_small.tgz" -C /tmp/raft raft_small 2>/dev/null
  cut -c1-220 "$OUT/raft_table.txt"
fi
echo "== end t=$(( $(date +%s) - START )) s"
