#!/usr/bin/env bash
# One short device call: ConvNeXt-V2's AdamW step under `--counters-match multi_tensor`, so
# its foreach kernels (none among the 64 costliest: session_a.sh) are the ones measured; the
# live rows and the fixture's raw rows (fixtures/convnextv2_adamw) against them.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
D=/tmp/f/convnextv2_train; mkdir -p "$D"; cp fixtures/convnextv2_adamw/raw.json.gz "$D/"
timeout 240 python3 -m kernelscope profile fixtures/workloads/thirteenth.py::convnextv2_train \
  --device cuda --counters-match multi_tensor --no-lines --wait 1 --warmup 3 --active 3 \
  --json -v > /tmp/match.json 2> /tmp/match.err
echo "profile rc=$? t=$(( $(date +%s) - START )) s" > "$OUT/match.txt"
tail -n 4 /tmp/match.err >> "$OUT/match.txt"
python3 - /tmp/match.json >> "$OUT/match.txt" 2>&1 <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["counters"]
print("match", repr(c.get("match")), "functions", c.get("functions"), "kernels", len(c["kernels"]),
      "seconds %.1f" % c["seconds"], "error", repr(c["error"]))
PY
python3 docs/h200-run/thirteenth/optimizer_rows.py "$D" /tmp/match.json >> "$OUT/match.txt" 2>&1
python3 -m kernelscope profile fixtures/workloads/thirteenth.py::convnextv2_train --device cuda \
  --counters-match 'no_such_kernel_xyz' --no-lines --wait 0 --warmup 1 --active 1 \
  > /tmp/none.txt 2> /tmp/none.err
echo "matching none rc=$?" >> "$OUT/match.txt"; grep -h "counters" /tmp/none.txt /tmp/none.err >> "$OUT/match.txt"
gzip -c /tmp/match.json > "$OUT/match.json.gz"
cut -c1-240 "$OUT/match.txt"
echo "== end t=$(( $(date +%s) - START )) s"
