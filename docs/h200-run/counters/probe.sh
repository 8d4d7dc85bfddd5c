# Issue 24 item 2: what Nsight Compute reports per kernel on the H200 for the probe's
# workloads (raw CSV, both cache-control modes), and which tensor-pipe metrics gh100 has.
# bash this from the repo root; results under $OUT.
set -u
D=docs/h200-run/counters
ncu --version > "$OUT/ncu_version.txt" 2>&1
ncu --query-metrics > "$OUT/ncu_metrics_gh100.txt" 2>&1 || ncu --query-metrics --chip gh100 > "$OUT/ncu_metrics_gh100.txt" 2>&1
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,\
sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,\
sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum,\
sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,\
sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,\
sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__inst_executed_pipe_tensor.sum,\
sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp16_dst_fp32.sum,\
sm__ops_path_tensor_src_fp8.sum,sm__ops_path_tensor_src_tf32_dst_fp32.sum,\
sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size,launch__registers_per_thread
# keep only the metrics gh100 has (an unknown one fails the whole run)
keep=""
for m in ${M//,/ }; do
  if grep -qw "${m%%.*}" "$OUT/ncu_metrics_gh100.txt"; then keep="$keep,$m"; else echo "no metric $m" >> "$OUT/ncu_times.txt"; fi
done
M=${keep#,}
for cc in all none; do
  SECONDS=0
  timeout 240 ncu --profile-from-start off --clock-control none --cache-control $cc \
    --nvtx --csv --page raw --metrics "$M" --log-file "$OUT/ncu_raw_cache_$cc.csv" \
    python3 $D/probe.py > "$OUT/probe_stdout_$cc.txt" 2>&1
  echo "cache-control $cc: rc $? in $SECONDS s" >> "$OUT/ncu_times.txt"
done
# what an unknown metric does (one of the tensor ones may not exist on gh100)
timeout 60 ncu --profile-from-start off --metrics sm__ops_path_tensor_src_bf16_dst_fp32.sum --csv --page raw python3 $D/probe.py mm > "$OUT/ncu_one_metric.txt" 2>&1
grep -iE "tensor|pipe_tensor" "$OUT/ncu_metrics_gh100.txt" | head -80 > "$OUT/ncu_tensor_metrics.txt"
head -c 3000 "$OUT/ncu_raw_cache_all.csv"; echo; cat "$OUT/ncu_times.txt"; cat "$OUT/probe_stdout_none.txt" | head -30; cat "$OUT/ncu_tensor_metrics.txt" | head -40
