#!/usr/bin/env bash
# One device call (~3 min): in place with no --skip after the steps are timed to 20 (then
# while they settle), on a GPU. The DDP tutorial (.tries/ddpt) twice against its truth;
# minGPT's GPT.forward; pytorch/examples' dcgan (.tries/pex/dcgan, --dataset fake, two
# DataLoader workers, --accel), whose Discriminator.forward the loop calls from three lines,
# against its calls timed by CUDA events in a fresh run, line by line.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/settle_b.txt"
summary() {  # a --json report's timing, settling and sites, into settle_b.txt
  python3 - "$1" >> "$OUT/settle_b.txt" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timing"]
keys = ("unprofiled_us_per_call", "unprofiled_reps", "unprofiled_p10_us", "unprofiled_p90_us",
        "unprofiled_settling", "cuda_us_per_step", "wall_us_per_step")
print({k: t.get(k) for k in keys})
print("sites:", (r.get("call_site") or {}).get("sites"), "| modes:", (r.get("call_site") or {}).get("modes"))
print("verdict:", (r.get("verdict") or {}).get("summary"))
print("findings:", [f.get("code") for f in r.get("findings", [])])
PY
}
T=.tries/ddpt; H=$PWD/docs/h200-run/inprog_truth.py
(cd "$T" && timeout 100 torchrun --standalone --nproc-per-node 1 "$H" multigpu_torchrun.py \
  Trainer._run_batch --skip 50 --cuda -- 4 10 2>&1 | grep "^rank") >> "$OUT/settle_b.txt"
for i in 1 2; do
  (cd "$T" && timeout 120 python3 -m kernelscope profile multigpu_torchrun.py::Trainer._run_batch \
    --via "torchrun --standalone --nproc_per_node=1 multigpu_torchrun.py 40 100" --in-place \
    --json --no-memory > /tmp/ddpt$i.json 2> /tmp/ddpt$i.err)
  echo "tutorial in place, no --skip, run $i: rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/settle_b.txt"
  tail -n 2 /tmp/ddpt$i.err >> "$OUT/settle_b.txt"
  summary /tmp/ddpt$i.json
done
cd tests/workloads/minigpt
timeout 200 python3 -m kernelscope profile model.py::GPT.forward --via \
  "train.py config/tiny.py --max_iters=60 --eval_interval=1000 --device=cuda" \
  --in-place --json > /tmp/forward.json 2> /tmp/forward.err
echo "minGPT GPT.forward in place, no --skip: rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/settle_b.txt"
tail -n 2 /tmp/forward.err >> "$OUT/settle_b.txt"
cd - >/dev/null
summary /tmp/forward.json
D=.tries/pex/dcgan; A="--dataset fake --workers 2 --batchSize 16 --niter 1 --outf /tmp/dcout --accel"
(cd "$D" && timeout 150 python3 "$H" main.py Discriminator.forward --skip 20 --cuda --by-line \
  -- $A 2>&1 | grep -E "^(rank|line)") >> "$OUT/settle_b.txt"
(cd "$D" && timeout 150 python3 -m kernelscope profile main.py::Discriminator.forward \
  --via "python main.py $A" --in-place --json --no-memory > /tmp/dcgan.json 2> /tmp/dcgan.err)
echo "dcgan D.forward in place, no --skip: rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/settle_b.txt"
tail -n 2 /tmp/dcgan.err >> "$OUT/settle_b.txt"
summary /tmp/dcgan.json
(cd "$D" && timeout 150 python3 -m kernelscope profile main.py::Discriminator.forward \
  --via "python main.py $A" --in-place > "$OUT/dcgan.txt" 2>&1)
cp /tmp/ddpt1.json /tmp/forward.json /tmp/dcgan.json "$OUT/" 2>/dev/null
cut -c1-700 "$OUT/settle_b.txt"
echo "== end t=$(( $(date +%s) - START )) s"
