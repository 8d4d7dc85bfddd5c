# In place on the H200: train_main's train_step (forward, backward, AdamW over the micro-
# batches) captured and in place, and train.py's module-level `while True:` loop in place,
# at config/h200.py; then the --via tests on the GPU host. bash this, from the repo root.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
M=$PWD/tests/workloads/minigpt
for i in $(seq 20); do cat $M/data/input.txt; done > $M/data/large.txt
ks() { (cd "$M" && timeout 300 python3 -m kernelscope profile "$@" 2>/dev/null); }
summ() { python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))
if 'error' in r: print(sys.argv[2], 'FAILED', r['error']['message']); sys.exit()
t=r['timing']; s=r.get('call_site') or {}
print('%-34s GPU/step %9.1f us  wall/step %9.1f us  unprofiled %9.1f us (%s reps, %s)  %s' % (sys.argv[2],
 t['cuda_us_per_step'], t['wall_us_per_step'], t['unprofiled_us_per_call'], t['unprofiled_reps'],
 t['unprofiled_process'], s.get('modes')))
" "$1" "$2"; }
L=$(grep -n "^while True:" $M/train.py | cut -d: -f1)
{
ks train_main.py::train_step --via "-m train_main --config config/h200.py --max_iters 20" --call 4 --no-lines --json > /tmp/cap.json
ks train_main.py::train_step --via "-m train_main --config config/h200.py --max_iters 20" --in-place --skip 3 --json > /tmp/inp.json
ks train.py:$L --via "train.py config/h200.py" --json > /tmp/loop.json
summ /tmp/cap.json "train_step captured (call 4)"
summ /tmp/inp.json "train_step in place"
summ /tmp/loop.json "train.py:$L loop in place"
} > "$OUT/inplace_h200.txt" 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/integration/test_entries.py -k "in_place or loop" 2>&1 | tail -5 > "$OUT/pytest_inplace_gpu.txt"
cat "$OUT/inplace_h200.txt" "$OUT/pytest_inplace_gpu.txt"
