#!/usr/bin/env bash
# One device call (issue 24, ~7 min): 1) `kernelscope try` on two seventh-set models against
# the same variants by hand in a fresh process; 2) the counters probe's 13 workloads under
# Nsight Compute with the L2's write sectors from the SMs beside DRAM's bytes (--cache-control
# all), to decide what item 3 compares a written output that stays in the 50 MB L2 with.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
START=$(date +%s)
timeout 330 python3 docs/h200-run/seventh/try_models.py levit:compile,bf16 \
  densenet_train:bf16,channels_last > "$OUT/try_models.txt" 2>&1
echo "try rc=$? t=$(( $(date +%s) - START )) s" >> "$OUT/try_models.txt"
grep -v '^{' "$OUT/try_models.txt" | cut -c1-300
D=docs/h200-run/counters
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,\
lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,\
sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,\
sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum,\
sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,\
sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,\
sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__inst_executed_pipe_tensor.sum,\
sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum,\
sm__ops_path_tensor_src_tf32_dst_fp32.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
ncu --query-metrics > /tmp/metrics.txt 2>&1
keep=""
for m in ${M//,/ }; do
  if grep -qw "${m%%.*}" /tmp/metrics.txt; then keep="$keep,$m"; else echo "no metric $m" >> "$OUT/ncu_l2w.txt"; fi
done
SECONDS=0
timeout "$(( 560 - ($(date +%s) - START) ))" ncu --profile-from-start off --clock-control none \
  --cache-control all --nvtx --csv --page raw --metrics "${keep#,}" \
  --log-file "$OUT/ncu_raw_cache_all_l2w.csv" python3 $D/probe.py > /tmp/probe_stdout.txt 2>&1
echo "ncu rc $? in $SECONDS s" >> "$OUT/ncu_l2w.txt"
tail -3 /tmp/probe_stdout.txt >> "$OUT/ncu_l2w.txt"
python3 - "$OUT/ncu_raw_cache_all_l2w.csv" >> "$OUT/ncu_l2w.txt" 2>&1 <<'PY'
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.reader(lines)); h = rows[0]; c = {n: i for i, n in enumerate(h)}
nv = next(i for i, n in enumerate(h) if n.startswith("thread Domain"))
def f(r, n):
    try: return float(r[c[n]].replace(",", ""))
    except (KeyError, ValueError): return float("nan")
print("range kernel us dram_r dram_w l2w_tex*32 l2w_all*32 (MB)")
for r in rows[2:]:
    print(r[nv][-30:], r[c["Kernel Name"]][:40], f(r, "gpu__time_duration.sum"),
          f(r, "dram__bytes_read.sum"), f(r, "dram__bytes_write.sum"),
          f(r, "lts__t_sectors_srcunit_tex_op_write.sum") * 32 / 1e6,
          f(r, "lts__t_sectors_op_write.sum") * 32 / 1e6)
PY
cat "$OUT/ncu_l2w.txt" | cut -c1-200
echo "== end t=$(( $(date +%s) - START )) s"
