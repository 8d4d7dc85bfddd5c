#!/usr/bin/env bash
# One device call (issue 24 items 3 and 5, <10 min): T5 training's aten::add_ kernels against
# Nsight Compute with the L2 writes (op_vs_ncu.py; --counters measures only the top 64
# kernels, none of them add_), then the host-timing GPU test comparing figures timed at the
# host's speed (at_speed). bash this from the root; results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
S=docs/h200-run/unseen/op_vs_ncu.py
A="unseen:t5_train aten::add_ elementwise"
timeout 60 python3 $S $A list /tmp/t5_add.json > "$OUT/t5_add.txt" 2>&1
timeout 90 ncu --clock-control none --profile-from-start off --csv --kernel-name regex:elementwise \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_write.sum \
  python3 $S $A ncu > /tmp/t5_add.csv 2>/tmp/t5_add.err
echo "ncu rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/t5_add.txt"
python3 $S $A merge /tmp/t5_add.json /tmp/t5_add.csv >> "$OUT/t5_add.txt" 2>&1
cut -c1-250 "$OUT/t5_add.txt"
t=$(( 585 - ($(date +%s) - START) ))
timeout "$t" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "(churn|graph_break|checkpointed|loader_step):|passed|failed|skipped|SKIP|rc=" "$OUT/host_timing.txt" | cut -c1-800
echo "== end t=$(( $(date +%s) - START )) s"
