# nanoGPT (karpathy/nanoGPT, fetched, carried as .nanogpt/, not in this repository) on the H200
# through --via, with no harness code, against its own per-iteration timing and CUDA events in a
# fresh process. Its data: data/shakespeare_char/{train,val}.bin + meta.pkl made locally from
# 418 k characters of local text (no internet). bash this from the repo root; results in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
here=$PWD; cd .nanogpt
A="config/train_shakespeare_char.py --eval_iters=2 --log_interval=1 --eval_interval=1000"
ks() { timeout 240 python3 -m kernelscope profile "$@"; }
{
echo "== Block.forward captured, call 3 from train.py:300 (compile off)"
ks model.py::Block.forward --via "train.py $A --compile=False --max_iters=20" --from train.py:300 --call 3 -v
echo "== the training loop in place (train.py:255), compile off"
ks train.py:255 --via "train.py $A --compile=False --max_iters=40" --no-lines -v
echo "== the training loop in place, compile on (nanoGPT's default)"
ks train.py:255 --via "train.py $A --max_iters=60" --skip 20 --no-lines -v
echo "== truth: Block.forward in a fresh process"
timeout 60 python3 $here/docs/tries/nanogpt_truth.py
echo "== truth: train.py's own per-iteration times (log_interval=1 syncs each iteration)"
for c in False True; do
  timeout 150 python3 train.py $A --compile=$c --max_iters=60 > /tmp/plain_$c.txt 2>&1
  python3 -c "
import re,sys
t=[float(m.group(2)) for m in re.finditer(r'iter (\d+): loss [\d.]+, time ([\d.]+)ms', open(sys.argv[1]).read()) if int(m.group(1))>=20]
t.sort(); print('plain train.py compile=%s: iterations 20-59 median %.2f ms (p10 %.2f, p90 %.2f, n %d)' % (sys.argv[2], t[len(t)//2], t[len(t)//10], t[9*len(t)//10], len(t)))
" /tmp/plain_$c.txt $c
done
} > "$OUT/nanogpt_h200.txt" 2>&1
cat "$OUT/nanogpt_h200.txt" | grep -vE "^\s*$" | head -150
