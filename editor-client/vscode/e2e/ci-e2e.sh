#!/usr/bin/env bash
# End-to-end test of the kernelscope extension in real VS Code: code-server 4.100.3 (VS Code
# 1.100.3) driven by playwright-core in Debian's chromium. Needs only the npm registry and
# Debian's packages (code-server's ripgrep download is seeded with Debian's rg).
#
#   ci-e2e.sh VSIX PYTHON [WORK]
#     VSIX    the packaged extension (`make vsix`)
#     PYTHON  an interpreter with kernelscope and torch installed (the repo's .venv/bin/python);
#             it becomes kernelscope.server.python
#     WORK    a scratch folder (default: a new one under /tmp); screenshots go to WORK/shots
#             (or $E2E_SHOTS)
#
# code-server and playwright-core are kept in $KERNELSCOPE_E2E_CACHE (default
# ~/.cache/kernelscope-e2e), outside the repository. Exit status: 0 passed, 1 failed,
# 3 a prerequisite is missing (the line starting with MISSING says which).
set -euo pipefail
VSIX=$(realpath "${1:?usage: ci-e2e.sh VSIX PYTHON [WORK]}")
PY=${2:?usage: ci-e2e.sh VSIX PYTHON [WORK]}
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # absolute, venv link kept
WORK=${3:-$(mktemp -d /tmp/kernelscope-e2e.XXXXXX)}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CACHE=${KERNELSCOPE_E2E_CACHE:-$HOME/.cache/kernelscope-e2e}
SHOTS=${E2E_SHOTS:-$WORK/shots}
CS_VERSION=4.100.3      # the newest code-server on npm whose engines.node is 20
PW_VERSION=1.65.1
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
t() { echo "[$(date +%T)] $*"; }
missing() { echo "MISSING: $*"; exit 3; }

[ -f "$VSIX" ] || missing "the extension package $VSIX (run make vsix)"
"$PY" -c 'import kernelscope, torch' 2>/dev/null || missing "kernelscope and torch for $PY (run make venv)"
command -v node >/dev/null && command -v npm >/dev/null || missing "node and npm (apt-get install nodejs npm)"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || missing "node >= 20 (code-server $CS_VERSION needs 20), found $(node --version)"
mkdir -p "$WORK" "$CACHE" "$SHOTS"
WORK=$(realpath "$WORK")

apt_install() {
  [ "$(id -u)" = 0 ] || return 1
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq "$@"; } >"$WORK/apt.log" 2>&1
}

CS="$CACHE/cs/node_modules/.bin/code-server"
if ! "$CS" --version 2>/dev/null | grep -q "^$CS_VERSION "; then
  t "install code-server $CS_VERSION into $CACHE/cs (native modules built by node-gyp)"
  dpkg -s libkrb5-dev ripgrep build-essential >/dev/null 2>&1 || apt_install libkrb5-dev ripgrep build-essential \
    || missing "Debian packages libkrb5-dev ripgrep build-essential (apt-get failed: $(tail -1 "$WORK/apt.log" 2>/dev/null))"
  # @vscode/ripgrep's postinstall downloads rg from GitHub unless its cache has the archive.
  RG_CACHE="${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11"
  mkdir -p "$RG_CACHE" "$CACHE/rgseed"
  cp "$(command -v rg)" "$CACHE/rgseed/rg"
  tar czf "$RG_CACHE/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$CACHE/rgseed" rg
  rm -rf "$CACHE/cs"; mkdir -p "$CACHE/cs"
  # As root, code-server's postinstall insists on npm_config_unsafe_perm=true (npm 11 warns
  # that it does not know the option, and passes it on all the same).
  (cd "$CACHE/cs" && echo '{"name":"kernelscope-e2e-cs","private":true}' > package.json \
    && npm_config_unsafe_perm=true npm_config_yes=true npm install --no-audit --no-fund "code-server@$CS_VERSION" > install.log 2>&1) \
    || { tail -20 "$CACHE/cs/install.log"; missing "code-server@$CS_VERSION from the npm registry (npm install failed, log above)"; }
fi
t "$("$CS" --version | head -1)"

if [ ! -x "$CHROMIUM" ]; then
  t "install Debian's chromium"
  apt_install chromium || missing "Debian's chromium at $CHROMIUM (apt-get install chromium failed: $(tail -1 "$WORK/apt.log" 2>/dev/null))"
  [ -x "$CHROMIUM" ] || missing "Debian's chromium at $CHROMIUM (apt-get installed chromium, but not there)"
fi
t "$("$CHROMIUM" --version 2>/dev/null | head -1)"

if [ ! -f "$CACHE/pw/node_modules/playwright-core/package.json" ] \
  || [ "$(node -p "require('$CACHE/pw/node_modules/playwright-core/package.json').version")" != "$PW_VERSION" ]; then
  t "install playwright-core $PW_VERSION (the driver only: it uses Debian's chromium)"
  mkdir -p "$CACHE/pw"
  (cd "$CACHE/pw" && echo '{"name":"kernelscope-e2e-pw","private":true}' > package.json \
    && npm install --no-audit --no-fund "playwright-core@$PW_VERSION" > install.log 2>&1) \
    || { tail -20 "$CACHE/pw/install.log"; missing "playwright-core@$PW_VERSION from the npm registry"; }
fi

