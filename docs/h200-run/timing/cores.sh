#!/usr/bin/env bash
# Issue 24 item 5 (~3 min): does a host-bound call's level follow the CPU it runs on (a
# vCPU's neighbours, the GPU's NUMA node), or the process? The host's layout, then
# cores.py (one process moving itself over every CPU, 3 rounds) per workload, then fresh
# processes pinned with taskset to two CPUs of each level.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
W=fixtures/workloads/host_timing.py
{
  echo "== lscpu"; lscpu
  echo "== nvidia-smi topo -m"; nvidia-smi topo -m
  echo "== numactl -H"; numactl -H 2>&1 | head -20
  echo "== cgroup"; cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.stat /sys/fs/cgroup/cpuset.cpus.effective 2>&1
  echo "== loadavg"; cat /proc/loadavg
  echo "== MHz"; grep MHz /proc/cpuinfo | tr -s ' ' | cut -d: -f2 | tr '\n' ' '; echo
  echo "== top"; ps -eo pid,pcpu,psr,comm --sort=-pcpu | head -8
} > "$OUT/host.txt" 2>&1
for fn in churn graph_break loader_step checkpointed; do
  timeout 90 python3 docs/h200-run/timing/cores.py "$W::$fn" cuda 3 2>>"$OUT/stderr.txt" | tee -a "$OUT/cores.txt"
done
cat /sys/fs/cgroup/cpu.stat >> "$OUT/host.txt" 2>&1
for cpu in 0 1 $(( $(nproc) / 2 )) $(( $(nproc) - 1 )); do
  for fn in churn graph_break; do
    reps=$([ "$fn" = churn ] && echo 1500 || echo 15000)
    us=$(taskset -c "$cpu" timeout 60 python3 tests/support/fresh_timing.py "$W::$fn" cuda "$reps" 2>>"$OUT/stderr.txt")
    echo "pinned $cpu $fn $us" | tee -a "$OUT/pinned.txt"
  done
done
