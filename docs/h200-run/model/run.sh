#!/usr/bin/env bash
# Issue 24, the cost model on the H200: raw traces of the op families whose bytes were
# overcounted, analyzed (no row may read above 100 %); an L2-resident copy's rate; and where
# ncu runs, Nsight Compute's DRAM bytes per kernel of a few of them beside the model's.
# From the repo root, with .whl carried: bash docs/h200-run/model/run.sh   (results in $OUT)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/model-out}; mkdir -p "$OUT"
timeout 210 python3 docs/h200-run/model/patterns.py "$OUT" > "$OUT/patterns.txt" 2>&1
cat "$OUT/patterns.txt"
if command -v ncu > /dev/null; then
  for p in embedding_bag gather_gpt2 copy_fp32_to_bf16; do
    timeout 30 ncu --clock-control none --profile-from-start off --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      python3 docs/h200-run/model/patterns.py "$OUT" one "$p" > "$OUT/ncu_$p.csv" 2>&1
    echo "== ncu $p"; grep -E "dram__bytes|gpu__time" "$OUT/ncu_$p.csv" | cut -c1-220 | tail -6
  done
fi
rm -rf "$OUT/traces"
