#!/usr/bin/env bash
# One short device call: a program torchrun starts, on the GPU under NCCL (one rank: one GPU
# is lent), profiled with --via "torchrun ..." against its train_step timed by CUDA events in
# fresh torchrun runs that never profiled (ddp_truth.py), alternating, twice each.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
summary() {  # a --json report's timing and verdict, one line, into ddp_b.txt
  python3 - "$1" >> "$OUT/ddp_b.txt" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timing"]
print("kernelscope:", r["call_site"]["via"], "| unprofiled %.1f us (%s, %d reps) | cuda/step %.1f us"
      % (t["unprofiled_us_per_call"], t["unprofiled_method"], t["unprofiled_reps"],
         t.get("cuda_us_per_step") or 0), "| verdict:", (r.get("verdict") or {}).get("summary"))
PY
}
A="--device cuda --width 2048 --steps 400"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/ddp_b.txt"
for i in ${DDP_RUNS:-1}; do
  timeout 100 torchrun --nproc-per-node 1 docs/h200-run/fifteenth/ddp_truth.py $A 2>&1 \
    | grep "^rank" >> "$OUT/ddp_b.txt"
  timeout 150 python3 -m kernelscope profile tests/workloads/ddp_program.py::train_step \
    --via "torchrun --nproc-per-node 1 tests/workloads/ddp_program.py $A" --json --no-memory \
    > /tmp/ddp$i.json 2> /tmp/ddp$i.err
  echo "profile rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/ddp_b.txt"
  tail -n 2 /tmp/ddp$i.err >> "$OUT/ddp_b.txt"
  python3 - /tmp/ddp$i.json >> "$OUT/ddp_b.txt" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t, c = r["timing"], r.get("communication") or {}
print("kernelscope:", r["call_site"]["via"], "|", r["device"].get("name"),
      "| unprofiled %.1f us (%s, %d reps, %s) | cuda/step %.1f us" % (
          t["unprofiled_us_per_call"], t["unprofiled_method"], t["unprofiled_reps"],
          t.get("unprofiled_process"), t.get("cuda_us_per_step") or 0),
      "| comm", c.get("backend"), c.get("world_size"), [x["kind"] for x in c.get("collectives", [])])
print("verdict:", (r.get("verdict") or {}).get("summary"))
PY
done
cp /tmp/ddp1.json "$OUT/ddp1.json" 2>/dev/null
# accelerate launch (bf16 on the GPU, one process): --via "accelerate launch ..." against the
# same program's train_step under accelerate's own launcher, timed by CUDA events.
W="tests/workloads/accelerate_program.py --steps 400 --width 4096"
timeout 100 python3 -m accelerate.commands.launch --mixed_precision bf16 \
  docs/h200-run/inprog_truth.py tests/workloads/accelerate_program.py train_step --skip 50 \
  --cuda -- ${W#* } 2>&1 | grep "^rank" >> "$OUT/ddp_b.txt"
timeout 120 python3 -m kernelscope profile tests/workloads/accelerate_program.py::train_step \
  --via "accelerate launch --mixed_precision bf16 $W" --json --no-memory > /tmp/acc.json 2> /tmp/acc.err
echo "accelerate profile rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/ddp_b.txt"
tail -n 3 /tmp/acc.err >> "$OUT/ddp_b.txt"
summary /tmp/acc.json
# A real program: pytorch/examples' distributed/ddp-tutorial-series/multigpu_torchrun.py
# (NCCL hard-coded; carried in .tries/ddpt, not committed), its Trainer._run_batch captured
# and replayed, and in place, against the same calls timed in a fresh torchrun run.
T=.tries/ddpt; H=$PWD/docs/h200-run/inprog_truth.py
if [ -d "$T" ]; then
  (cd "$T" && timeout 100 torchrun --standalone --nproc-per-node 1 "$H" multigpu_torchrun.py \
    Trainer._run_batch --skip 50 --cuda -- 4 10 2>&1 | grep "^rank") >> "$OUT/ddp_b.txt"
  for mode in "" "--in-place"; do
    (cd "$T" && timeout 120 python3 -m kernelscope profile multigpu_torchrun.py::Trainer._run_batch \
      --via "torchrun --standalone --nproc_per_node=1 multigpu_torchrun.py 40 100" $mode \
      --json --no-memory > /tmp/ddpt.json 2> /tmp/ddpt.err)
    echo "tutorial profile $mode rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/ddp_b.txt"
    tail -n 3 /tmp/ddpt.err >> "$OUT/ddp_b.txt"
    summary /tmp/ddpt.json
  done
fi
cat "$OUT/ddp_b.txt" | cut -c1-400
echo "== end t=$(( $(date +%s) - START )) s"
