#!/usr/bin/env bash
# One device call (issue 24, ~9 min): the seventh held-out set (fixtures/workloads/seventh.py:
# DenseNet-121 training, LeViT-128S inference, a GPT-NeoX training step under bf16 autocast),
# never run through kernelscope before, live through the worker and as raw torch.profiler
# traces against CUDA events in a fresh process; then two of them under `kernelscope profile
# --counters` (the CLI: both workers started together), each row's model against Nsight
# Compute. bash this from the root; results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
names="levit neox_train densenet_train"
timeout "$(left 300)" python3 fixtures/record_real.py /tmp/s7 $names > "$OUT/record.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
timeout "$(left 360)" python3 docs/h200-run/heldout_table.py /tmp/s7 $names > "$OUT/models.txt" 2>&1
tar czf "$OUT/reports.tgz" -C /tmp/s7 $(cd /tmp/s7 && ls -d */report.txt */report.json */meta.json 2>/dev/null)
tail -n 8 "$OUT/record.txt"; cut -c1-220 "$OUT/models.txt"
counters() {  # NAME SPEC
  local t; t=$(left 560); [ "$t" -gt 130 ] && t=130; [ "$t" -lt 40 ] && return
  timeout "$t" python3 -m kernelscope profile "$2" --device cuda --counters --no-lines \
    --wait 1 --warmup 3 --active 3 --json -v > "/tmp/$1.counters.json" 2> "/tmp/$1.counters.stderr"
  echo "$1 counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/counters.txt"
  tail -n 15 "/tmp/$1.counters.stderr" >> "$OUT/counters.txt"
  python3 docs/h200-run/unseen/model_vs_counters.py /tmp/s7/$1/report.json \
    "/tmp/$1.counters.json" >> "$OUT/counters.txt" 2>&1
}
counters levit fixtures/workloads/seventh.py::levit
counters neox_train fixtures/workloads/seventh.py::neox_train
tar czf "$OUT/counters_json.tgz" -C /tmp levit.counters.json neox_train.counters.json 2>/dev/null
cat "$OUT/counters.txt" | cut -c1-200
echo "== end t=$(( $(date +%s) - START )) s"
