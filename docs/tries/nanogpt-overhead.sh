# Why the in-place loop's unprofiled iterations ran slower than plain train.py (18.3 vs 11.6 ms
# compiled, 20.1 vs 16.5 ms eager): each suspect alone, around the real train.py.
cd .nanogpt
A="config/train_shakespeare_char.py --eval_iters=2 --log_interval=1 --eval_interval=1000 --max_iters=60"
med() { python3 -c "
import re,sys
t=[float(m.group(2)) for m in re.finditer(r'iter (\d+): loss [\d.]+, time ([\d.]+)ms', open(sys.argv[1]).read()) if int(m.group(1))>=20]
t.sort(); print('%-28s median %.2f ms (p10 %.2f, p90 %.2f, n %d)' % (sys.argv[2], t[len(t)//2], t[len(t)//10], t[9*len(t)//10], len(t)))
" "$1" "$2" || tail -5 "$1"; }
python3 -c "import pynvml" 2>&1 | tail -1
for c in True False; do
for m in plain warmprof nvml monitor; do
  timeout 120 python3 ../docs/tries/nanogpt_overhead.py $m train.py $A --compile=$c > /tmp/o_$m.txt 2>&1
  med /tmp/o_$m.txt "compile=$c $m"
done
done
