#!/usr/bin/env bash
# One short device call: the DDP tutorial's calls 3-21 (what in place now times) against its
# calls past the 50th, each in fresh torchrun runs, twice; then dcgan's Discriminator.forward
# captured at its first call (line 234) against that line's calls in a fresh run.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
T=.tries/ddpt; H=$PWD/docs/h200-run/inprog_truth.py
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/settle_c.txt"
for i in 1 2; do
  for w in "--skip 2 --upto 21" "--skip 50"; do
    echo "tutorial truth $w:" >> "$OUT/settle_c.txt"
    (cd "$T" && timeout 100 torchrun --standalone --nproc-per-node 1 "$H" multigpu_torchrun.py \
      Trainer._run_batch $w --cuda -- 4 10 2>&1 | grep "^rank") >> "$OUT/settle_c.txt"
  done
done
D=.tries/pex/dcgan; A="--dataset fake --workers 2 --batchSize 16 --niter 1 --outf /tmp/dcout --accel"
(cd "$D" && timeout 150 python3 -m kernelscope profile main.py::Discriminator.forward \
  --via "python main.py $A" --no-memory > "$OUT/dcgan_captured.txt" 2>&1)
echo "dcgan captured: rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/settle_c.txt"
grep -E "^(call|unprofiled|per step|  +timed|  +the )" "$OUT/dcgan_captured.txt" | cut -c1-300 >> "$OUT/settle_c.txt"
cat "$OUT/settle_c.txt"
echo "== end t=$(( $(date +%s) - START )) s"
