#!/usr/bin/env bash
# Issue 24, item 5 on the H200: why fresh processes disagree on host-bound calls (up to
# 1.7x, bimodal, in check_2026-12-02.txt). The host's CPUs, NUMA nodes and the GPU's place
# among them, then each workload in fresh processes unpinned (with the CPU each ended on)
# and pinned to each half of the CPUs. Run from the repo root; results under $OUT.
#   FNS="graph_break churn" N=6 bash docs/h200-run/timing/spread.sh
set -u
. docs/h200-run/timing/env.sh
W=fixtures/workloads/host_timing.py
LOG=$OUT/spread.txt
{
  echo "== host"
  nproc
  lscpu | grep -E 'Model name|Socket|NUMA|Thread|Core|MHz|L3|Hypervisor'
  for n in /sys/devices/system/node/node*; do echo "$(basename "$n"): $(cat "$n/cpulist")"; done
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1)
  dev=/sys/bus/pci/devices/$(echo "${bus: -12}" | tr 'A-Z' 'a-z')
  echo "GPU $bus numa_node $(cat "$dev/numa_node" 2>/dev/null) local_cpulist $(cat "$dev/local_cpulist" 2>/dev/null)"
  nvidia-smi topo -m 2>&1 | head -4
  echo "governor $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo none)"
  cat /proc/pressure/cpu 2>/dev/null
  uptime
} 2>&1 | tee -a "$LOG"
half=$(( $(nproc) / 2 ))
fresh() {  # LABEL PREFIX... : one fresh process
  local label=$1; shift
  "$@" timeout 120 python3 tests/support/fresh_timing.py "$W::$fn" cuda 0 2>/dev/null |
    python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$fn $label', round(d['us_per_call'],1), 'cpu', d['cpu'], 'reps', d['reps'])" | tee -a "$LOG"
}
for fn in ${FNS:-graph_break churn}; do
  echo "== $fn" | tee -a "$LOG"
  for i in $(seq "${N:-6}"); do fresh unpinned; done
  for i in 1 2 3; do fresh "cpus 0-$((half - 1))" taskset -c "0-$((half - 1))"; done
  for i in 1 2 3; do fresh "cpus $half-$(( $(nproc) - 1 ))" taskset -c "$half-$(( $(nproc) - 1 ))"; done
  for i in 1 2; do fresh "one cpu 2" taskset -c 2; done
done
