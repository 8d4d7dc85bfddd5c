# The trace-reading bench on the H200 host (16 CPUs): 150 MB and 2 GB, plain and gzip'd.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server
nproc; free -g | head -2
timeout 170 python3 bench/trace_speed.py --size-mb 150 --gzip --rounds 3 --no-hta > "$OUT/trace_speed_150mb_h200.txt" 2>&1
timeout 400 python3 bench/trace_speed.py --size-mb 2000 --gzip --rounds 2 --no-hta > "$OUT/trace_speed_2gb_h200.txt" 2>&1
tail -n 5 "$OUT"/*.txt
