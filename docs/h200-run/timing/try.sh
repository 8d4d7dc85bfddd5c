#!/usr/bin/env bash
# Issue 24, items 6 and 7 on the H200 (~4 min): `kernelscope try` against the same variants
# written by hand in a fresh process (compile, CUDA graphs, bf16 autocast, channels_last,
# a GradScaler step among them), and the line pass's correction of a pure-Python line
# against the line timed directly. Run from the repo root; results under $OUT.
#   bash docs/h200-run/timing/try.sh
set -u
. docs/h200-run/timing/env.sh
LOG=$OUT/try_check.txt
: >"$LOG"
echo "== 1. kernelscope try against hand-written variants (try/hand near 1.00 is agreement)" | tee -a "$LOG"
timeout 260 python3 docs/h200-run/timing/try_vs_hand.py 2>&1 | tee -a "$LOG"

echo "== 2. the line pass's tracer cost taken out: a 2000-item comprehension" | tee -a "$LOG"
timeout 90 python3 -m kernelscope profile tests/workloads/pure_python.py::rows --device cpu --json \
  >"$OUT/pure_python.json" 2>>"$OUT/stderr.txt"
python3 - "$OUT/pure_python.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, statistics, sys, time
r = json.load(open(sys.argv[1]))
row = next(l for l in r["lines"] if l["line"] == 8)
t = []
for _ in range(50):
    s = time.perf_counter(); [float((i * 7) % 13) for i in range(2000)]; t.append((time.perf_counter() - s) * 1e6)
direct = statistics.median(t)
raw = row["self_cpu_us"] + row["tracer_us"]
print(f"tracer {r['line_tracer']}")
print(f"line 8: traced {raw:.0f} us, corrected {row['self_cpu_us']:.0f} us, timed directly "
      f"{direct:.0f} us (traced/direct {raw / direct:.1f}x, corrected/direct {row['self_cpu_us'] / direct:.2f}x)")
PY

if [ "${RUN_PYTEST:-0}" = 1 ]; then  # the same comparison as asserts (~4 min): a command of its own
  echo "== 3. the GPU test of item 6" | tee -a "$LOG"
  timeout 400 python3 -m pytest -q -p no:cacheprovider -s tests/gpu/test_try_gpu.py 2>&1 | tail -25 | tee -a "$LOG"
fi
