#!/usr/bin/env bash
# One device call (~5 min): in place with no --skip on a GPU, where settling judges the
# completed CUDA events. pytorch/examples' DDP tutorial (.tries/ddpt, carried) in place twice
# against its Trainer._run_batch timed by CUDA events in a fresh torchrun run past 50 calls
# (784.0 us on an H100, 2026-12-06; --skip 5 read 1.70x, --skip 60 0.876x), then minGPT's
# GPT.forward in place with no --skip.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/settle.txt"
summary() {  # a --json report's timing and settling, into settle.txt
  python3 - "$1" >> "$OUT/settle.txt" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timing"]
keys = ("unprofiled_us_per_call", "unprofiled_method", "unprofiled_reps", "unprofiled_p10_us",
        "unprofiled_p90_us", "cuda_us_per_step", "wall_us_per_step")
print({k: t.get(k) for k in keys})
def find(o, key):
    if isinstance(o, dict):
        if key in o:
            return o[key]
        for v in o.values():
            f = find(v, key)
            if f is not None:
                return f
print("settling:", find(r, "settling") or find(r, "unprofiled_settling"))
print("verdict:", (r.get("verdict") or {}).get("summary"))
PY
}
T=.tries/ddpt; H=$PWD/docs/h200-run/inprog_truth.py
(cd "$T" && timeout 100 torchrun --standalone --nproc-per-node 1 "$H" multigpu_torchrun.py \
  Trainer._run_batch --skip 50 --cuda -- 4 10 2>&1 | grep "^rank") >> "$OUT/settle.txt"
for i in 1 2; do
  (cd "$T" && timeout 120 python3 -m kernelscope profile multigpu_torchrun.py::Trainer._run_batch \
    --via "torchrun --standalone --nproc_per_node=1 multigpu_torchrun.py 40 100" --in-place \
    --json --no-memory > /tmp/ddpt$i.json 2> /tmp/ddpt$i.err)
  echo "tutorial in place, no --skip, run $i: rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/settle.txt"
  tail -n 3 /tmp/ddpt$i.err >> "$OUT/settle.txt"
  summary /tmp/ddpt$i.json
  cp /tmp/ddpt$i.json "$OUT/" 2>/dev/null
done
(cd "$T" && timeout 100 torchrun --standalone --nproc-per-node 1 "$H" multigpu_torchrun.py \
  Trainer._run_batch --skip 50 --cuda -- 4 10 2>&1 | grep "^rank") >> "$OUT/settle.txt"
cd tests/workloads/minigpt
timeout 200 python3 -m kernelscope profile model.py::GPT.forward --via \
  "train.py config/tiny.py --max_iters=60 --eval_interval=1000 --device=cuda" \
  --in-place --json > /tmp/forward.json 2> /tmp/forward.err
echo "minGPT GPT.forward in place, no --skip: rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/settle.txt"
tail -n 3 /tmp/forward.err >> "$OUT/settle.txt"
cd - >/dev/null
summary /tmp/forward.json
cp /tmp/forward.json "$OUT/" 2>/dev/null
cat "$OUT/settle.txt" | cut -c1-600
echo "== end t=$(( $(date +%s) - START )) s"
