#!/usr/bin/env bash
# One short device call: Whisper's training step (fixtures/workloads/fourth.py, bf16
# autocast, AdamW), never checked against counters, under --counters-match for its
# embeddings' backward, layer norms, softmaxes and cats; the trace comes back too, for the
# model of each measured row to be read beside it.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
P='embedding|layer_norm|GammaBeta|SoftMax|softmax|CatArray'
timeout 190 python3 -m kernelscope profile fixtures/workloads/fourth.py::whisper_train \
  --device cuda --counters-match "$P" --counters-limit 160 --no-lines --no-memory \
  --wait 1 --warmup 2 --active 2 --json -v > /tmp/h.json 2> /tmp/h.err
echo "profile rc=$? t=$(( $(date +%s) - START )) s" > "$OUT/whisper_h.txt"
tail -n 3 /tmp/h.err >> "$OUT/whisper_h.txt"
python3 - /tmp/h.json "$OUT" >> "$OUT/whisper_h.txt" 2>&1 <<'PY'
import json, shutil, sys
r = json.load(open(sys.argv[1])); c = r["counters"]
print("functions", c.get("functions"), "kernels", len(c["kernels"]), "seconds %.1f" % c["seconds"], repr(c["error"]))
for x in r["roofline"]:
    if x["measured"]:
        print("row %-40s %-44s %.4e %.1f us" % (x["name"], x.get("shapes", "")[:44], x["bytes_per_step"], x["gpu_us_per_step"]))
shutil.copy(r["trace"]["path"], sys.argv[2] + "/whisper_trace.json.gz")
PY
gzip -c /tmp/h.json > "$OUT/whisper_h.json.gz"
cut -c1-200 "$OUT/whisper_h.txt"
echo "== end t=$(( $(date +%s) - START )) s"
