#!/usr/bin/env bash
# One device call (issue 24 items 5 and 6, the session's last ~400 s): checkpointed's host
# timing (never a worker figure at the host's speed yet), then try's layernorm and tiny_loop
# against the hand variants (both xfailed on a slowed host on 2026-12-04).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  -k checkpointed > "$OUT/host_timing_d.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing_d.txt"
grep -E "checkpointed:|passed|failed|skipped|SKIP|rc=" "$OUT/host_timing_d.txt" | cut -c1-800
timeout 110 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_try_gpu.py -rA \
  -k "layernorm or tiny_loop" > "$OUT/try_d.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try_d.txt"
grep -E "ratio|loops|PASSED|FAILED|XFAIL|^E  |passed|failed|rc=" "$OUT/try_d.txt" | cut -c1-300 | tail -20
echo "== end t=$(( $(date +%s) - START )) s"
