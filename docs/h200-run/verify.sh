#!/usr/bin/env bash
# The live checks on the GPU host (after fixtures/record_real.py): the GPU tests and the CLI
# on real workloads. Usage there, from the repo root: bash docs/h200-run/verify.sh OUTDIR
set -u
out=${1:?OUTDIR}
export KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/server:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_live.py -k "host_bound or training or large_matmul" -s 2>&1 | tail -25 > "$out/pytest_gpu_live.txt"
for spec in fixtures/workloads/train_mlp.py::train_step fixtures/workloads/transformer.py::prefill \
            fixtures/workloads/untuned.py::llama fixtures/workloads/host_bound.py::many_small; do
  echo "\$ kernelscope profile $spec --device cuda --active 3"
  timeout 60 python3 -m kernelscope profile "$spec" --device cuda --active 3 2>/dev/null
  echo "rc=$?"
done > "$out/cli_live.txt" 2>&1
echo "\$ kernelscope analyze fixtures/vit_train/raw.json.gz" >> "$out/cli_live.txt"
timeout 60 python3 -m kernelscope analyze fixtures/vit_train/raw.json.gz >> "$out/cli_live.txt" 2>&1
tail -3 "$out/pytest_gpu_live.txt"
