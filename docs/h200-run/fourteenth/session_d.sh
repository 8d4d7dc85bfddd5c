#!/usr/bin/env bash
# One device call (~6 min, wants the H200): the host-timing test with the clean worker's
# timing floor at 0.5 s (KERNELSCOPE_TEST_TIMING_MIN_S; CLEAN_TIMING_MIN_S is 2 s): if every
# workload stays within 10 % of its fresh processes there, the floor can come down (the
# loop-latency bench: 1.7 and 1.5 s less a job, fourteenth/README.md).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/host_timing_05.txt"
cat /proc/loadavg >> "$OUT/host_timing_05.txt"
KERNELSCOPE_TEST_TIMING_MIN_S=0.5 timeout 540 python3 -m pytest -q -s -p no:cacheprovider \
  tests/gpu/test_host_timing_gpu.py -rA >> "$OUT/host_timing_05.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing_05.txt"
grep -oE "^[a-z_]+( on vCPU [0-9]+)?:|at the host.*|.*(passed|failed|rc=).*" \
  "$OUT/host_timing_05.txt" | cut -c1-300
