#!/usr/bin/env bash
# Issue 24 item 5 (~130 s): does another process's idle CUDA context on the GPU (the
# profiling worker, alive while the clean worker times) slow a host-bound call? Fresh
# processes time churn and graph_break alone, beside an idle process that touched CUDA,
# beside one that ran torch.profiler (CUPTI) once, and alone as a worker starts
# (KS_FRESH_AS_WORKER=1: Inductor's benchmark_kernel on, gc frozen), in alternation.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
W=fixtures/workloads/host_timing.py
hold() {  # $1: plain|profiled; prints the pid of an idle process holding a CUDA context
  python3 -c "
import sys, time, torch
x = torch.ones(1 << 20, device='cuda')
if sys.argv[1] == 'profiled':
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]):
        for _ in range(10): x = x * 1.0001
    torch.cuda.synchronize()
print('ready', flush=True)
time.sleep(120)" "$1" > "$OUT/hold_$1.txt" 2>&1 &
  echo $!
}
for rep in 1 2; do
  for cond in alone plain profiled as_worker; do
    pid=""
    if [ "$cond" = plain ] || [ "$cond" = profiled ]; then
      pid=$(hold "$cond")
      for _ in $(seq 60); do grep -q ready "$OUT/hold_$cond.txt" 2>/dev/null && break; sleep 0.2; done
    fi
    for fn in churn graph_break; do
      reps=$([ "$fn" = churn ] && echo 1500 || echo 15000)
      us=$(KS_FRESH_AS_WORKER=$([ "$cond" = as_worker ] && echo 1 || echo 0) timeout 60 python3 tests/support/fresh_timing.py "$W::$fn" cuda "$reps" 2>>"$OUT/stderr.txt" |
        python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read())["us_per_call"], 1))')
      echo "$rep $cond $fn $us" | tee -a "$OUT/neighbour.txt"
    done
    [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null
  done
done
