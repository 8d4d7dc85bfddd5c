#!/usr/bin/env bash
# The GPU checks after issue 11's reorganization and issue 12's try: the GPU tests, then
# `kernelscope try` against hand-written variants timed in a fresh process.
# Usage there, from the repo root, with kernelscope importable: bash docs/h200-run/issue12.sh OUT
set -u
out=${1:?OUT}
export KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/gpu -k "not host_bound" 2>&1 | tail -15 > "$out/pytest_gpu_after_house.txt"
timeout 330 python3 docs/h200-run/try_check.py > "$out/try_check.txt" 2>&1
tail -4 "$out/pytest_gpu_after_house.txt"; cat "$out/try_check.txt"
