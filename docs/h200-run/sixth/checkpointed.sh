#!/usr/bin/env bash
# checkpointed's clean-worker figure against fresh processes, alternated (CLI, fresh, CLI,
# ...), with every thread's CPU and %CPU sampled while they run (issue 24, item 5).
W=fixtures/workloads/host_timing.py::checkpointed
O=${OUT:-/tmp/out}/checkpointed.txt
( while true; do echo "-- $(date +%s.%N | cut -c1-14)"; ps -eLo tid,pcpu,psr,comm --sort=-pcpu --no-headers | awk '$2 > 20' | head -8; sleep 0.5; done ) > /tmp/threads.txt 2>&1 &
P=$!
for i in $(seq ${N:-3}); do
  s=$(date +%s.%N | cut -c1-14)
  timeout 100 python3 -m kernelscope profile $W --device ${D:-cuda} --no-lines --no-memory --json > /tmp/ck.json 2> /tmp/ck.err
  python3 -c "
import json; t = json.load(open('/tmp/ck.json'))['timing']
print('cli', '$s', t['unprofiled_process'], round(t['unprofiled_us_per_call'], 1), 'reps', t['unprofiled_reps'], 'loop', round(t['unprofiled_reference_us'], 1), 'host_ref', t.get('host_reference_us'), 'slowed', json.dumps(t.get('unprofiled_slowed')), 'profiling_worker', t.get('profiling_worker_us_per_call'), 'window', t['unprofiled_window_s'])
" >> $O 2>&1 || tail -3 /tmp/ck.err >> $O
  reps=$(python3 -c "import json; print(json.load(open('/tmp/ck.json'))['timing']['unprofiled_reps'])" 2>/dev/null || echo 300)
  s=$(date +%s.%N | cut -c1-14)
  echo "fresh $s $(timeout 60 python3 tests/support/fresh_timing.py $W ${D:-cuda} $reps | tail -1 | cut -c1-400)" >> $O
done
kill $P
cat /tmp/threads.txt | tar czf ${OUT:-/tmp/out}/threads.tgz -C /tmp threads.txt
cut -c1-330 $O
