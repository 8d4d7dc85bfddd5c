#!/usr/bin/env bash
# One short device call: accelerate launch on the GPU again (session_b read it 1.163 of its
# truth, the torchrun programs 0.955 and 0.857), JSON kept; bf16 and no mixed precision; and
# the DDP tutorial in place past its warm-up (--skip 60; session_b's 4 early calls read 1.70).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
W="--steps 400 --width 4096"
for mp in bf16 no bf16; do
  timeout 60 python3 -m accelerate.commands.launch --mixed_precision $mp docs/h200-run/inprog_truth.py \
    tests/workloads/accelerate_program.py train_step --skip 50 --cuda -- $W 2>&1 | grep "^rank" \
    | sed "s/^/$mp truth /" >> "$OUT/e.txt"
  timeout 90 python3 -m kernelscope profile tests/workloads/accelerate_program.py::train_step \
    --via "accelerate launch --mixed_precision $mp tests/workloads/accelerate_program.py $W" \
    --json --no-memory --no-lines > "$OUT/acc_$mp.json" 2> /tmp/acc.err
  python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); t=r['timing']
print(sys.argv[2], 'kernelscope %.1f us' % t['unprofiled_us_per_call'], t['unprofiled_method'], t['unprofiled_reps'], t.get('unprofiled_process'), 'threads', r['device'].get('threads'), 'wall/step', t.get('wall_us_per_step'))
" "$OUT/acc_$mp.json" $mp >> "$OUT/e.txt" 2>&1
  echo "t=$(( $(date +%s) - START )) s" >> "$OUT/e.txt"
done
T=.tries/ddpt
(cd "$T" && timeout 90 python3 -m kernelscope profile multigpu_torchrun.py::Trainer._run_batch \
  --via "torchrun --standalone --nproc_per_node=1 multigpu_torchrun.py 40 100" --in-place --skip 60 \
  --json --no-memory > "$OUT/tut_inplace.json" 2> /tmp/t.err)
python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); t=r['timing']
print('tutorial in place --skip 60: %.1f us' % t['unprofiled_us_per_call'], t['unprofiled_method'], t['unprofiled_reps'])
" "$OUT/tut_inplace.json" >> "$OUT/e.txt" 2>&1
cat "$OUT/e.txt"; echo "== end t=$(( $(date +%s) - START )) s"
