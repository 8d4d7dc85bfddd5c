#!/usr/bin/env bash
# One device call (issue 24, ~6 min): NEXT.md items 1 and 3. The host-timing GPU test with the
# clean worker kept to a fresh process's state (b68ea0b) and the probe waited for (3d48ee3),
# then T5's aten::add_ row under Nsight Compute. Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
nproc > "$OUT/host.txt"; uptime >> "$OUT/host.txt"; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$OUT/host.txt"
timeout 330 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
tail -40 "$OUT/host_timing.txt"
T=docs/h200-run/unseen/t5_add.py
timeout 90 python3 $T list /tmp/k.json > "$OUT/t5_add.txt" 2>&1
timeout 150 ncu --clock-control none --profile-from-start off --csv --kernel-name regex:elementwise \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
  python3 $T ncu > /tmp/ncu.csv 2> "$OUT/t5_ncu.stderr"
echo "ncu rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/t5_add.txt"
cp /tmp/ncu.csv "$OUT/t5_ncu.csv" 2>/dev/null
python3 $T merge /tmp/k.json /tmp/ncu.csv >> "$OUT/t5_add.txt" 2>&1
cat "$OUT/t5_add.txt"; tail -3 "$OUT/t5_ncu.stderr"
echo "== end t=$(( $(date +%s) - START )) s"
