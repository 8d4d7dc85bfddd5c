#!/usr/bin/env bash
# One device call (issue 24, item 5): checkpointed in six fresh processes, threads free,
# all on one vCPU, or the main thread apart (checkpointed_threads.py).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
for mode in free same split free same split; do
  timeout 60 python3 docs/h200-run/tenth/checkpointed_threads.py $mode >> "$OUT/threads.txt" 2>&1
done
cut -c1-400 "$OUT/threads.txt"
echo "== end t=$(( $(date +%s) - START )) s"
