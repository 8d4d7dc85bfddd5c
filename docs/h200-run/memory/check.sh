#!/usr/bin/env bash
# Issue 26 on the H200: the memory pass of training steps with AdamW and bf16 autocast — a
# small transformer plain and with a checkpointed block (workload.py), a transformers GPT-2
# and a timm ViT-B/16 built from their configs with checkpointed blocks (library.py) —
# against max_memory_allocated measured in a fresh process (truth.py), with the known
# parameter/gradient/AdamW sizes; then the batch forecast of GPT-2, checked by a run; an
# out-of-memory's live lines. From the repo root: bash docs/h200-run/memory/check.sh
# (results under $OUT, or /tmp/memory-out). About 5 minutes.
set -u
OUT=${OUT:-/tmp/memory-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
D=docs/h200-run/memory
check() {  # MODULE FUNCTION BATCH
  local mod=$1 fn=$2 batch=$3
  timeout 200 python3 -m kernelscope profile "$D/$mod.py::$fn" --device cuda --no-lines --json \
    --batch-size "$batch" --wait 0 --warmup 2 --active 2 > "$OUT/$fn.json" 2> "$OUT/$fn.err"
  echo "profile $fn rc=$?"; [ -s "$OUT/$fn.err" ] && tail -15 "$OUT/$fn.err" | cut -c1-200
  timeout 120 python3 $D/truth.py "$fn" "$batch" "$mod" > "$OUT/$fn.truth.json" 2> "$OUT/$fn.truth.err"
  python3 $D/compare.py "$OUT/$fn.json" "$OUT/$fn.truth.json" | tee "$OUT/$fn.compare.txt"
}
# CASES="module:function:batch ..." runs a few of them
for c in ${CASES:-workload:train_step:16 workload:train_step_ckpt:16 library:gpt2_step:8 library:vit_step:32}; do
  IFS=: read -r mod fn batch <<<"$c"
  check "$mod" "$fn" "$batch"
done
for fn in train_step_ckpt gpt2_step; do
  timeout 200 python3 -m kernelscope profile "$D/$( [ $fn = gpt2_step ] && echo library || echo workload).py::$fn" \
    --device cuda --no-lines --wait 0 --warmup 2 --active 2 > "$OUT/$fn.txt" 2>&1
  sed -n '/^memory pass/,/^trace/p' "$OUT/$fn.txt" | cut -c1-160
  grep -E "^(KS13|  KS13)|KS13[123]" "$OUT/$fn.txt" | head -5 | cut -c1-200
done
timeout 300 python3 -m kernelscope memory "$D/library.py::gpt2_step" --device cuda --batch-sizes 2,4,8 \
  --room 24G --json > "$OUT/forecast.json" 2> "$OUT/forecast.err"
echo "memory rc=$?"; tail -5 "$OUT/forecast.err"
python3 - "$OUT/forecast.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
print({k: f.get(k) for k in ("model", "largest_batch", "predicted", "checked_peak_bytes", "fits", "check", "not_linear")})
print([(p["batch_size"], p["peak_bytes"]) for p in f["points"]])
PY
