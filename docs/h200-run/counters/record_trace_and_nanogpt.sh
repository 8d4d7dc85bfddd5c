KS_PROBE_TRACE=$OUT/probe_trace.json timeout 200 python3 docs/h200-run/counters/probe.py > $OUT/probe_trace_stdout.txt 2>&1; gzip -9 $OUT/probe_trace.json; ls -la $OUT; tail -3 $OUT/probe_trace_stdout.txt
bash docs/tries/nanogpt-inplace-after.sh 2>&1 | tee $OUT/nanogpt_inplace_after.txt
