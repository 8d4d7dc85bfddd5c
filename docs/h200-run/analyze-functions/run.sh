# Issue 25 (analyze of a raw trace with stacks; the output split; the provider in the label),
# checked on the H200. Run from the repository root: bash docs/h200-run/analyze-functions/run.sh
# Writes everything under $OUT. Takes about a minute.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99
OUT=${OUT:-/tmp/analyze-functions-out}
mkdir -p "$OUT"
HERE=docs/h200-run/analyze-functions

# 1. A raw trace recorded from a copy of minigpt elsewhere (/tmp/elsewhere/proj), analyzed
#    against the repository's own copy: functions at their def lines there, GPU time each.
rm -rf /tmp/elsewhere && mkdir -p /tmp/elsewhere/proj
cp tests/workloads/minigpt/model.py /tmp/elsewhere/proj/
(cd /tmp/elsewhere && timeout 200 python3 "$OLDPWD/$HERE/record_raw.py" /tmp/elsewhere/proj "$OUT") \
  > "$OUT/record.txt" 2>&1
gzip -f -1 "$OUT/raw.json"
timeout 120 python3 -m kernelscope analyze "$OUT/raw.json.gz" --root tests/workloads/minigpt \
  > "$OUT/analyze.txt" 2>&1
timeout 120 python3 -m kernelscope analyze "$OUT/raw.json.gz" --root tests/workloads/minigpt --json \
  > "$OUT/analyze.json" 2>"$OUT/analyze_json_stderr.txt"
python3 - "$OUT" <<'PY' > "$OUT/check.txt" 2>&1
import json, sys
out = sys.argv[1]
a = json.load(open(f"{out}/analyze.json"))
truth = json.load(open(f"{out}/truth.json"))
f = a["functions"]
rows = f["rows"]
print("frames_seen", f["frames_seen"], "gpu_us", round(f["gpu_us"]), "outside", round(f["gpu_outside_us"]))
print("sum of self GPU + outside == gpu_us:", abs(sum(r["self_gpu_us"] for r in rows) + f["gpu_outside_us"] - f["gpu_us"]) < 1)
for r in rows:
    print(f'{r["qualname"] or r["name"]:28} calls {r["calls"]:3} gpu_total/step {r["gpu_total_us"]/3:9.1f} us  '
          f'cpu_total/step {r["cpu_total_us"]/3:9.1f} us  {r["path"]}:{r["line"]} -> {r["local_path"]}:{r["local_line"]}')
print("truth", truth)
PY
cat "$OUT/check.txt"; sed -n '/^functions/,$p' "$OUT/analyze.txt"

# 2. A provider that prints and a module that prints at import, profiled on the GPU: the
#    report's "called" line names the provider, and the two outputs have their own headings.
rm -rf /tmp/noisy && mkdir /tmp/noisy
python3 - <<'PY'
import sys
sys.path.insert(0, "tests")
from integration.test_cli import NOISY_INPUTS, NOISY_MODEL
open("/tmp/noisy/model.py", "w").write(NOISY_MODEL)
open("/tmp/noisy/kernelscope_inputs.py", "w").write(NOISY_INPUTS)
PY
(cd /tmp/noisy && timeout 180 python3 -m kernelscope profile model.py::Block.forward --device cuda) \
  > "$OUT/noisy_profile.txt" 2>"$OUT/noisy_profile_stderr.txt"
grep -n "^called\|printed by\|output of the\|number of parameters\|provider:" "$OUT/noisy_profile.txt"
