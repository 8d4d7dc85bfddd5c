# Issue 24's done-when on library models never run through kernelscope before (unseen.py) and
# two held-out ones with gathers (bert_base, gpt2_train): live through the worker and raw
# torch.profiler traces through `kernelscope analyze`, against CUDA events in a fresh process,
# and the highest roofline efficiency in each report. bash this, from the root (~5 min).
. docs/h200-run/timing/env.sh >/dev/null 2>&1
names="t5_train regnet_fp16 deit_train mistral_gqa bert_base gpt2_train"
timeout 400 python3 fixtures/record_real.py /tmp/unseen $names > "$OUT/record.txt" 2>&1
python3 docs/h200-run/heldout_table.py /tmp/unseen $names > "$OUT/unseen_models.txt" 2>&1
tail -n 12 "$OUT/record.txt"; cut -c1-220 "$OUT/unseen_models.txt"
