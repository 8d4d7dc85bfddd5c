#!/usr/bin/env bash
# Issue 24, item 4 on the H200 (~5 min): Inductor's own kernel estimates (the worker sets
# TORCHINDUCTOR_BENCHMARK_KERNEL=1) against Nsight Compute's counters: a max-autotune MLP
# block's matmul templates (FLOPs) and a pointwise kernel passed a buffer it reads half of
# (bytes). Each target runs twice: the model's rows, then --counters. Results under $OUT.
#   [FNS="mlp_triton"] bash docs/h200-run/inductor_check.sh
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
W=fixtures/workloads/autotuned.py
LOG=$OUT/inductor_check.txt
: >"$LOG"
for fn in ${FNS:-top_half mlp mlp_triton}; do
  for mode in model counters; do
    extra=(); [ "$mode" = counters ] && extra=(--counters)
    timeout 240 python3 -m kernelscope profile "$W::$fn" --device cuda --json --no-lines \
      --no-memory "${extra[@]}" >"$OUT/$fn.$mode.json" 2>>"$OUT/stderr.txt"
    echo "== $fn $mode rc=$?" | tee -a "$LOG"
    python3 - "$OUT/$fn.$mode.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))
print("output has 'Compiled module path':", "Compiled module path" in r.get("output", ""))
for row in r["roofline"][:4]:
    keep = ("name", "kind", "estimate", "bound", "flops_per_step", "bytes_per_step",
            "gpu_us_per_step", "efficiency", "roof")
    print({k: row.get(k) for k in keep})
for k in ((r.get("counters") or {}).get("kernels") or [])[:4]:
    print("ncu", {x: k.get(x) for x in ("name", "dram_read_bytes", "dram_write_bytes", "tensor_flops", "fp32_flops", "duration_us")})
PY
  done
done
