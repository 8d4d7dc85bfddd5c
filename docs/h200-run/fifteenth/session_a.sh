#!/usr/bin/env bash
# One device call (issue 24): the fifteenth held-out set (fixtures/workloads/fifteenth.py:
# a transformers Llama under bf16 autocast, gradients clipped, fused AdamW; timm's
# EfficientNet-B0 in channels_last under fp16 autocast and a GradScaler), never run through
# kernelscope before: live and as raw torch.profiler traces against CUDA events in a
# fresh process; then each under `--counters`, every row's model against Nsight Compute, and
# the optimizer rows of the raw trace (lists from AccumulateGrad shapes) against it.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
names="llama_train efficientnet_train"
timeout "$(left 280)" python3 fixtures/record_real.py /tmp/s15 $names > "$OUT/record.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
timeout "$(left 330)" python3 docs/h200-run/heldout_table.py /tmp/s15 $names > "$OUT/models.txt" 2>&1
tar czf "$OUT/record.tgz" -C /tmp/s15 $(cd /tmp/s15 && ls -d */report.txt */report.json */meta.json 2>/dev/null)
tar czf "$OUT/raw.tgz" -C /tmp/s15 $(cd /tmp/s15 && ls -d */raw.json.gz 2>/dev/null)
tail -n 8 "$OUT/record.txt"; cut -c1-220 "$OUT/models.txt"
counters() {  # NAME SPEC
  local t; t=$(left 560); [ "$t" -gt 140 ] && t=140; [ "$t" -lt 40 ] && return
  timeout "$t" python3 -m kernelscope profile "$2" --device cuda --counters --no-lines \
    --wait 1 --warmup 3 --active 3 --json -v > "/tmp/$1.counters.json" 2> "/tmp/$1.counters.stderr"
  echo "$1 counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/counters.txt"
  tail -n 6 "/tmp/$1.counters.stderr" >> "$OUT/counters.txt"
  python3 docs/h200-run/unseen/model_vs_counters.py /tmp/s15/$1/report.json \
    "/tmp/$1.counters.json" >> "$OUT/counters.txt" 2>&1
  python3 docs/h200-run/thirteenth/optimizer_rows.py /tmp/s15/$1 "/tmp/$1.counters.json" \
    >> "$OUT/optimizer_rows.txt" 2>&1
}
counters llama_train fixtures/workloads/fifteenth.py::llama_train
counters efficientnet_train fixtures/workloads/fifteenth.py::efficientnet_train
tar czf "$OUT/counters_json.tgz" -C /tmp llama_train.counters.json efficientnet_train.counters.json 2>/dev/null
cut -c1-200 "$OUT/counters.txt" | tail -n 40; cut -c1-200 "$OUT/optimizer_rows.txt"
echo "== end t=$(( $(date +%s) - START )) s"
