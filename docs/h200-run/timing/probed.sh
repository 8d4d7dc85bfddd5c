#!/usr/bin/env bash
# Issue 24 item 5 (~3.5 min): the CLI's clean worker and fresh processes, one after the
# other, with a CPU-only host-speed probe (tests/support/host_probe.py) beside them. Each
# figure comes with its timing window; probed.py prints the raw ratio of medians and the
# ratio with each figure divided by the probe's level in its window.
#   bash docs/h200-run/timing/probed.sh [ROUNDS] [workload ...]
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
W=fixtures/workloads/host_timing.py
ROUNDS=${1:-3}; shift || true
LOG=$OUT/probed.jsonl; : > "$LOG"
rm -f /tmp/probe.stop
python3 tests/support/host_probe.py /tmp/probe.stop "$OUT/probe.json" &
PROBE=$!
for r in $(seq "$ROUNDS"); do
  for fn in "${@:-churn graph_break}"; do
    for f in $fn; do
      timeout 120 python3 -m kernelscope profile "$W::$f" --device "${DEV:-cuda}" --json --no-lines \
        --no-memory 2>>"$OUT/stderr.txt" | python3 -c '
import json, sys
t = json.loads(sys.stdin.read())["timing"]
print(json.dumps({"fn": sys.argv[1], "who": "cli", "us": t["unprofiled_us_per_call"],
                  "reps": t["unprofiled_reps"], "window_s": t["unprofiled_window_s"],
                  "process": t["unprofiled_process"]}))' "$f" >> "$LOG"
      reps=$(tail -1 "$LOG" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["reps"])')
      timeout 120 python3 tests/support/fresh_timing.py "$W::$f" "${DEV:-cuda}" "$reps" 2>>"$OUT/stderr.txt" |
        python3 -c '
import json, sys
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
print(json.dumps({"fn": sys.argv[1], "who": "fresh", "us": d["us_per_call"], "reps": d["reps"],
                  "window_s": d["window_s"]}))' "$f" >> "$LOG"
    done
  done
done
touch /tmp/probe.stop; wait $PROBE
python3 docs/h200-run/timing/probed.py "$LOG" "$OUT/probe.json" | tee "$OUT/probed.txt"
