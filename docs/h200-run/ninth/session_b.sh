#!/usr/bin/env bash
# One device call (issue 24 items 3 and 6, <10 min): T5 training's rows (aten::add_ read
# 99.8 % of the datasheet bandwidth) against --counters with the L2 writes counted; try on
# DenseNet training (channels_last) and LeViT (bf16) against the variants by hand.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
P="python3 -m kernelscope profile fixtures/workloads/unseen.py::t5_train --device cuda --no-lines --wait 1 --warmup 3 --active 3 --json"
timeout 100 $P > /tmp/t5.model.json 2> /tmp/t5.model.stderr
echo "t5 model rc=$? t=$(( $(date +%s) - START )) s" > "$OUT/t5_counters.txt"
timeout 200 $P --counters -v > /tmp/t5.counters.json 2> /tmp/t5.counters.stderr
echo "t5 counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/t5_counters.txt"
tail -n 6 /tmp/t5.counters.stderr >> "$OUT/t5_counters.txt"
python3 docs/h200-run/unseen/model_vs_counters.py /tmp/t5.model.json /tmp/t5.counters.json \
  >> "$OUT/t5_counters.txt" 2>&1
gzip -c /tmp/t5.counters.json > "$OUT/t5.counters.json.gz"
cut -c1-220 "$OUT/t5_counters.txt" | tail -32
t=$(( 570 - ($(date +%s) - START) ))
[ "$t" -gt 60 ] && timeout "$t" python3 docs/h200-run/seventh/try_models.py \
  densenet_train:channels_last levit:bf16 > "$OUT/try_models.txt" 2>&1
echo "try rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try_models.txt"
grep -v '^{' "$OUT/try_models.txt" | tail -12 | cut -c1-300
echo "== end t=$(( $(date +%s) - START )) s"
