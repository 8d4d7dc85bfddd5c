# Issue 24, one device call (~5 min; the session's last device time): Nsight Compute's DRAM
# bytes for GPT-2's loss kernels; the held-out table for GPT-2 training (nll_loss rows read
# 1710 % before the class-pick model) and T5 training (its config fixed); then the CLI's
# host timing against fresh processes in alternation for two host-bound patterns.
. docs/h200-run/timing/env.sh >/dev/null 2>&1
timeout 45 ncu --clock-control none --kernel-name regex:nll_loss --metrics \
  dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
  python3 docs/h200-run/counters/nll_loss.py > "$OUT/nll_ncu.txt" 2>&1
grep -E "nll_loss|dram__|gpu__time" "$OUT/nll_ncu.txt" | head -24
names="${NAMES:-gpt2_train t5_train}"
timeout "${RECORD_S:-120}" python3 fixtures/record_real.py /tmp/unseen $names > "$OUT/record.txt" 2>&1
python3 docs/h200-run/heldout_table.py /tmp/unseen $names > "$OUT/unseen_models.txt" 2>&1
tail -n 3 "$OUT/record.txt"; cut -c1-220 "$OUT/unseen_models.txt"
for n in $names; do
  python3 -m kernelscope analyze /tmp/unseen/$n/raw.json.gz --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
for row in r["roofline"]:
    if "nll" in row["name"] or (row.get("efficiency") or 0) > 0.9:
        print(sys.argv[1], row["name"][:60], row["kind"], row["estimate"], row["bound"],
              round((row.get("efficiency") or 0) * 100), row["bytes_per_step"], row["gpu_us_per_step"])' "$n"
done | tee "$OUT/rows.txt"
timeout "${PAIRED_S:-160}" bash docs/h200-run/timing/paired.sh ${PAIRED:-churn graph_break}
