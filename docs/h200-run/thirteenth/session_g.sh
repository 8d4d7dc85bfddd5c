#!/usr/bin/env bash
# One short device call: GPT-NeoX's training step (fixtures/workloads/seventh.py, 8 x 512
# tokens: 4,096 indices, past the one-kernel path) under --counters-match for the kernels of
# its embedding's backward (the sort, the segments, the partial sums and their scatter), so
# costs/embedding_backward.py's sorting estimate meets Nsight Compute.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
P='embedding|Radix|Scan|segment|partial|grad_weight|sum_and_scatter|RunLength|nique|Select'
timeout 260 python3 -m kernelscope profile fixtures/workloads/seventh.py::neox_train \
  --device cuda --counters-match "$P" --no-lines --wait 1 --warmup 3 --active 3 \
  --json -v > /tmp/g.json 2> /tmp/g.err
echo "profile rc=$? t=$(( $(date +%s) - START )) s" > "$OUT/embedding_g.txt"
tail -n 3 /tmp/g.err >> "$OUT/embedding_g.txt"
python3 - /tmp/g.json >> "$OUT/embedding_g.txt" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); c = r["counters"]
print("functions", c.get("functions"), "kernels", len(c["kernels"]), "seconds %.1f" % c["seconds"], repr(c["error"]))
for k in c["kernels"]:
    print("  %-90s read %.4e write %.4e l2w %s us %.1f" % (k["name"][:90], k["dram_read_bytes"] or 0, k["dram_write_bytes"] or 0, k.get("l2_write_bytes"), k["duration_us"]))
for x in r["roofline"]:
    if x["measured"]:
        print("row", x["name"], x.get("shapes", ""), "%.4e" % x["bytes_per_step"], "%.1f us" % x["gpu_us_per_step"])
PY
gzip -c /tmp/g.json > "$OUT/embedding_g.json.gz"
cut -c1-220 "$OUT/embedding_g.txt"
echo "== end t=$(( $(date +%s) - START )) s"
