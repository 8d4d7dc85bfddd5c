#!/usr/bin/env bash
# One device call (issue 24, NEXT.md's second item, then its first): ResNet-18 training with
# cuDNN's two-pass batch norm kernels recorded as a trace fixture (fixtures/resnet18_sgd gets
# trace.json.gz beside its counters; record_real.py also times the call with CUDA events in a
# fresh process: the worker's figure against it), measured again under --counters; then
# try against the hand-written variants with the fast-block anchor (tests/gpu/test_try_gpu.py).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
timeout 200 python3 fixtures/record_real.py /tmp/s11 resnet18_sgd > "$OUT/record.txt" 2>&1
echo "record rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
tail -n 4 "$OUT/record.txt"
zcat /tmp/s11/resnet18_sgd/trace.json.gz | grep -oE '"name": "[^"]*(bn_fw|bn_bw|max_pool|multi_tensor)[^"]{0,60}' \
  | sort | uniq -c | cut -c1-200 >> "$OUT/record.txt"
S=fixtures/resnet18_sgd/heldout_fused.py::resnet_sgd
t=$(left 330); [ "$t" -gt 140 ] && t=140
timeout "$t" python3 -m kernelscope profile "$S" --device cuda --counters --no-lines \
  --wait 1 --warmup 3 --active 3 --json -v > /tmp/resnet18_sgd.counters.json 2> /tmp/resnet18_sgd.counters.stderr
echo "counters rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/record.txt"
tail -n 6 /tmp/resnet18_sgd.counters.stderr >> "$OUT/record.txt"
python3 docs/h200-run/unseen/model_vs_counters.py /tmp/s11/resnet18_sgd/report.json \
  /tmp/resnet18_sgd.counters.json >> "$OUT/record.txt" 2>&1
cp /tmp/resnet18_sgd.counters.json /tmp/s11/resnet18_sgd/counters.json 2>/dev/null
tar czf "$OUT/fixture.tgz" -C /tmp/s11 resnet18_sgd 2>/dev/null
grep -E "bn_|max_pool|fused|rc=|MB fresh" "$OUT/record.txt" | cut -c1-220
timeout "$(left 590)" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_try_gpu.py -rA \
  > "$OUT/try.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try.txt"
grep -E "ratio|PASSED|FAILED|^E  |passed|failed|rc=" "$OUT/try.txt" | cut -c1-300 | tail -24
echo "== end t=$(( $(date +%s) - START )) s"
