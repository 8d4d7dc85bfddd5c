#!/usr/bin/env bash
# Issue 24 item 5 (~4 min): every sample of 2 s of timing in four fresh processes per
# host-bound workload, to pick an estimator the host's slow spells do not decide.
set -u
. docs/h200-run/timing/env.sh
export PYTHONPATH=$PYTHONPATH:$PWD/tests/support
for fn in churn graph_break checkpointed loader_step; do
  for i in 1 2 3 4; do
    timeout 90 python3 docs/h200-run/timing/blocks.py fixtures/workloads/host_timing.py::$fn 2.0 \
      >>"$OUT/blocks.jsonl" 2>>"$OUT/stderr.txt" || echo "$fn $i failed" >>"$OUT/stderr.txt"
  done
done
python3 docs/h200-run/timing/estimators.py "$OUT/blocks.jsonl" | tee "$OUT/estimators.txt"
