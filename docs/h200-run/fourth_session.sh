#!/usr/bin/env bash
# One device call (issue 24, ~9 min): 1) is a host-bound call's slow mode the GPU's clock or
# the CPU's speed (timing/clocks.py); 2) the fourth held-out set of library models live and as
# raw traces against fresh-process CUDA events (fixtures/workloads/fourth.py); 3) two of them
# under --counters, each row's model against Nsight Compute; 4) T5's add_ under ncu, if time
# is left. Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
W=fixtures/workloads/host_timing.py
timeout 90 python3 docs/h200-run/timing/clocks.py 6 sync_tiny "$W::churn" "$W::graph_break" \
  "$W::loader_step" > "$OUT/clocks.txt" 2>&1
echo "clocks rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/clocks.txt"
names="whisper_train qwen2_decode raft_small resnext_train detector"
timeout "$(left 340)" python3 fixtures/record_real.py /tmp/fourth $names > "$OUT/record.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
timeout "$(left 400)" python3 docs/h200-run/heldout_table.py /tmp/fourth $names > "$OUT/fourth_models.txt" 2>&1
for n in $names; do cp /tmp/fourth/$n/report.txt "$OUT/$n.report.txt" 2>/dev/null; done
tail -n 8 "$OUT/record.txt"; cut -c1-200 "$OUT/fourth_models.txt"
counters() {  # NAME SPEC
  local t; t=$(left 520); [ "$t" -gt 120 ] && t=120; [ "$t" -lt 30 ] && return
  timeout "$t" python3 -m kernelscope profile "$2" --device cuda --counters --no-lines \
    --wait 1 --warmup 3 --active 3 --json > "$OUT/$1.counters.json" 2> "$OUT/$1.counters.stderr"
  echo "$1 counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/counters.txt"
  python3 docs/h200-run/unseen/model_vs_counters.py /tmp/fourth/$1/report.json \
    "$OUT/$1.counters.json" >> "$OUT/counters.txt" 2>&1
}
counters raft_small fixtures/workloads/fourth.py::raft
counters qwen2_decode fixtures/workloads/fourth.py::qwen2_decode
cat "$OUT/counters.txt"
t=$(left 570)
if [ "$t" -gt 100 ]; then
  T=docs/h200-run/unseen/t5_add.py
  timeout 60 python3 $T list "$OUT/t5_kernels.json" > "$OUT/t5_add.txt" 2>&1
  timeout "$(left 590)" ncu --clock-control none --profile-from-start off --csv \
    --kernel-name regex:elementwise \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
    python3 $T ncu > /tmp/ncu.csv 2> /dev/null
  echo "ncu rc=$?" >> "$OUT/t5_add.txt"
  python3 $T merge "$OUT/t5_kernels.json" /tmp/ncu.csv >> "$OUT/t5_add.txt" 2>&1
fi
head -150 "$OUT/clocks.txt"
echo "== end t=$(( $(date +%s) - START )) s"
