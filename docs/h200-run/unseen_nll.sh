# Issue 24 on the H200 (~4 min): Nsight Compute's DRAM bytes for GPT-2's loss kernels
# (counters/nll_loss.py), and the held-out table again for T5 training (its config fixed),
# GPT-2 training (nll_loss rows read 1710 % before the class-pick model) and BERT.
. docs/h200-run/timing/env.sh >/dev/null 2>&1
timeout 90 ncu --clock-control none --kernel-name regex:nll_loss --metrics \
  dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
  python3 docs/h200-run/counters/nll_loss.py > "$OUT/nll_ncu.txt" 2>&1
grep -E "nll_loss|dram__|gpu__time" "$OUT/nll_ncu.txt" | head -24
names="t5_train gpt2_train bert_base"
timeout 300 python3 fixtures/record_real.py /tmp/unseen $names > "$OUT/record.txt" 2>&1
python3 docs/h200-run/heldout_table.py /tmp/unseen $names > "$OUT/unseen_models.txt" 2>&1
tail -n 5 "$OUT/record.txt"; cut -c1-220 "$OUT/unseen_models.txt"
for n in $names; do
  python3 -m kernelscope analyze /tmp/unseen/$n/raw.json.gz --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
for row in r["roofline"]:
    if "nll" in row["name"] or (row.get("efficiency") or 0) > 0.9:
        print(sys.argv[1], row["name"][:60], row["kind"], row["estimate"], row["bound"],
              round((row.get("efficiency") or 0) * 100), row["bytes_per_step"], row["gpu_us_per_step"])' "$n"
done
