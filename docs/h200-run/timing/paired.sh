#!/usr/bin/env bash
# Issue 24, item 5, for the next device session (~6 min): the CLI's unprofiled figure against
# fresh processes run in alternation with it (fresh, CLI, fresh, CLI, fresh, CLI, fresh), so
# the host's slow spells (modes_2026-12-02.txt: 0.4-2.4 s, ~1.5x, inside one process) fall on
# both sides alike. Prints each pair's ratio and the ratio of medians. Results under $OUT.
#   bash docs/h200-run/timing/paired.sh [workload ...]   (default: churn graph_break
#   checkpointed loader_step)
set -u
. docs/h200-run/timing/env.sh
W=fixtures/workloads/host_timing.py
LOG=$OUT/timing_paired.txt
: >"$LOG"
fresh() {
  timeout 120 python3 tests/support/fresh_timing.py "$W::$1" cuda "$2" |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["us_per_call"])'
}
cli() {
  timeout 200 python3 -m kernelscope profile "$W::$1" --device cuda --json --no-lines \
    --no-memory 2>>"$OUT/stderr.txt" | python3 -c '
import json, sys
t = json.loads(sys.stdin.read())["timing"]
print(t["unprofiled_us_per_call"], t["unprofiled_reps"])'
}
for fn in "${@:-churn graph_break checkpointed loader_step}"; do
  for f in $fn; do
    read -r first reps <<<"$(cli "$f")"
    clis=("$first") fresh_runs=("$(fresh "$f" "$reps")")
    for _ in 1 2; do
      read -r c _r <<<"$(cli "$f")"
      clis+=("$c")
      fresh_runs+=("$(fresh "$f" "$reps")")
    done
    python3 - "$f" "$reps" "${clis[*]}" "${fresh_runs[*]}" <<'PY' | tee -a "$LOG"
import statistics, sys
fn, reps, clis, fresh = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
clis, fresh = [float(x) for x in clis], [float(x) for x in fresh]
pairs = " ".join(f"{c / f:.2f}" for c, f in zip(clis, fresh))
print(f"{fn:13s} {reps} calls  CLI {' '.join(f'{c:.1f}' for c in clis)}  fresh "
      f"{' '.join(f'{f:.1f}' for f in fresh)}  pair ratios {pairs}  "
      f"medians {statistics.median(clis) / statistics.median(fresh):.3f}")
PY
  done
done
