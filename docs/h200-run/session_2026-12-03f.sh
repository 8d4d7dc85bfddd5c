#!/usr/bin/env bash
# One device call (issue 24, <10 min): RAFT's unprofiled figure split (fresh processes with the
# worker's timing code, as-worker, the CLI's two workers); --counters on qwen2_decode and raft
# now that it measures the costliest kernels; T5's add_ and RAFT's cuDNN grid sampler under
# Nsight Compute (op_vs_ncu.py). Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
R=fixtures/workloads/fourth.py
{ for i in 1 2 3; do timeout 60 python3 tests/support/fresh_timing.py $R::raft cuda; done
  KS_FRESH_AS_WORKER=1 timeout 60 python3 tests/support/fresh_timing.py $R::raft cuda
} > "$OUT/raft_split.txt" 2>&1
timeout 120 python3 -m kernelscope profile $R::raft --device cuda --no-lines --no-memory --json \
  > /tmp/raft_model.json 2> /tmp/raft_model.stderr
python3 -c "import json; print(json.dumps(json.load(open('/tmp/raft_model.json')).get('timing'), indent=1))" \
  >> "$OUT/raft_split.txt" 2>&1
cut -c1-400 "$OUT/raft_split.txt"; echo "t=$(( $(date +%s) - START )) s"
counters() {  # NAME SPEC MODEL_JSON
  local t; t=$(left 400); [ "$t" -gt 110 ] && t=110; [ "$t" -lt 30 ] && return
  [ -s "$3" ] || timeout 90 python3 -m kernelscope profile "$2" --device cuda --no-lines \
    --no-memory --json > "$3" 2>/dev/null
  timeout "$t" python3 -m kernelscope profile "$2" --device cuda --counters --no-lines \
    --no-memory --json > "/tmp/$1.counters.json" 2> "/tmp/$1.counters.stderr"
  echo "$1 counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/counters.txt"
  python3 docs/h200-run/unseen/model_vs_counters.py "$3" "/tmp/$1.counters.json" >> "$OUT/counters.txt" 2>&1
  tail -3 "/tmp/$1.counters.stderr" >> "$OUT/counters.txt"
}
counters qwen2_decode $R::qwen2_decode /tmp/qwen_model.json
counters raft $R::raft /tmp/raft_model.json
cut -c1-200 "$OUT/counters.txt"
T=docs/h200-run/unseen/op_vs_ncu.py
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
opncu() {  # NAME SPEC OP WORD
  local t; t=$(left 560); [ "$t" -lt 40 ] && return
  timeout 60 python3 $T "$2" "$3" "$4" list "$OUT/$1_kernels.json" > "$OUT/$1_ncu.txt" 2>&1
  timeout "$(left 570)" ncu --clock-control none --profile-from-start off --csv \
    --kernel-name "regex:$4" --metrics $M python3 $T "$2" "$3" "$4" ncu > "/tmp/$1.csv" 2> /dev/null
  echo "ncu rc=$?" >> "$OUT/$1_ncu.txt"
  python3 $T "$2" "$3" "$4" merge "$OUT/$1_kernels.json" "/tmp/$1.csv" >> "$OUT/$1_ncu.txt" 2>&1
  cat "$OUT/$1_ncu.txt" | cut -c1-250
}
opncu raft_grid fourth:raft aten::cudnn_grid_sampler bilinear_sampler
opncu t5_add unseen:t5_train aten::add_ elementwise
echo "== end t=$(( $(date +%s) - START )) s"
