#!/usr/bin/env bash
# One device call (issue 24, 2026-12-04 night): where the host-bound compiled LayerNorm's
# 1.5x between try and the hand script comes from (the vCPU a thread runs on? two cache
# entries?), then the fused AdamW steps recorded (fixtures) and under --counters.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
{ nvidia-smi topo -m; lscpu | grep -Ei "numa|socket|model name|^cpu\(s\)|thread|core"
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat $d/vendor 2>/dev/null)" = "0x10de" ] && echo "$d numa $(cat $d/numa_node) local $(cat $d/local_cpulist)"
  done; nproc; cat /proc/loadavg; } > "$OUT/topology.txt" 2>&1
cat "$OUT/topology.txt"
timeout 150 python3 docs/h200-run/tenth/cpu_sweep.py > "$OUT/cpu_sweep.txt" 2>&1
echo "sweep rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/cpu_sweep.txt"
tail -n 5 "$OUT/cpu_sweep.txt"
timeout "$(left 330)" python3 fixtures/record_real.py /tmp/s10 adamw_fused adamw_fused_scaled > "$OUT/record.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
tail -n 6 "$OUT/record.txt"
for n in adamw_fused adamw_fused_scaled; do
  zcat /tmp/s10/$n/trace.json.gz | grep -o '"name": "[^"]*multi_tensor_apply_kernel[^"]*"' | sort | uniq -c | cut -c1-400 >> "$OUT/record.txt"
done
counters() {  # NAME SPEC
  local t; t=$(left 580); [ "$t" -gt 130 ] && t=130; [ "$t" -lt 40 ] && return
  timeout "$t" python3 -m kernelscope profile "$2" --device cuda --counters --no-lines \
    --wait 1 --warmup 3 --active 3 --json -v > "/tmp/$1.counters.json" 2> "/tmp/$1.counters.stderr"
  echo "$1 counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/counters.txt"
  tail -n 15 "/tmp/$1.counters.stderr" >> "$OUT/counters.txt"
  python3 docs/h200-run/unseen/model_vs_counters.py /tmp/s10/$1/report.json \
    "/tmp/$1.counters.json" >> "$OUT/counters.txt" 2>&1
}
counters adamw_fused fixtures/workloads/fused_step.py::adamw_fused
counters adamw_fused_scaled fixtures/workloads/fused_step.py::adamw_fused_scaled
tar czf "$OUT/fixtures.tgz" -C /tmp/s10 adamw_fused adamw_fused_scaled 2>/dev/null
tar czf "$OUT/counters_json.tgz" -C /tmp adamw_fused.counters.json adamw_fused_scaled.counters.json 2>/dev/null
grep -iE "fused|multi_tensor|rc=" "$OUT/counters.txt" | cut -c1-260
echo "== end t=$(( $(date +%s) - START )) s"
