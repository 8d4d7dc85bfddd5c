"""Remote workers through a throwaway sshd on 127.0.0.1 (tests/support/sshd.py).

The "remote" is this machine, so the tests make sure the worker cannot just read the
user's files where they are: shipped files land in a temp folder there and are imported
from it, a workdir is a copy elsewhere, and everything that comes back names the user's
local paths.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobResult
from kernelscope.report.schema import Report

from support import WORKLOADS
from support.jobs import failed, ok
from support.lsp import FAST, open_doc, profile, start, stop
from support.remote_project import HELPERS, MODEL, Driver, line_of, write_project
from support.sshd import Sshd


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's project: a package whose module imports a sibling."""
    return write_project(tmp_path_factory.mktemp("remote") / "proj")


@pytest.fixture(scope="module")
def proj(files: Path, sshd: Sshd) -> Path:
    """The project, with remote `loop` (ssh to the fixture) in its pyproject.toml."""
    (files / "pyproject.toml").write_text(
        "[project]\nname = 'proj'\n\n"
        "[tool.kernelscope.remotes.loop]\n"
        'kind = "ssh"\nhost = "ks-test"\n'
        f"python = {json.dumps(sys.executable)}\n"
        f"ssh_options = {json.dumps(sshd.ssh_options)}\n"
    )
    return files


def ssh_remote(sshd: Sshd, name: str = "loop", **fields: Any) -> Remote:
    fields.setdefault("host", "ks-test")
    fields.setdefault("python", sys.executable)
    return Remote(name, fields.pop("kind", "ssh"), ssh_options=tuple(sshd.ssh_options), **fields)


@pytest.fixture(scope="module")
def remote(sshd: Sshd, proj: Path) -> Iterator[Driver]:
    d = Driver(Launcher(remote=ssh_remote(sshd)), proj)
    yield d
    d.close()


