#!/usr/bin/env bash
# One device call (issue 24, item 5 on remotes): a host-bound GPU call profiled through an ssh
# remote is timed again in the remote's worker that never profiles. No sshd on the H200, so
# `ssh` is a stand-in that runs the remote command (its last argument) in a shell, as sshd
# does; the transport itself is tested against a real sshd in CI (tests/integration/
# test_remote_jobs.py). Beside it: the same call profiled locally, and a fresh process.
# bash this from the root; DEVICE=cpu for a dry run. Results under $OUT.
set -u
. docs/h200-run/timing/env.sh >/dev/null 2>&1
DEVICE=${DEVICE:-cuda}
START=$(date +%s)
mkdir -p /tmp/shim /tmp/proj
printf '#!/bin/sh\nfor a in "$@"; do c="$a"; done\nexec sh -c "$c"\n' > /tmp/shim/ssh
chmod +x /tmp/shim/ssh
cp fixtures/workloads/host_timing.py /tmp/proj/
printf '[project]\nname = "proj"\n\n[tool.kernelscope.remotes.box]\nkind = "ssh"\nhost = "h200"\npython = "%s"\n' \
  "${PY:-python3}" > /tmp/proj/pyproject.toml
T=/tmp/proj/host_timing.py::churn
PATH=/tmp/shim:$PATH timeout 90 ${PY:-python3} -m kernelscope profile $T --device $DEVICE --no-lines \
  --no-memory --remote box > "$OUT/remote.txt" 2>&1
echo "remote rc=$? t=$(( $(date +%s) - START )) s" | tee -a "$OUT/remote.txt"
grep -E "^(unprofiled|runner|device)" "$OUT/remote.txt" | cut -c1-240
timeout 30 ${PY:-python3} tests/support/fresh_timing.py $T $DEVICE 3000 2>/dev/null | tail -1 \
  | tee "$OUT/fresh.txt" | cut -c1-200
echo "fresh t=$(( $(date +%s) - START )) s"
timeout 70 ${PY:-python3} -m kernelscope profile $T --device $DEVICE --no-lines --no-memory \
  > "$OUT/local.txt" 2>&1
echo "local rc=$? t=$(( $(date +%s) - START )) s" | tee -a "$OUT/local.txt"
grep -E "^unprofiled" "$OUT/local.txt" | cut -c1-240
