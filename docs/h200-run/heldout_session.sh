# The held-out library models after this session's analysis changes (collectives in every
# report, trace reading by processes): live through the worker and raw torch.profiler traces
# through `kernelscope analyze`, against CUDA events in a fresh process. bash this, from the root.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
names="convnext_tiny resnet18_train bert_base llama_small mobilenet_fp32 efficientnet_b0 gpt2_train swin_t"
timeout 420 python3 fixtures/record_real.py /tmp/heldout $names > "$OUT/record.txt" 2>&1
python3 docs/h200-run/heldout_table.py /tmp/heldout $names > "$OUT/heldout_models.txt" 2>&1
tail -n 12 "$OUT/record.txt"; cut -c1-200 "$OUT/heldout_models.txt"
