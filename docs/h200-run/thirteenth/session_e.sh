#!/usr/bin/env bash
# One short device call: Nsight Compute on the multi-tensor (foreach) kernels of one
# ConvNeXt-V2 AdamW step (foreach_ncu.py): DRAM bytes read and written and L2 write sectors
# per kernel, against the raw trace's foreach rows (session_d.sh's, 2026-12-05 13:52).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
timeout 140 ncu --profile-from-start off --clock-control none --cache-control all \
  --kernel-name regex:multi_tensor --launch-count 200 --csv --page raw --print-units base \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum,gpu__time_duration.sum \
  --log-file "$OUT/foreach_ncu.csv" python3 docs/h200-run/thirteenth/foreach_ncu.py > "$OUT/foreach_ncu.txt" 2>&1
echo "ncu rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/foreach_ncu.txt"
tail -n 5 "$OUT/foreach_ncu.txt"; wc -l "$OUT/foreach_ncu.csv"
python3 - "$OUT/foreach_ncu.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
rows = [r for r in rows if r.get("Kernel Name") and r.get("dram__bytes_read.sum", "").replace(".", "").isdigit()]
tot = [0.0, 0.0, 0.0]
for r in rows:
    tot[0] += float(r["dram__bytes_read.sum"]); tot[1] += float(r["dram__bytes_write.sum"])
    tot[2] += float(r["lts__t_sectors_srcunit_tex_op_write.sum"]) * 32
print(len(rows), "kernels: DRAM read %.4e, DRAM write %.4e, L2 writes %.4e, read+L2w %.4e" % (tot[0], tot[1], tot[2], tot[0] + tot[2]))
PY
echo "== end t=$(( $(date +%s) - START )) s"
