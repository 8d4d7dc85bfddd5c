#!/usr/bin/env bash
# (The QuietCpus trial it ran was reverted after: docs/h200-run/fifth/host_timing_quiet_cpus.txt.)
# One device call (issue 24, ~6 min): the host-timing GPU test with the timing thread kept to
# the CPUs whose reference loop reads quiet (worker/program/quiet_cpus.py), with the host's
# busiest threads sampled each second beside it (top -H) and the CPU topology; then RAFT's
# cuDNN grid sampler under Nsight Compute grouped by input dims. Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
lscpu -e > "$OUT/topology.txt" 2>&1
( while true; do
    echo "-- $(date +%s.%N | cut -c1-14)"
    top -H -b -n 1 -d 0.5 -w 160 -o %CPU | awk 'NR>7 && $9+0 >= 20 {print $1, $9, $12}' | head -8 |
      while read -r tid cpu comm; do
        echo "$tid $cpu $comm cpu$(awk '{print $39}' /proc/$tid/stat 2>/dev/null)"
      done
    sleep 0.5
  done ) > "$OUT/busy_threads.txt" 2>&1 &
SAMPLER=$!
timeout 330 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
kill $SAMPLER 2>/dev/null
grep -E "(churn|graph_break|checkpointed|loader_step):|passed|failed" "$OUT/host_timing.txt" | cut -c1-400
T=docs/h200-run/unseen/op_vs_ncu.py
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
timeout 60 python3 $T fourth:raft aten::cudnn_grid_sampler bilinear_sampler list "$OUT/grid.json" \
  > "$OUT/raft_grid_ncu.txt" 2>&1
timeout 120 ncu --clock-control none --profile-from-start off --csv --kernel-name regex:bilinear_sampler \
  --metrics $M python3 $T fourth:raft aten::cudnn_grid_sampler bilinear_sampler ncu > "$OUT/grid.csv" 2>/dev/null
python3 $T fourth:raft aten::cudnn_grid_sampler bilinear_sampler merge "$OUT/grid.json" "$OUT/grid.csv" \
  >> "$OUT/raft_grid_ncu.txt" 2>&1
cat "$OUT/raft_grid_ncu.txt" | cut -c1-250
awk '/^--/{n++} END{print n, "samples"}' "$OUT/busy_threads.txt"; sort "$OUT/busy_threads.txt" | grep -v "^--" | awk '{print $3}' | sort | uniq -c | sort -rn | head -15
echo "== end t=$(( $(date +%s) - START )) s"