t "workspace and profiles in $WORK"
rm -rf "$WORK/run" "$WORK/ws" "$WORK/ws-untrusted"
make_ws() {
  mkdir -p "$1"
  printf '[project]\nname = "e2e"\nversion = "0"\n' > "$1/pyproject.toml"
  cp "$REPO/tests/workloads/three_lines.py" "$1/three_lines.py"
  cp "$REPO/fixtures/workloads/matmul_add.py" "$1/matmul_add.py"
  cp "$REPO/tests/workloads/memory_train.py" "$1/memory_train.py"
  cat > "$1/printing.py" <<'EOF'
import torch


def noisy(n: int = 256):
    x = torch.ones(n, n)
    y = x @ x
    print(f"noisy: trace of y = {float(y.trace()):.0f}")
    return y
EOF
  cat > "$1/run_square.py" <<'EOF'
import torch

from three_lines import square

if __name__ == "__main__":
    x = torch.ones(64, 64)
    for _ in range(3):
        square(x)
EOF
  "$PY" - "$1/analysis.ipynb" <<'EOF'
import json, sys
cells = [
    "import torch\n\n\ndef helper(n):\n    return torch.randn(n, n)",
    "def nb_matmul(n: int = 256):\n    a = helper(n)\n    b = a @ a @ a @ a\n    return b.relu().sum()\n\n\ndef nb_matmul_inputs():\n    return (256,)",
]
json.dump({
    "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
               "source": c.splitlines(keepends=True)} for c in cells],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}, open(sys.argv[1], "w"), indent=1)
EOF
}
make_ws "$WORK/ws"
make_ws "$WORK/ws-untrusted"
settings() {  # $1: user-data-dir, $2: true to keep workspace trust on
  mkdir -p "$1/User"
  "$PY" - "$1/User/settings.json" "$2" "$PY" <<'EOF'
import json, sys
out, trust, python = sys.argv[1], sys.argv[2] == "true", sys.argv[3]
import pathlib, jsonschema_specifications
draft7 = json.loads((pathlib.Path(jsonschema_specifications.__file__).parent / "schemas" / "draft7" / "metaschema.json").read_text())
json.dump({
    "workbench.startupEditor": "none",
    "security.workspace.trust.enabled": trust,
    "security.workspace.trust.startupPrompt": "never",
    "security.workspace.trust.banner": "always",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "extensions.ignoreRecommendations": True,
    "update.mode": "none",
    "telemetry.telemetryLevel": "off",
    "workbench.enableExperiments": False,
    "workbench.tips.enabled": False,
    "chat.commandCenter.enabled": False,
    "chat.disableAIFeatures": True,
    "workbench.colorTheme": "Default Light Modern",
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "remote.autoForwardPorts": False,
    "editor.hover.delay": 200,
    "editor.minimap.enabled": False,
    "window.commandCenter": False,
    "kernelscope.server.python": python,
    "kernelscope.device": "cpu",
    "kernelscope.schedule.wait": 0,
    "kernelscope.schedule.warmup": 1,
    "kernelscope.schedule.active": 3,
    "kernelscope.timeout": 60,
    # VS Code checks an MCP tool's input schema against draft-07, which it fetches: offline,
    # its own copy (the jsonschema package's, an MCP SDK dependency) stands in.
    "json.schemas": [{"url": "https://json-schema.org/draft-07/schema", "schema": draft7}],
}, open(out, "w"), indent=2)
EOF
}
settings "$WORK/run/ud" false
settings "$WORK/run/ud-untrusted" true

"$PY" -m venv --without-pip "$WORK/run/bare"   # a real Python without kernelscope

t "install $(basename "$VSIX") into a fresh extensions folder"
"$CS" --user-data-dir "$WORK/run/ud" --extensions-dir "$WORK/run/ext" --install-extension "$VSIX" > "$WORK/run/install-ext.log" 2>&1 \
  || { cat "$WORK/run/install-ext.log"; exit 1; }

free_port() { "$PY" -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 143' TERM INT
start_cs() {  # $1 user-data-dir  $2 folder  $3 log; prints the port
  local port; port=$(free_port)
  # setsid: code-server, its extension host, the kernelscope server and its workers form one
  # process group, stopped together at the end.
  KERNELSCOPE_E2E_TRACE="$REPO/fixtures/matmul_add_8192/trace.json.gz" KINETO_LOG_LEVEL=99 \
    setsid "$CS" --auth none --bind-addr "127.0.0.1:$port" --disable-telemetry --disable-update-check \
    --disable-getting-started-override --user-data-dir "$1" --extensions-dir "$WORK/run/ext" "$2" > "$3" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 120); do curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.25; done
  curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" || { cat "$3"; echo "code-server did not start"; exit 1; }
  PORT=$port
}
t "start code-server (trusted workspace) and code-server (Restricted Mode)"
start_cs "$WORK/run/ud" "$WORK/ws" "$WORK/run/cs.log"; PORT_TRUSTED=$PORT
start_cs "$WORK/run/ud-untrusted" "$WORK/ws-untrusted" "$WORK/run/cs-untrusted.log"; PORT_UNTRUSTED=$PORT

t "drive the workbench"
NODE_PATH="$CACHE/pw/node_modules" CHROMIUM="$CHROMIUM" SHOTS="$SHOTS" WS="$WORK/ws" \
  CS_URL="http://127.0.0.1:$PORT_TRUSTED/?folder=$WORK/ws" \
  CS_URL_UNTRUSTED="http://127.0.0.1:$PORT_UNTRUSTED/?folder=$WORK/ws-untrusted" \
  BARE_PYTHON="$WORK/run/bare/bin/python" USER_DATA="$WORK/run/ud" \
  node "$HERE/e2e.js"
