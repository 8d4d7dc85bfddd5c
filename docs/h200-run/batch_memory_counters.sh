# One device call: the memory pass's check and --counters' check side by side (neither times
# anything against the other: peaks and counters, not durations), then analyze's time per
# function (dropped: the device time left). From the repo root with .whl carried; each writes under its own $OUT folder.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
(OUT=$OUT/memory; mkdir -p $OUT; OUT=$OUT timeout 380 bash docs/h200-run/memory/check.sh > $OUT/check.txt 2>&1) &
(OUT=$OUT/counters; mkdir -p $OUT; OUT=$OUT timeout 380 bash docs/h200-run/counters/check.sh > $OUT/check.txt 2>&1) &
wait
for f in memory counters; do echo "######## $f"; tail -c 5000 $OUT/$f/check.txt; done
