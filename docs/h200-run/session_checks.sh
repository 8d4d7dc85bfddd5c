# This session's checks on the H200: the GPU tests, a 1-rank NCCL trace, --nproc 2 on the CPU.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99
timeout 120 python3 fixtures/distributed/nccl_one_rank.py "$OUT" > "$OUT/nccl_one_rank.txt" 2>&1
timeout 120 python3 -m kernelscope profile tests/workloads/distributed.py::train_step --nproc 2 --device cpu > "$OUT/nproc_train_step_h200.txt" 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/gpu 2>&1 | tail -15 > "$OUT/pytest_gpu_session.txt"
tail -n 30 "$OUT/nccl_one_rank.txt"; tail -n 14 "$OUT/nproc_train_step_h200.txt"; tail -n 4 "$OUT/pytest_gpu_session.txt"
