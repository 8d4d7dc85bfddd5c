# After the change to keep only the user's Python frames: the GPU tests, and the trace bench
# at 150 MB on the H200 host's 16 CPUs. bash this, from the root.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99
nproc
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -15 > "$OUT/pytest_gpu_frames.txt"
timeout 200 python3 bench/trace_speed.py --size-mb 150 --gzip --rounds 3 --no-hta > "$OUT/trace_speed_150mb_h200.txt" 2>&1
tail -n 4 "$OUT/pytest_gpu_frames.txt"; grep -v "round" "$OUT/trace_speed_150mb_h200.txt" | tail -30
