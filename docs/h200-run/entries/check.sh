# Issue 23's checks on the H200: the worker as a package (the GPU tests), and --via on the
# minigpt project at config/h200.py against a provider with the same shapes and against
# CUDA events in a fresh process. bash this, from the repo root.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
here=$PWD; E=$here/docs/h200-run/entries; M=$here/tests/workloads/minigpt
ks() { (cd "$M" && timeout 300 python3 -m kernelscope profile "$@"); }
summ() { python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))
if 'error' in r: print(sys.argv[2], 'FAILED', r['error']['message']); sys.exit()
t=r['timing']; s=r.get('call_site') or {}
print('%-38s GPU/step %8.1f us  unprofiled %8.1f us (%s, %s)  host %s  modes %s  stages %s' % (sys.argv[2],
 t['cuda_us_per_step'], t['unprofiled_us_per_call'], t['unprofiled_method'], t['unprofiled_process'],
 round(t.get('host_us_per_call') or 0,1), s.get('modes'), {k: round(v,2) for k,v in r['stages_s'].items()}))
" "$1" "$2"; }
for i in $(seq 20); do cat $M/data/input.txt; done > $M/data/large.txt
L=$(grep -n "logits, loss = model(X, Y)" $M/train.py | cut -d: -f1)
{
ks model.py::Block.forward --via "train.py config/h200.py --dtype='float32'" --from train.py:$L --call 3 --json > /tmp/b32.json
ks model.py::Block.forward --via "train.py config/h200.py" --from train.py:$L --call 3 --json > /tmp/b16.json
ks model.py::GPT.forward --via "train.py config/h200.py" --from train.py:$L --call 3 --json > /tmp/g16.json
(cd $E && timeout 200 python3 -m kernelscope profile block_provider.py::block_forward --json > /tmp/p32.json)
(cd $E && timeout 200 python3 -m kernelscope profile block_provider.py::block_forward_bf16 --json > /tmp/p16.json)
summ /tmp/b32.json "captured Block.forward fp32"
summ /tmp/p32.json "provider Block.forward fp32"
summ /tmp/b16.json "captured Block.forward bf16 autocast"
summ /tmp/p16.json "provider Block.forward bf16 autocast"
summ /tmp/g16.json "captured GPT.forward bf16 autocast"
cd $E && for a in "fp32 block" "bf16 block" "bf16 gpt"; do PYTHONPATH=$PYTHONPATH:$M timeout 60 python3 truth.py $a; done; cd $here
} > "$OUT/entries_h200.txt" 2>&1
ks model.py::Block.forward --via "train.py config/h200.py" --from train.py:$L --call 3 > "$OUT/entries_block_report.txt" 2>&1
: > "$OUT/entries_spawn_report.txt"
ks train_main.py::train_step --via "-m train_main --config config/h200.py --max_iters 6" --call 3 --no-lines >> "$OUT/entries_spawn_report.txt" 2>&1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/integration/test_entries.py 2>&1 | tail -15 > "$OUT/pytest_gpu_entries.txt"
cat "$OUT/entries_h200.txt"; head -30 "$OUT/entries_block_report.txt"; grep -E "^call|^unprof|^per step|^verdict|kernelscope:" "$OUT/entries_spawn_report.txt"; tail -4 "$OUT/pytest_gpu_entries.txt"
