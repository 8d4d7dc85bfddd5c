#!/usr/bin/env bash
# One device call (issue 24, items 3 and 5): the fused-step model on two models it was not
# tuned for (heldout_fused.py), each profiled and under --counters, rows compared; then the
# host-timing test on graph_break and loader_step.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
H=docs/h200-run/tenth/heldout_fused.py
for n in resnet_sgd gpt2_adam; do
  t=$(left 330); [ "$t" -lt 60 ] && break; [ "$t" -gt 90 ] && t=90
  timeout "$t" python3 -m kernelscope profile "$H::$n" --device cuda --no-lines \
    --wait 1 --warmup 3 --active 3 --json > "/tmp/$n.model.json" 2> "/tmp/$n.model.stderr"
  echo "$n profile rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/fused.txt"
  t=$(left 330); [ "$t" -lt 60 ] && break; [ "$t" -gt 120 ] && t=120
  timeout "$t" python3 -m kernelscope profile "$H::$n" --device cuda --counters --no-lines \
    --wait 1 --warmup 3 --active 3 --json -v > "/tmp/$n.counters.json" 2> "/tmp/$n.counters.stderr"
  echo "$n counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/fused.txt"
  tail -n 4 "/tmp/$n.counters.stderr" >> "$OUT/fused.txt"
  python3 docs/h200-run/unseen/model_vs_counters.py "/tmp/$n.model.json" "/tmp/$n.counters.json" \
    >> "$OUT/fused.txt" 2>&1
done
tar czf "$OUT/fused_json.tgz" -C /tmp $(cd /tmp && ls resnet_sgd.*.json gpt2_adam.*.json 2>/dev/null)
grep -E "fused|_amp_|rc=|div |error" "$OUT/fused.txt" | cut -c1-200
timeout "$(left 590)" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_host_timing_gpu.py \
  -rA -k "graph_break or loader_step" > "$OUT/host_timing.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/host_timing.txt"
grep -E "graph_break:|loader_step:|passed|failed|skipped|SKIP|rc=" "$OUT/host_timing.txt" | cut -c1-900
echo "== end t=$(( $(date +%s) - START )) s"
