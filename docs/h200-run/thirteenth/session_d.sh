#!/usr/bin/env bash
# One short device call (what 634 s of device time allow after a machine was taken back):
# timm's ConvNeXt-V2 nano under timm's AdamW with two parameter groups. A raw torch.profiler
# trace and CUDA events in a fresh process (record_real.py's FRESH), then `--counters`; the
# raw trace's foreach rows (lists from AccumulateGrad shapes) against Nsight Compute.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
S=fixtures/workloads/thirteenth.py::convnextv2_train
mkdir -p /tmp/s13/convnextv2_train
timeout 120 python3 -c "import sys; sys.path.insert(0, 'fixtures'); import record_real as r; \
sys.argv = ['fresh', '$S', '/tmp/s13/convnextv2_train', '2']; exec(r.FRESH)" \
  > "$OUT/fresh.txt" 2>&1
echo "fresh rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/fresh.txt"
cut -c1-300 "$OUT/fresh.txt"
timeout "$(left 290)" python3 -m kernelscope profile "$S" --device cuda --counters --no-lines \
  --wait 1 --warmup 3 --active 3 --json -v > /tmp/c.json 2> /tmp/c.stderr
echo "counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/counters.txt"
tail -n 6 /tmp/c.stderr >> "$OUT/counters.txt"
python3 docs/h200-run/thirteenth/optimizer_rows.py /tmp/s13/convnextv2_train /tmp/c.json \
  > "$OUT/optimizer_rows.txt" 2>&1
python3 docs/h200-run/thirteenth/summary.py "$OUT/fresh.txt" /tmp/s13/convnextv2_train/raw.json.gz \
  /tmp/c.json >> "$OUT/counters.txt" 2>&1
cp /tmp/c.json "$OUT/counters.json"; cp /tmp/s13/convnextv2_train/raw.json.gz "$OUT/" 2>/dev/null
cat "$OUT/counters.txt" | cut -c1-200; cut -c1-220 "$OUT/optimizer_rows.txt"
echo "== end t=$(( $(date +%s) - START )) s"
