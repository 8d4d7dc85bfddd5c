#!/usr/bin/env bash
# What is left of the budget after session_b (378 s, a start included): session_a's first
# half only, the fixture tarred as soon as it is recorded (nothing comes back from a run cut
# at the budget but what is already under $OUT), then --counters on it if time is left.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
timeout 230 python3 fixtures/record_real.py /tmp/s11 resnet18_sgd > "$OUT/record.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
tar czf "$OUT/fixture.tgz" -C /tmp/s11 resnet18_sgd 2>/dev/null
tail -n 4 "$OUT/record.txt"
zcat /tmp/s11/resnet18_sgd/trace.json.gz | grep -oE '"name": "[^"]*(bn_fw|bn_bw|max_pool|multi_tensor)[^"]{0,60}' \
  | sort | uniq -c | cut -c1-200 >> "$OUT/record.txt"
S=fixtures/resnet18_sgd/heldout_fused.py::resnet_sgd
timeout 150 python3 -m kernelscope profile "$S" --device cuda --counters --no-lines \
  --wait 1 --warmup 3 --active 3 --json -v > "$OUT/counters.json" 2> "$OUT/counters.stderr"
echo "counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
python3 docs/h200-run/unseen/model_vs_counters.py /tmp/s11/resnet18_sgd/report.json \
  "$OUT/counters.json" >> "$OUT/record.txt" 2>&1
grep -E "bn_|max_pool|fused|rc=|MB fresh" "$OUT/record.txt" | cut -c1-220
echo "== end t=$(( $(date +%s) - START )) s"
