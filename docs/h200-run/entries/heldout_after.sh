# Three held-out library models through the worker package (and the warm-up before every
# unprofiled timing), against CUDA events in a fresh process. bash this, from the root.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
names="convnext_tiny gpt2_train mobilenet_fp32"
timeout 150 python3 fixtures/record_real.py /tmp/heldout $names > "$OUT/record_after.txt" 2>&1
python3 docs/h200-run/heldout_table.py /tmp/heldout $names > "$OUT/heldout_after.txt" 2>&1
tail -n 5 "$OUT/record_after.txt"; grep -E "live|raw" "$OUT/heldout_after.txt" | cut -c1-100
