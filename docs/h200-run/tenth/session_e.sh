#!/usr/bin/env bash
# One device call (issue 24, item 5; the session's last ~250 s): checkpointed in six fresh
# processes timed as the worker times it (tests/support/fresh_timing.py, 411 calls), each
# with the vCPUs its busy threads ran on, to see whether figures of one placement agree.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
for i in 1 2 3 4 5 6; do
  [ $(( $(date +%s) - START )) -gt 85 ] && break
  timeout 25 python3 tests/support/fresh_timing.py fixtures/workloads/host_timing.py::checkpointed \
    cuda 411 >> "$OUT/placement.txt" 2>&1
done
python3 - "$OUT/placement.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    busy = [t for t in r["threads"] if t["cpu_s"] >= 0.05 * r["threads"][0]["cpu_s"]]
    where = " ".join(f"{'main' if t['timing'] else t['name']}@{t['cpu']}:{t['cpu_s']:.2f}s" for t in busy)
    s = r["slowed"]
    print(f"{r['us_per_call']:.0f} us, loop {r['reference_us']:.1f}, slowed {s and round(s['share'], 2)} {s and s['left_out']}; {where}")
PY
echo "== end t=$(( $(date +%s) - START )) s"