def printed(result: JobResult, key: str) -> str:
    return next(
        ln.split(" ", 1)[1] for ln in result.finished.output.splitlines() if ln.startswith(key)
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


# --- a warm worker over ssh ---------------------------------------------------------------------


def test_files_are_shipped_and_paths_come_back_local(remote: Driver, proj: Path) -> None:
    result = ok(remote.run("where"))
    shipped = Path(printed(result, "FILE"))
    assert shipped.parts[-2:] == ("pkg", "model.py")
    assert not shipped.is_relative_to(proj), "the worker read the user's folder, not a shipped copy"
    assert printed(result, "CWD") == str(shipped.parent.parent)
    assert printed(result, "HELPERS") == str(shipped.parent / "helpers.py")
    side = result.finished.sidecar
    assert side.path == str(proj / "pkg" / "model.py")
    assert {s.path for s in side.lines} == {str(proj / "pkg" / "model.py")}
    report = remote.report(result, "where")
    assert (report.runner.remote, report.runner.host) == ("loop", socket.gethostname())
    assert report.lines[0].code.startswith(("print(", "return"))  # read from the local file
    trace = Path(report.trace.path)
    assert trace.parent == proj / ".kernelscope" / "traces" and trace.stat().st_size > 0
    assert report.trace.cold_path and Path(report.trace.cold_path).is_file()


def test_a_remote_run_agrees_with_a_local_one(sshd: Sshd, proj: Path) -> None:
    one_thread = {"OMP_NUM_THREADS": "1"}  # no OpenMP spinning on a busy 2-core CI box
    local = Driver(Launcher(python=sys.executable, env={**os.environ, **one_thread}), proj)
    there_ = Driver(Launcher(remote=ssh_remote(sshd, env=one_thread)), proj)
    try:
        here = local.report(ok(local.run("forward")), "forward")
        there = there_.report(ok(there_.run("forward")), "forward")
    finally:
        local.close()
        there_.close()
    assert {(o.name, o.calls) for o in there.ops} == {(o.name, o.calls) for o in here.ops}
    cube = (str(proj / "pkg" / "helpers.py"), line_of(HELPERS, "x @ x @ x @ x"))
    assert (here.lines[0].path, here.lines[0].line) == cube
    assert (there.lines[0].path, there.lines[0].line) == cube

    def share(report: Report) -> float:  # the costliest line's part of the function's time
        return report.lines[0].self_cpu_us / sum(r.self_cpu_us for r in report.lines)

    assert abs(share(there) - share(here)) < 0.2, (share(there), share(here))
    ratio = there.timing.cpu_us_per_step / here.timing.cpu_us_per_step
    assert 0.1 < ratio < 10, (there.timing, here.timing)  # times only loosely: a shared box


def test_an_ssh_remote_times_again_in_a_worker_there_that_never_profiles(
    sshd: Sshd, proj: Path
) -> None:
    """A profiling session slows host-bound code in its process for good, so an ssh remote
    starts the worker that never profiles there too (a second session), told so by its
    environment there; a call timed again (`always` here: this box has no GPU) says so."""
    launcher = Launcher(
        remote=ssh_remote(sshd, env={"OMP_NUM_THREADS": "1"}), clean_timing="always"
    )
    d = Driver(launcher, proj)
    try:
        result = ok(d.run("forward"))
        timer = launcher._timer  # pyright: ignore[reportPrivateUsage]
        assert timer is not None and timer.ready is not None
        pid = timer.ready.pid  # the worker there: this machine, through sshd
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    finally:
        d.close()
    assert b"KERNELSCOPE_TIMING_WORKER=clean" in environ
    assert b"OMP_NUM_THREADS=1" in environ  # the remote's own env as well
    assert pid != result.ready.pid
    timing = result.finished.sidecar.timing
    assert timing.process == "clean worker" and timing.profiling_worker_us_per_call


def test_a_user_error_points_at_the_local_file(remote: Driver, proj: Path) -> None:
    f = failed(remote.run("boom"))
    assert f.kind == "user_exception" and "ValueError: bad remote value" in f.message
    assert (f.path, f.line) == (str(proj / "pkg" / "model.py"), line_of(MODEL, "raise ValueError"))
    assert f.traceback and all(t.startswith(str(proj)) for t in f.traceback), f.traceback


def test_a_crash_there_points_at_the_local_line(remote: Driver, proj: Path) -> None:
    f = failed(remote.run("segfault"))
    assert f.kind == "crash", f
    assert f.message.startswith("remote loop (ssh ks-test): the worker crashed (Segmentation")
    assert (f.path, f.line) == (str(proj / "pkg" / "model.py"), line_of(MODEL, "string_at(0)"))
    ok(remote.run("where"))


def test_no_gpu_there_names_the_remote(remote: Driver) -> None:
    if ok(remote.run("where")).ready.devices:
        pytest.skip("the remote has a CUDA GPU: no error to provoke")
    f = failed(remote.run("where", device="cuda"))
    assert f.kind == "no_cuda"
    assert f.message.startswith("remote loop (ssh ks-test): no CUDA device on ")


def test_cancel_stops_the_remote_job_and_keeps_the_worker_warm(remote: Driver) -> None:
    pid = ok(remote.run("where")).ready.pid
    assert remote.run_while("spin", lambda task: task.cancel()) is None
    assert ok(remote.run("where")).ready.pid == pid


def test_cancelling_a_stuck_job_ends_the_remote_worker(remote: Driver) -> None:
    pid = ok(remote.run("where")).ready.pid
    assert remote.run_while("sleeps", lambda task: task.cancel()) is None
    assert wait_gone(pid), "the remote worker outlived its connection"
    assert ok(remote.run("where")).ready.pid != pid


def test_a_dropped_connection_is_named_and_the_next_job_works(remote: Driver, sshd: Sshd) -> None:
    pid = ok(remote.run("where")).ready.pid

    def drop(_: object) -> None:
        for session in sshd.sessions():
            os.kill(session, signal.SIGKILL)

    f = failed(remote.run_while("sleeps", drop))
    assert f.kind == "remote_lost", f
    assert f.message.startswith("remote loop (ssh ks-test): the connection or the remote worker")
    assert "mid-job" in f.message
    assert wait_gone(pid), "the remote worker outlived its connection"
    assert ok(remote.run("where")).ready.pid != pid


def test_a_remote_worker_killed_mid_job_is_named(remote: Driver) -> None:
    pid = ok(remote.run("where")).ready.pid
    f = failed(remote.run_while("sleeps", lambda _: os.kill(pid, signal.SIGKILL)))
    assert f.kind == "remote_lost", f
    assert f.message.startswith("remote loop (ssh ks-test): ") and "mid-job" in f.message
    ok(remote.run("where"))


# --- remotes that cannot run ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def no_torch_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    venv = tmp_path_factory.mktemp("venv") / "notorch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


@pytest.mark.parametrize(
    ("fields", "kind", "words"),
    [
        ({"host": "ks-wrong-key"}, "remote_auth", "Permission denied (publickey)"),
        ({"host": "ks-no-host"}, "remote_unreachable", "Could not resolve hostname"),
        ({"host": "ks-bad-hostkey"}, "remote_host_key", "REMOTE HOST IDENTIFICATION HAS CHANGED"),
        ({"python": "/nonexistent/bin/python3"}, "remote_no_python", "No such file or directory"),
        ({"python": "NO_TORCH"}, "no_torch", "torch is not importable"),
    ],
)
def test_remotes_that_cannot_run_say_why(
    sshd: Sshd, proj: Path, no_torch_python: str, fields: dict[str, str], kind: str, words: str
) -> None:
    if fields.get("python") == "NO_TORCH":
        fields = {"python": no_torch_python}
    bad = ssh_remote(sshd, "bad", **fields)
    d = Driver(Launcher(remote=bad, start_timeout=60), proj)
    try:
        t0 = time.monotonic()
        f = failed(d.run("where"))
        assert time.monotonic() - t0 < 30
    finally:
        d.close()
    assert f.kind == kind, f
    assert f.message.startswith(f"remote bad (ssh {bad.host}): "), f.message
    assert words in f.message, f.message


# --- other ways in: command prefixes, ProxyJump, workdir ------------------------------------------


def test_command_kind_through_ssh_quotes_for_the_remote_shell(sshd: Sshd, proj: Path) -> None:
    prefix = ("ssh", *sshd.ssh_options, "ks-test")
    via = Remote(
        "hop", "command", prefix=prefix, python=sys.executable, env={"KS_REMOTE_MARK": "a b"}
    )
    d = Driver(Launcher(remote=via), proj)
    try:
        result = ok(d.run("where"))
    finally:
        d.close()
    assert printed(result, "MARK") == "a b"
    assert not Path(printed(result, "FILE")).is_relative_to(proj)
    assert result.finished.sidecar.path == str(proj / "pkg" / "model.py")


def test_command_kind_without_ssh_passes_argv_as_is(files: Path) -> None:
    plain = Remote(
        "plain", "command", prefix=("env", "KS_REMOTE_MARK=plain"), python=sys.executable
    )
    d = Driver(Launcher(remote=plain), files)
    try:
        result = ok(d.run("where"))
    finally:
        d.close()
    assert printed(result, "MARK") == "plain"
    assert not Path(printed(result, "FILE")).is_relative_to(files)


def test_a_relative_workdir_is_taken_from_the_home_directory(files: Path, tmp_path: Path) -> None:
    """Wherever the remote starts the worker (a Ray job starts in a temporary folder of
    Ray's, a scheduler's prefix anywhere), a relative workdir is the home's, as for ssh."""
    home = tmp_path / "home"
    shutil.copytree(files, home / "src" / "proj", ignore=shutil.ignore_patterns(".kernelscope"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    prefix = ("env", f"HOME={home}", "sh", "-c", f'cd {elsewhere} && exec "$@"', "sh")
    away = Remote("away", "command", prefix=prefix, python=sys.executable, workdir="src/proj")
    d = Driver(Launcher(remote=away), files)
    try:
        result = ok(d.run("where"))
    finally:
        d.close()
    assert printed(result, "FILE") == str(home / "src" / "proj" / "pkg" / "model.py")


def test_workdir_through_a_proxyjump_runs_the_copy_there(
    sshd: Sshd, proj: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "elsewhere" / "proj"
    shutil.copytree(proj, copy, ignore=shutil.ignore_patterns(".kernelscope"))
    jump = ssh_remote(sshd, "jump", host="ks-jump", workdir=str(copy))
    d = Driver(Launcher(remote=jump), proj)
    try:
        result = ok(d.run("forward"))
        where = ok(d.run("where"))
    finally:
        d.close()
    assert printed(where, "FILE") == str(copy / "pkg" / "model.py")
    lines = {s.path for s in result.finished.sidecar.lines}
    assert lines == {str(proj / "pkg" / "model.py"), str(proj / "pkg" / "helpers.py")}


# --- the CLI and the editor -----------------------------------------------------------------------


def kernelscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelscope", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )


def test_in_place_on_an_ssh_remote_runs_in_the_worker_there_that_never_profiles(
    sshd: Sshd, tmp_path: Path
) -> None:
    """In place, the steps before the profiler starts are the timing: on an ssh remote the
    job runs in the clean worker there, as locally."""
    local = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", local, ignore=shutil.ignore_patterns("out"))
    (local / "pyproject.toml").write_text(
        "[project]\nname = 'minigpt'\n\n[tool.kernelscope.remotes.loop]\n"
        f'kind = "ssh"\nhost = "ks-test"\npython = {json.dumps(sys.executable)}\n'
        f"ssh_options = {json.dumps(sshd.ssh_options)}\n"
        'env = { OMP_NUM_THREADS = "1" }\n'
    )
    train = "train_main.py --max_iters 20 --device cpu --num_workers 2"  # DataLoader workers
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", "train_main.py::train_step", "--via",
         train, "--in-place", "--skip", "5", "--remote", "loop", "--device", "cpu", "--json",
         "--no-lines"],
        capture_output=True, text=True, check=False, timeout=240, cwd=local,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["runner"]["remote"] == "loop"
    assert report["timing"]["unprofiled_process"] == (
        "before the profiler started, in a worker that never profiled"
    )


def test_cli_profile_on_a_remote(proj: Path) -> None:
    fast = ("--device", "cpu", "--wait", "0", "--warmup", "1", "--active", "2")
    done = kernelscope(
        "profile", f"{proj}/pkg/model.py::forward", "--remote", "loop", "--json", *fast
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["runner"]["remote"] == "loop"
    assert report["runner"]["host"] == socket.gethostname()
    assert report["lines"][0]["path"] == str(proj / "pkg" / "helpers.py")
    assert Path(report["trace"]["path"]).is_relative_to(proj / ".kernelscope" / "traces")
    text = kernelscope("profile", f"{proj}/pkg/model.py::forward", "--remote", "loop", *fast)
    assert text.returncode == 0, text.stderr
    assert f"host {socket.gethostname()} via loop" in text.stdout


def test_cli_unknown_remote_is_a_usage_error(proj: Path) -> None:
    done = kernelscope("profile", f"{proj}/pkg/model.py::forward", "--remote", "nope")
    assert done.returncode == 2
    assert "no remote named 'nope'; defined: loop" in done.stderr


async def test_editor_offers_and_runs_profile_on_each_remote(sshd: Sshd, proj: Path) -> None:
    from_settings = {"host": "ks-test", "python": sys.executable, "ssh_options": sshd.ssh_options}
    client = await start(proj, settings={**FAST, "remotes": {"box": from_settings}})
    try:
        uri = open_doc(client, proj / "pkg" / "model.py")
        commands: dict[str, Any] = {}
        for _ in range(100):  # the server reads its settings just after `initialized`
            actions = await client.text_document_code_action_async(
                lsp.CodeActionParams(
                    lsp.TextDocumentIdentifier(uri),
                    lsp.Range(lsp.Position(10, 4), lsp.Position(10, 4)),
                    lsp.CodeActionContext(diagnostics=[], only=[lsp.CodeActionKind.Source]),
                )
            )
            commands = {
                a.title: list(a.command.arguments or [])
                for a in actions or []
                if isinstance(a, lsp.CodeAction) and a.command
            }
            if "Profile `forward` on box" in commands:
                break
            await asyncio.sleep(0.1)
        assert commands["Profile `forward` on loop"] == [uri, "forward", {"remote": "loop"}]
        assert commands["Profile `forward` on box"] == [uri, "forward", {"remote": "box"}]
        assert "Profile `forward`" in commands
        result = await profile(client, uri, "forward", {"remote": "box"})
        assert result["ok"], result
        last = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.lastReport", [result["run_id"]])
        )
        assert last["report"]["runner"]["remote"] == "box"
        assert last["report"]["lines"][0]["path"] == str(proj / "pkg" / "helpers.py")
        with pytest.raises(Exception, match=r"no remote named 'nope'; defined: box, loop"):
            await profile(client, uri, "forward", {"remote": "nope"})
    finally:
        await stop(client)
