#!/usr/bin/env bash
# One device call (issue 24, ~6 min): 1) softmax/log-softmax rows, forward and backward,
# under Nsight Compute (--cache-control all) and under torch.profiler (the model's side);
# 2) GPT-NeoX's training step recorded again to keep as a fixture (its AdamW _foreach rows);
# 3) the seventh set's calls in fresh processes timed as the worker times them
# (tests/support/fresh_timing.py, slowed spells found and left out), two each, with the
# worker's count of calls from session_a. bash this from the root; results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
P=fixtures/softmax_probe/probe.py  # run as docs/h200-run/seventh/softmax_probe.py, this file
SECONDS=0
timeout 150 ncu --profile-from-start off --clock-control none --cache-control all --nvtx --csv \
  --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum \
  --log-file "$OUT/softmax_ncu.csv" python3 $P > "$OUT/softmax.txt" 2>&1
echo "ncu rc $? in $SECONDS s" >> "$OUT/softmax.txt"
KS_PROBE_TRACE=/tmp/softmax_trace.json timeout 60 python3 $P >> "$OUT/softmax.txt" 2>&1
gzip -9 -c /tmp/softmax_trace.json > "$OUT/softmax_trace.json.gz"
timeout 120 python3 fixtures/record_real.py /tmp/s7c neox_train > "$OUT/record_neox.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record_neox.txt"
tar czf "$OUT/neox_train.tgz" -C /tmp/s7c neox_train
W=fixtures/workloads/seventh.py
for spec in levit:366 neox_train:172 densenet_train:47; do
  for i in 1 2; do
    [ $(( $(date +%s) - START )) -gt 400 ] && break
    timeout 60 python3 tests/support/fresh_timing.py "$W::${spec%%:*}" cuda "${spec##*:}" \
      2>/dev/null | tail -1 | sed "s/^/${spec%%:*} /" >> "$OUT/fresh.txt"
  done
done
cat "$OUT/softmax.txt" "$OUT/record_neox.txt"; cut -c1-400 "$OUT/fresh.txt"
echo "== end t=$(( $(date +%s) - START )) s"
