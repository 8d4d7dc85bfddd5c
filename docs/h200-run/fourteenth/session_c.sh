#!/usr/bin/env bash
# One device call (~8 min): in place's hint for a function only DataLoader workers call
# (Python 3.12: the workers note their calls through sys.monitoring); the GPU loop's cost with
# the clean worker's timing floor at 2 s (CLEAN_TIMING_MIN_S) and at 0.5 s (the issue's);
# then Whisper's training step under --counters-match (thirteenth/session_h.sh).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
work=$(mktemp -d)
cp tests/workloads/worker_calls.py "$work/"
printf "[project]\nname = 'wc'\n" > "$work/pyproject.toml"
(cd "$work" && timeout 120 python3 -m kernelscope profile worker_calls.py::Rows.__getitem__ \
  --via worker_calls.py --in-place --json > "$OUT/rows_in_place.json" 2>/dev/null)
python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['error']; print(e['kind'], '|', e['message'][:200], '|', e['hint'])" "$OUT/rows_in_place.json"
timeout 240 python3 bench/loop_latency.py --device cuda --jobs 3 > "$OUT/loop_latency_2s.txt" 2>&1
echo "loop_latency (2 s) rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/loop_latency_2s.txt"
timeout 200 python3 bench/loop_latency.py --device cuda --jobs 3 --timing-min-s 0.5 \
  > "$OUT/loop_latency_05s.txt" 2>&1
echo "loop_latency (0.5 s) rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/loop_latency_05s.txt"
tail -n 14 "$OUT/loop_latency_2s.txt" | cut -c1-200
tail -n 14 "$OUT/loop_latency_05s.txt" | cut -c1-200
t=$(( 560 - ($(date +%s) - START) ))
[ "$t" -gt 100 ] && timeout "$t" bash docs/h200-run/thirteenth/session_h.sh | tail -n 30
echo "== end t=$(( $(date +%s) - START )) s"
