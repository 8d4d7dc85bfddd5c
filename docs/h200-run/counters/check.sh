#!/usr/bin/env bash
# Issue 24 item 2 on the H200: `kernelscope profile --counters` end to end (the worker under
# ncu, its CSV read, the roofline rows measured) on a few workloads. From the repo root, with
# .whl carried; results under $OUT. Look for: each report's "counters    Nsight Compute
# measured N kernels ... in S s" line, roofline rows marked "measured", and in summary.txt
# the measured DRAM bytes and FLOPs per row (aten::mm ~1.12e12 FLOPs, ~1.4 GB; the embedding
# bag ~0.28 GB; cos ~1.0 GB for both kernels). A failure prints one "counters not measured:" line.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/counters-out}
mkdir -p "$OUT"
which ncu > "$OUT/ncu_path.txt" 2>&1; ncu --version >> "$OUT/ncu_path.txt" 2>&1
D=docs/h200-run/counters
T0=$(date +%s)
left() {  # seconds this step may take: at most 110, and all of it within 330 s
  local l=$((330 - $(date +%s) + T0)); [ $l -gt 110 ] && l=110; echo $l
}
run() {  # NAME SPEC [env...]
  local name=$1 spec=$2 t; shift 2
  t=$(left); [ "$t" -lt 20 ] && { echo "$name: skipped (out of time)" >> "$OUT/times.txt"; return; }
  SECONDS=0
  env "$@" timeout "$t" python3 -m kernelscope profile "$spec" --device cuda --counters --no-lines \
    --active 3 --json > "$OUT/$name.json" 2> "$OUT/$name.stderr"
  echo "$name: rc $? in $SECONDS s" | tee -a "$OUT/times.txt"
}
run matmul_add fixtures/workloads/matmul_add.py::matmul_add KS_MATMUL_N=8192
run cos_cos fixtures/workloads/cos_cos.py::cos_cos
run embedding_bag $D/workloads.py::embedding_bag
run embedding $D/workloads.py::embedding
# the human report of one, as a user sees it
timeout "$(left)" python3 -m kernelscope profile fixtures/workloads/gemv.py::gemv --device cuda --counters \
  --no-lines --active 3 > "$OUT/gemv.txt" 2> "$OUT/gemv.stderr"; echo "gemv (text): rc $?" >> "$OUT/times.txt"
python3 - "$OUT" > "$OUT/summary.txt" 2>&1 <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for f in sorted(out.glob("*.json")):
    try:
        r = json.loads(f.read_text())
    except ValueError as e:
        print(f.stem, "no JSON:", e, (out / (f.stem + ".stderr")).read_text()[-600:]); continue
    c = r.get("counters") or {}
    print(f"== {f.stem}: {len(c.get('kernels', []))} kernels in {c.get('seconds', 0):.1f} s, "
          f"missing metrics {c.get('missing_metrics')}, error {c.get('error')!r}")
    for k in c.get("kernels", []):
        print(f"   kernel {k['name'][:60]:60} {k['duration_us']:9.1f} us  DRAM "
              f"{((k['dram_read_bytes'] or 0) + (k['dram_write_bytes'] or 0)) / 1e6:9.1f} MB  "
              f"tensor {k['tensor_flops']}  fp32 {k['fp32_flops']}  SM {k['sm_pct']}%  "
              f"mem {k['memory_pct']}%  occ {k['occupancy_pct']}%")
    for row in r.get("roofline", []):
        print(f"   row {row['name'][:40]:40} {'measured' if row['measured'] else 'model':8} "
              f"{row['gpu_us_per_step']:9.1f} us  bytes {row['bytes_per_step']}  flops "
              f"{row['flops_per_step']}  {row['bound']}  eff {row['efficiency']}")
    for fnd in r.get("findings", []):
        if fnd["code"] == "KS701":
            print("   KS701", fnd["message"][:200])
PY
t=$(left); [ "$t" -ge 30 ] && timeout "$t" python3 -m pytest -q -p no:cacheprovider \
  tests/gpu/test_counters_gpu.py > "$OUT/pytest_counters_gpu.txt" 2>&1
cat "$OUT/times.txt" "$OUT/summary.txt"; tail -3 "$OUT/pytest_counters_gpu.txt"; grep -E "counters|measured|roofline" "$OUT/gemv.txt"; tail -2 "$OUT"/*.stderr
