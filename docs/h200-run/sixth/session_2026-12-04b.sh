#!/usr/bin/env bash
# The last device call of 2026-12-04 (issue 24, <7.5 min): try_blocks.py (the first call's
# parse of try's JSON failed) and checkpointed.sh (its CLI lines failed the same way).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
for c in "layernorm compile" "convs compile,channels_last" "scaled_conv_step channels_last"; do
  [ "$(left 290)" -lt 40 ] && break
  timeout "$(left 290)" python3 docs/h200-run/sixth/try_blocks.py $c >> "$OUT/try_blocks.txt" 2>&1
done
cut -c1-300 "$OUT/try_blocks.txt"; echo "t=$(( $(date +%s) - START )) s"
N=3; [ "$(left 430)" -lt 110 ] && N=2
timeout "$(left 430)" env N=$N bash docs/h200-run/sixth/checkpointed.sh
echo "== end t=$(( $(date +%s) - START )) s"
