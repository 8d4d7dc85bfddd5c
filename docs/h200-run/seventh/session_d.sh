#!/usr/bin/env bash
# One device call (issue 24, ~5 min): 1) churn in fresh processes alone and beside a second
# process holding an idle CUDA context (does another context slow cudaMalloc/cudaFree, as the
# worker beside its sibling might be?); 2) LeViT under --counters again, now with the L2
# writes (its mm rows read 0.34-0.47 of the model in DRAM alone); 3) try on LeViT with
# compile and bf16 (compile fails there: the timed-rounds fix, live) and DenseNet's
# channels_last against the hand variant again. bash this from the root; results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
F=tests/support/fresh_timing.py
C=fixtures/workloads/host_timing.py::churn
for i in 1 2; do
  timeout 60 python3 $F $C cuda 3000 2>/dev/null | tail -1 | sed "s/^/alone /" >> "$OUT/churn.txt"
done
python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(60)" &
HOLDER=$!
sleep 8
for i in 1 2; do
  timeout 60 python3 $F $C cuda 3000 2>/dev/null | tail -1 | sed "s/^/beside /" >> "$OUT/churn.txt"
done
kill $HOLDER 2>/dev/null
timeout 60 python3 $F $C cuda 3000 2>/dev/null | tail -1 | sed "s/^/alone /" >> "$OUT/churn.txt"
echo "churn t=$(( $(date +%s) - START )) s" >> "$OUT/churn.txt"
cut -c1-200 "$OUT/churn.txt"
timeout 110 python3 -m kernelscope profile fixtures/workloads/seventh.py::levit --device cuda \
  --counters --no-lines --wait 1 --warmup 3 --active 3 --json > "$OUT/levit.counters.json" \
  2> /tmp/levit.stderr
echo "levit counters rc=$? t=$(( $(date +%s) - START )) s"
tail -3 /tmp/levit.stderr
timeout 100 python3 -m kernelscope try fixtures/workloads/seventh.py::levit --device cuda \
  --variants compile,bf16 > "$OUT/try_levit.txt" 2>&1
echo "try levit rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try_levit.txt"
tail -c 2500 "$OUT/try_levit.txt"
t=$(( 330 - ($(date +%s) - START) ))
[ "$t" -gt 60 ] && timeout "$t" python3 docs/h200-run/seventh/try_models.py \
  densenet_train:channels_last > "$OUT/try_densenet.txt" 2>&1
grep -v '^{' "$OUT/try_densenet.txt" | tail -8 | cut -c1-300
echo "== end t=$(( $(date +%s) - START )) s"
