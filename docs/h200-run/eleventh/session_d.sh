#!/usr/bin/env bash
# The budget's last minutes (288 s, a start included): try against the hand-written variants
# with the fast-block anchor (tests/gpu/test_try_gpu.py), its output written to $OUT as it
# runs, so a run cut at the budget still brings back the cases it finished.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_try_gpu.py -rA > "$OUT/try.txt" 2>&1
echo "pytest rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try.txt"
grep -E "ratio|PASSED|FAILED|^E  |passed|failed|rc=" "$OUT/try.txt" | cut -c1-300 | tail -24
