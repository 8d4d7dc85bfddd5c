#!/usr/bin/env bash
# One device call (~60 s): a DataLoader worker's call handed to the main process (042f098)
# on Python 3.12, where the watch is sys.monitoring (this CPU machine has 3.11 only, whose
# tracer path CI tests): fork, spawn and forkserver workers, and in place's hint. Then the
# same through the GPU program: minigpt's CharDataset.__getitem__ with CUDA initialized in
# the main process (the forked child must not touch CUDA: CallState reads a bad fork's
# is_initialized() as False).
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
work=$(mktemp -d)
cp tests/workloads/worker_calls.py "$work/"
printf "[project]\nname = 'wc'\n" > "$work/pyproject.toml"
for how in fork spawn forkserver; do
  (cd "$work" && timeout 120 python3 -m kernelscope profile worker_calls.py::Rows.__getitem__ \
    --via "worker_calls.py --start-method $how" --json --no-memory > "$OUT/rows_$how.json" \
    2> "$OUT/rows_$how.err"; echo "rc=$?" >> "$OUT/rows_$how.err")
done
(cd "$work" && timeout 120 python3 -m kernelscope profile worker_calls.py::Rows.__getitem__ \
  --via worker_calls.py --in-place --json > "$OUT/rows_in_place.json" 2>&1)
cd tests/workloads/minigpt
timeout 180 python3 -m kernelscope profile data.py::CharDataset.__getitem__ --via \
  "train.py config/tiny.py --max_iters=20 --device=cuda" --json --no-memory \
  > "$OUT/chardataset.json" 2> "$OUT/chardataset.err"
echo "rc=$?" >> "$OUT/chardataset.err"
cd - >/dev/null
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
for name in ("rows_fork", "rows_spawn", "rows_forkserver", "chardataset", "rows_in_place"):
    try:
        r = json.load(open(os.path.join(out, name + ".json")))
    except Exception as e:
        print(name, "no JSON:", e)
        continue
    if "error" in r:
        print(name, r["error"]["kind"], r["error"].get("hint"))
    else:
        print(name, r["call_site"]["modes"], r["device"]["threads"],
              round(r["timing"]["unprofiled_us_per_call"], 1))
PY
