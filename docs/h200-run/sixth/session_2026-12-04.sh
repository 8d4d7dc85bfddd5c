#!/usr/bin/env bash
# One device call (issue 24, <8 min): try against hand-written variants with both sides' µs
# and the hand loop at try's block sizes; checkpointed's clean worker against fresh processes,
# alternated, threads sampled; T5's add_ by shapes under Nsight Compute.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
for c in "layernorm compile" "tiny_loop compile" "convs compile,channels_last"; do
  [ "$(left 330)" -lt 30 ] && break
  timeout "$(left 330)" python3 docs/h200-run/sixth/try_blocks.py $c >> "$OUT/try_blocks.txt" 2>&1
done
cut -c1-300 "$OUT/try_blocks.txt"; echo "t=$(( $(date +%s) - START )) s"
timeout "$(left 470)" bash docs/h200-run/sixth/checkpointed.sh
echo "t=$(( $(date +%s) - START )) s"
T=docs/h200-run/unseen/op_vs_ncu.py
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
if [ "$(left 560)" -gt 50 ]; then
  timeout 40 python3 $T unseen:t5_train aten::add_ elementwise list "$OUT/t5_kernels.json" > "$OUT/t5_add_ncu.txt" 2>&1
  timeout "$(left 570)" ncu --clock-control none --profile-from-start off --csv \
    --kernel-name "regex:elementwise" --metrics $M python3 $T unseen:t5_train aten::add_ elementwise ncu > /tmp/t5.csv 2> /dev/null
  echo "ncu rc=$?" >> "$OUT/t5_add_ncu.txt"; cp /tmp/t5.csv "$OUT/t5_add.csv"
  python3 $T unseen:t5_train aten::add_ elementwise merge "$OUT/t5_kernels.json" /tmp/t5.csv >> "$OUT/t5_add_ncu.txt" 2>&1
  cut -c1-250 "$OUT/t5_add_ncu.txt" | tail -30
fi
echo "== end t=$(( $(date +%s) - START )) s"
