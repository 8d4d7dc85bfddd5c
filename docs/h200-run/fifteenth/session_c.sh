#!/usr/bin/env bash
# One device call, when little device time is left: session_b.sh (a torchrun program on the
# GPU under NCCL against CUDA-event truth), then the Llama half of session_a.sh (recorded live
# and raw against CUDA events in a fresh process, then its rows under --counters against
# Nsight Compute).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
if [ -z "${SKIP_B:-}" ]; then  # SKIP_B=1: session_b.sh ran in a call of its own
  timeout 200 bash docs/h200-run/fifteenth/session_b.sh > "$OUT/session_b.txt" 2>&1
  tail -n 12 "$OUT/session_b.txt" | cut -c1-300
fi
timeout "$(left 330)" python3 fixtures/record_real.py /tmp/s15 llama_train > "$OUT/record.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
timeout "$(left 360)" python3 docs/h200-run/heldout_table.py /tmp/s15 llama_train > "$OUT/models.txt" 2>&1
tail -n 4 "$OUT/record.txt"; cut -c1-220 "$OUT/models.txt"
t=$(left 570); [ "$t" -gt 150 ] && t=150
if [ "$t" -gt 40 ]; then
  timeout "$t" python3 -m kernelscope profile fixtures/workloads/fifteenth.py::llama_train \
    --device cuda --counters --no-lines --wait 1 --warmup 3 --active 3 --json -v \
    > /tmp/llama.counters.json 2> /tmp/llama.counters.stderr
  echo "counters rc=$? t=$(( $(date +%s) - START )) s" > "$OUT/counters.txt"
  tail -n 4 /tmp/llama.counters.stderr >> "$OUT/counters.txt"
  python3 docs/h200-run/unseen/model_vs_counters.py /tmp/s15/llama_train/report.json \
    /tmp/llama.counters.json >> "$OUT/counters.txt" 2>&1
  cut -c1-200 "$OUT/counters.txt" | head -n 34
fi
tar czf "$OUT/record.tgz" -C /tmp/s15 llama_train/report.json llama_train/meta.json 2>/dev/null
gzip -c /tmp/llama.counters.json > "$OUT/llama_counters.json.gz" 2>/dev/null
echo "== end t=$(( $(date +%s) - START )) s"
