# After the fix (in place runs in the worker that never profiled): the loop in place against
# plain train.py, alternating, twice each, compile on and off. bash from the repo root.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
cd .nanogpt
A="config/train_shakespeare_char.py --eval_iters=2 --log_interval=1 --eval_interval=1000"
med() { python3 -c "
import re,sys
t=[float(m.group(2)) for m in re.finditer(r'iter (\d+): loss [\d.]+, time ([\d.]+)ms', open(sys.argv[1]).read()) if int(m.group(1))>=int(sys.argv[3])]
t.sort(); print('%-34s median %.2f ms (p10 %.2f, p90 %.2f, n %d)' % (sys.argv[2], t[len(t)//2], t[len(t)//10], t[9*len(t)//10], len(t)))
" "$@"; }
for c in False True; do for r in 1; do
  timeout 150 python3 -m kernelscope profile train.py:255 --via "train.py $A --compile=$c --max_iters=60" --skip 30 --no-lines --json > /tmp/ks.json 2>/tmp/ks.err
  python3 -c "
import json,sys; r=json.load(open('/tmp/ks.json'))
if 'error' in r: print('FAILED', r['error']); sys.exit()
t=r['timing']; print('kernelscope compile=%s run %s: unprofiled %.2f ms (median of %d, %s), GPU/step %.2f ms' % (sys.argv[1], sys.argv[2], t['unprofiled_us_per_call']/1e3, t['unprofiled_reps'], t['unprofiled_process'], t['cuda_us_per_step']/1e3))
" $c $r
  timeout 150 python3 train.py $A --compile=$c --max_iters=60 > /tmp/plain.txt 2>&1
  med /tmp/plain.txt "plain train.py compile=$c run $r" 2
done; done
