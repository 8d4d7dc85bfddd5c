#!/usr/bin/env bash
# One device call (NEXT.md's first item): what the twelfth session left of the host-timing
# test (loader_step's 5 rounds, checkpointed pinned to one vCPU in 10), then ResNet-18's
# training step (fixtures/resnet18_sgd) timed at the host's speed in three fresh processes
# against the clean worker's 9.91 ms (the recorder's unguarded fresh process read 12.17).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
cat /proc/loadavg > "$OUT/host_timing.txt"
timeout 400 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py -rA \
  -k "loader_step or one_vcpu" >> "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -oE "^[a-z_]+( on vCPU [0-9]+)?:|at the host.*|.*(passed|failed|rc=).*" "$OUT/host_timing.txt" | cut -c1-300
S=fixtures/resnet18_sgd/heldout_fused.py::resnet_sgd
for i in 1 2 3; do
  [ "$(left 560)" -gt 40 ] || break
  PYTHONPATH=server timeout "$(left 580)" python3 tests/support/fresh_timing.py "$S" cuda 100 \
    >> "$OUT/resnet18_fresh.txt" 2>&1
done
cut -c1-400 "$OUT/resnet18_fresh.txt"
echo "== end t=$(( $(date +%s) - START )) s"
