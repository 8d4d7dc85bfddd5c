# Sourced by check.sh and try.sh: $OUT, the wheels the CLI needs (msgspec, ...), PYTHONPATH.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests KINETO_LOG_LEVEL=99 PYTHONUNBUFFERED=1
