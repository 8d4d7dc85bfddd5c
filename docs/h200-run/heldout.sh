#!/usr/bin/env bash
# Issue 10's re-check on the GPU host: held-out models through the streaming loader and the
# cut worker, against fresh-process CUDA events; then the trace-speed bench on that host.
# Usage there, from the repo root, with kernelscope importable: bash docs/h200-run/heldout.sh OUT
set -u
out=${1:?OUT}
export KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
names="convnext_tiny resnet18_train bert_base llama_small mobilenet_fp32 efficientnet_b0 gpt2_train swin_t"
timeout 370 python3 fixtures/record_real.py /tmp/heldout $names > "$out/record.txt" 2>&1
python3 docs/h200-run/heldout_table.py /tmp/heldout $names > "$out/heldout_models.txt" 2>&1
timeout 140 python3 bench/trace_speed.py --size-mb 150 --gzip --no-hta --rounds 3 > "$out/trace_speed_150mb_h200.txt" 2>&1
tail -5 "$out/record.txt"; cat "$out/heldout_models.txt" | cut -c1-160; tail -15 "$out/trace_speed_150mb_h200.txt"
