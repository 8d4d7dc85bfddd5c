# One device call: the memory pass's check and --counters' check side by side (neither times
# anything against the other: peaks and counters, not durations), then analyze's time per
# function. From the repo root with .whl carried; each writes under its own $OUT folder.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
(OUT=$OUT/memory; mkdir -p $OUT; OUT=$OUT bash docs/h200-run/memory/check.sh > $OUT/check.txt 2>&1) &
(OUT=$OUT/counters; mkdir -p $OUT; OUT=$OUT bash docs/h200-run/counters/check.sh > $OUT/check.txt 2>&1) &
wait
(OUT=$OUT/analyze; mkdir -p $OUT; OUT=$OUT timeout 100 bash docs/h200-run/analyze-functions/run.sh > $OUT/check.txt 2>&1)
for f in memory counters analyze; do echo "######## $f"; tail -c 5000 $OUT/$f/check.txt; done
