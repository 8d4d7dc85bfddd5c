#!/usr/bin/env bash
# Device call 2: the Triton fixture again (tarred: the results come back as few files),
# then whether the host-bound slow mode belongs to a process or a moment (modes.py).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
rm -rf /tmp/fx && timeout 200 python3 fixtures/record_real.py /tmp/fx triton_softmax 2>&1 | tail -3
cp -r /tmp/fx/triton_softmax /tmp/fx/ks_run 2>/dev/null
timeout 150 python3 -m kernelscope profile fixtures/workloads/custom_kernel.py::row_softmax --device cuda \
  --counters --no-memory --json > /tmp/fx/triton_softmax/counters.json 2> /tmp/fx/triton_softmax/counters.err
echo "counters rc=$?"
tar -C /tmp/fx -czf "$OUT/triton_softmax.tgz" triton_softmax
W=fixtures/workloads/host_timing.py
for fn in graph_break churn; do
  for i in 1 2 3; do
    echo "== $fn process $i (t=$(( $(date +%s) - START )) s)"
    timeout 60 python3 docs/h200-run/timing/modes.py "$W::$fn" 2>&1 | tail -12
  done
  for i in 1 2 3; do echo "$fn cpus 2,3: $(taskset -c 2,3 timeout 60 python3 tests/support/fresh_timing.py $W::$fn cuda 0 2>/dev/null)"; done
done 2>&1 | tee "$OUT/modes.txt"
echo "== end t=$(( $(date +%s) - START )) s"
