#!/usr/bin/env bash
# Issue 26 on the H200: the memory pass of a small transformer's training step (AdamW, bf16
# autocast), plain and with a checkpointed block, against max_memory_allocated measured in a
# fresh process (truth.py), with the known parameter/gradient/AdamW sizes; then the batch
# forecast, checked by a run; an out-of-memory's live lines. From the repo root: bash docs/h200-run/memory/check.sh
# (results under $OUT, or /tmp/memory-out). About 3-4 minutes.
set -u
OUT=${OUT:-/tmp/memory-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
W=docs/h200-run/memory/workload.py
for fn in train_step train_step_ckpt; do
  timeout 150 python3 -m kernelscope profile "$W::$fn" --device cuda --no-lines --json \
    --wait 0 --warmup 2 --active 2 > "$OUT/$fn.json" 2> "$OUT/$fn.err"
  echo "profile $fn rc=$?"
  timeout 60 python3 docs/h200-run/memory/truth.py "$fn" 16 > "$OUT/$fn.truth.json" 2> "$OUT/$fn.truth.err"
  python3 docs/h200-run/memory/compare.py "$OUT/$fn.json" "$OUT/$fn.truth.json" | tee "$OUT/$fn.compare.txt"
done
timeout 150 python3 -m kernelscope profile "$W::train_step" --device cuda --no-lines \
  --wait 0 --warmup 2 --active 2 > "$OUT/train_step.txt" 2>&1
sed -n '/^memory pass/,/^trace/p' "$OUT/train_step.txt" | cut -c1-160
timeout 200 python3 -m kernelscope memory "$W::train_step" --device cuda --batch-sizes 4,8,16 \
  --room 8G --json > "$OUT/forecast.json" 2> "$OUT/forecast.err"
echo "memory rc=$?"
python3 - "$OUT/forecast.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
print({k: f.get(k) for k in ("model", "largest_batch", "predicted", "checked_peak_bytes", "fits", "check", "not_linear")})
print([(p["batch_size"], p["peak_bytes"]) for p in f["points"]])
PY
# An out-of-memory (batch 20000 of 256 tokens asks for terabytes): the failure, run again with
# the history on, names what was live at it.
timeout 120 python3 -m kernelscope profile "$W::train_step" --device cuda --no-lines \
  --batch-size 20000 --wait 0 --warmup 1 --active 1 > "$OUT/oom.txt" 2>&1
echo "oom rc=$? (1 expected)"; head -20 "$OUT/oom.txt" | cut -c1-160
tail -3 "$OUT"/*.err
