"""Ray remotes (``kind = "ray"``) against a throwaway local Ray head with token auth.

The head has 2 CPUs and no GPU: CPU jobs run, a job that asks for a GPU cannot be scheduled.
Skips when ``ray`` (``pip install "ray[default]"``) is missing; fails instead under
``KERNELSCOPE_REQUIRE_RAY=1`` (CI).
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelscope.cli.main import main
from kernelscope.engine.launcher import Launcher
from kernelscope.engine.ray_jobs import RayJobs
from kernelscope.engine.remotes import Remote
from kernelscope.protocol import ProfileFailed

from support import WORKLOADS
from support.jobs import failed, ok
from support.remote_project import Driver, write_project

pytestmark = pytest.mark.ray
RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RayHead:
    def __init__(self, address: str, token_file: Path) -> None:
        self.address = address
        self.token_file = token_file


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayHead]:
    """`ray start --head` with RAY_AUTH_MODE=token and its own token file; `ray stop` after."""
    why = (
        None if RAY.is_file() else f"no `ray` next to {sys.executable} (pip install 'ray[default]')"
    )
    if why is not None:
        if os.environ.get("KERNELSCOPE_REQUIRE_RAY"):
            pytest.fail(f"KERNELSCOPE_REQUIRE_RAY is set (CI) but {why}")
        pytest.skip(f"needs Ray: {why}")
    tmp = tmp_path_factory.mktemp("ray")
    token = tmp / "token"
    token.write_text(secrets.token_hex(32))
    port, dash = _free_port(), _free_port()
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    start = [
        str(RAY), "start", "--head", "--num-cpus", "2", "--num-gpus", "0",
        "--include-dashboard=true", "--dashboard-host", "127.0.0.1",
        "--dashboard-port", str(dash), "--port", str(port),
        "--min-worker-port", "30000", "--max-worker-port", "30999",
        "--disable-usage-stats",
    ]  # fmt: skip
    proc = subprocess.run(start, check=False, env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.fail(f"ray start failed:\n{proc.stdout}\n{proc.stderr}")
    address = f"http://127.0.0.1:{dash}"
    deadline = time.monotonic() + 60
    while True:  # the dashboard's job API comes up a moment after `ray start` returns
        try:
            urllib.request.urlopen(address + "/api/version", timeout=2).close()
            break
        except urllib.error.HTTPError:  # 401 without the token: it is up
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    try:
        yield RayHead(address, token)
    finally:
        subprocess.run(
            [str(RAY), "stop", "--force"], check=False, env=env, capture_output=True, timeout=120
        )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("rayproj") / "proj")


def ray_remote(head: RayHead, **fields: str) -> Remote:
    token = fields.pop("token_file", str(head.token_file))
    return Remote(
        "cluster",
        "ray",
        python=sys.executable,
        address=head.address,
        token_file=token,
        env={"OMP_NUM_THREADS": "1"},
    )


def driver(head: RayHead, files: Path, schedule_timeout: float = 120.0, **fields: str) -> Driver:
    return Driver(RayJobs(ray_remote(head, **fields), schedule_timeout=schedule_timeout), files)


def test_a_cpu_job_on_ray_agrees_with_a_local_run(ray_head: RayHead, files: Path) -> None:
    local = Driver(
        Launcher(python=sys.executable, env={**os.environ, "OMP_NUM_THREADS": "1"}), files
    )
    there_ = driver(ray_head, files)
    try:
        here = local.report(ok(local.run("forward")), "forward")
        t0 = time.monotonic()
        result = ok(there_.run("forward"))
        print(f"ray job: {time.monotonic() - t0:.1f} s")
        there = there_.report(result, "forward")
    finally:
        local.close()
        there_.close()
    assert {(o.name, o.calls) for o in there.ops} == {(o.name, o.calls) for o in here.ops}
    assert (there.runner.remote, there.runner.host) == ("cluster", socket.gethostname())
    assert Path(there.trace.path).parent == files / ".kernelscope" / "traces"
    assert Path(there.trace.path).stat().st_size > 0
    assert there.lines and there.lines[0].path == str(files / "pkg" / "helpers.py")
    assert any(p.stage == "cold" for p in there_.progress)


def test_a_call_is_timed_again_in_a_ray_job_that_never_profiles(
    ray_head: RayHead, files: Path
) -> None:
    """The profiling job's timing follows its cold call under the profiler, which slows
    host-bound code in that process for good: a host-bound call (`always` here: no GPU) is
    timed again in one more job, whose process never starts the profiler."""
    d = Driver(RayJobs(ray_remote(ray_head), clean_timing="always"), files)
    try:
        result = ok(d.run("forward"))
    finally:
        d.close()
    timing = result.finished.sidecar.timing
    assert timing.process == "clean worker", timing
    assert timing.profiling_worker_us_per_call and timing.us_per_call > 0
    assert any(p.stage == "clean_timing" for p in d.progress)


def test_cancel_stops_the_ray_job(ray_head: RayHead, files: Path) -> None:
    d = driver(ray_head, files)
    try:
        assert d.run_while("sleeps", lambda task: task.cancel()) is None
        ray = d.launcher
        assert isinstance(ray, RayJobs) and ray.last_submission is not None

        async def final() -> str:
            for _ in range(100):
                status = await ray.status(ray.last_submission or "")
                if status in ("STOPPED", "FAILED", "SUCCEEDED"):
                    return status
                await asyncio.sleep(0.2)
            return status

        assert d.loop.run_until_complete(final()) == "STOPPED"
    finally:
        d.close()


def test_a_gpu_job_on_a_gpu_less_cluster_is_unschedulable(ray_head: RayHead, files: Path) -> None:
    d = driver(ray_head, files, schedule_timeout=3.0)
    try:
        t0 = time.monotonic()
        failure = failed(d.run("forward", device="cuda"))
        took = time.monotonic() - t0
    finally:
        d.close()
    assert failure.kind == "remote_unschedulable", failure
    assert "remote cluster" in failure.message and "1 GPU" in failure.message, failure.message
    assert "could not schedule the job within 3 s" in failure.message, failure.message
    assert took < 15, took


def test_an_environment_over_one_argument_keeps_a_job_pending(
    ray_head: RayHead, files: Path
) -> None:
    """Why the program and request travel as the job's working_dir: Ray starts the job's
    process with its runtime_env as one argument, and an env_vars of 140 KB (over Linux's 128
    KiB for one argument) kills that process before it registers, so the job never leaves
    PENDING. (A definition with such an env is refused: built here past that check.)"""
    remote = Remote(
        "cluster",
        "ray",
        python=sys.executable,
        address=ray_head.address,
        token_file=str(ray_head.token_file),
        env={"OMP_NUM_THREADS": "1", "KS_TEST_FILLER": "v" * 140_000},
    )
    d = Driver(RayJobs(remote, schedule_timeout=10.0), files)
    try:
        failure = failed(d.run("forward"))
    finally:
        d.close()
    assert failure.kind == "remote_unschedulable", failure
    assert "it asked for no GPU, so its process or runtime environment did not start" in (
        failure.message
    )


def test_a_wrong_token_is_an_auth_error(ray_head: RayHead, files: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    d = driver(ray_head, files, token_file=str(wrong))
    try:
        failure = failed(d.run("forward"))
    finally:
        d.close()
    assert isinstance(failure, ProfileFailed)
    assert failure.kind == "remote_auth", failure
    assert "refused the token" in failure.message and str(wrong) in failure.message


def test_a_missing_token_file_and_a_dead_dashboard_are_named(files: Path, tmp_path: Path) -> None:
    port = _free_port()
    head = RayHead(f"http://127.0.0.1:{port}", tmp_path / "absent")
    d = driver(head, files)
    try:
        assert failed(d.run("forward")).kind == "remote_auth"
        (tmp_path / "absent").write_text("x")
        failure = failed(d.run("forward"))
    finally:
        d.close()
    assert failure.kind == "remote_unreachable", failure
    assert "cannot reach the Ray dashboard" in failure.message


def ranks_project(head: RayHead, root: Path) -> Path:
    """tests/workloads/distributed.py in a project whose remote "cluster" is the head."""
    root.mkdir()
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'dist'\n\n[tool.kernelscope.remotes.cluster]\n"
        f'kind = "ray"\naddress = "{head.address}"\ntoken_file = "{head.token_file}"\n'
        f'python = "{sys.executable}"\n'
    )
    shutil.copy(WORKLOADS / "distributed.py", root / "distributed.py")
    return root


def profile_ranks_on_ray(root: Path, qualname: str, capsys: pytest.CaptureFixture[str]) -> Any:
    status = main(
        [
            "profile", f"{root}/distributed.py::{qualname}", "--nproc", "2", "--device", "cpu",
            "--remote", "cluster", "--wait", "0", "--warmup", "1", "--active", "3", "--json",
        ]
    )  # fmt: skip
    out = capsys.readouterr()
    return status, json.loads(out.out), out.err


def test_ranks_run_in_one_ray_job(
    ray_head: RayHead, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = ranks_project(ray_head, tmp_path / "dist")
    status, report, err = profile_ranks_on_ray(root, "uneven", capsys)
    assert status == 0, err
    assert (report["world_size"], report["backend"], report["straggler"]) == (2, "gloo", 1)
    assert report["verdict"]["bound"] == "straggler"
    for rank, r in enumerate(report["reports"]):
        assert r["runner"]["remote"] == "cluster"
        assert r["communication"]["rank"] == rank and r["communication"]["world_size"] == 2
        trace = Path(r["trace"]["path"])  # the rank's trace, sent back from the Ray job
        assert trace.parent == root / ".kernelscope" / "traces" and trace.name.endswith(
            f"-r{rank}.pt.trace.json.gz"
        )
    with gzip.open(report["merged_trace"], "rt") as f:
        names = {
            e["args"]["name"]
            for e in json.load(f)["traceEvents"]
            if e.get("name") == "process_name"
        }
    assert {"rank 0 · python", "rank 1 · python"} <= names


@pytest.mark.parametrize(
    ("qualname", "cause", "line"),
    [
        ("raises", "rank 1: ValueError: rank 1 has a bad shard", 42),  # the raise
        ("crashes", "rank 1: the worker killed by signal 9 before it reported", None),
    ],
)
def test_a_failing_rank_in_a_ray_job_is_named_first_and_stops_the_others(
    ray_head: RayHead,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    qualname: str,
    cause: str,
    line: int | None,
) -> None:
    root = ranks_project(ray_head, tmp_path / "dist")
    t0 = time.monotonic()
    status, report, _ = profile_ranks_on_ray(root, qualname, capsys)
    took = time.monotonic() - t0
    assert status != 0
    message = report["error"]["message"]
    assert message.startswith("rank 1 of 2 failed: ") and cause in message, message
    # rank 0 learns of it in its all_reduce (the peer's connection closed) or is stopped
    peer = r"Connection closed by peer|Connection reset|remote worker crash"  # gloo's words
    gone = rf"rank 0: (.*({peer})|stopped at|never arrived)"
    assert re.search(gone, message), message
    assert report["error"]["line"] == line  # the cause's, not rank 0's all_reduce
    assert took < 60, took  # the others were stopped, not left to the collective's timeout


def test_ray_is_installed_where_required() -> None:
    if os.environ.get("KERNELSCOPE_REQUIRE_RAY"):
        assert RAY.is_file() and shutil.which(str(RAY))


def test_the_one_shot_bootstrap_prints_frames_without_ray(files: Path, tmp_path: Path) -> None:
    """What a Ray job runs, run here directly: its package unpacked in a folder, KSFRAME
    lines out (no Ray needed)."""
    from kernelscope.engine.ray_jobs import (
        FRAME_PREFIX,
        RAY_BOOTSTRAP,
        frames_by_prefix,
        job_env,
        job_package,
    )
    from kernelscope.engine.shipping import remote_request
    from kernelscope.protocol import JobProgress, ProfileFinished, WorkerReady

    d = Driver(Launcher(python=sys.executable), files)
    try:
        request = remote_request(d.request("forward"), ray_remote(RayHead("http://x", files)))
    finally:
        d.close()
    env = {**os.environ, **job_env({"OMP_NUM_THREADS": "1"})}
    name, package = job_package(request)
    assert name.startswith("_ray_pkg_") and name.endswith(".zip")
    work = tmp_path / "working_dir"
    with zipfile.ZipFile(io.BytesIO(package)) as z:
        z.extractall(work)
    proc = subprocess.run(
        [sys.executable, "-u", "-c", RAY_BOOTSTRAP],
        check=False,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    (frames,) = frames_by_prefix(proc.stdout, [FRAME_PREFIX])
    assert proc.returncode == 0, proc.stderr
    assert isinstance(frames[0], WorkerReady) and isinstance(frames[-1], ProfileFinished)
    assert any(isinstance(f, JobProgress) for f in frames)
    assert frames[-1].traces, "the gzip'd traces come back inline"


def test_a_dashboard_that_goes_away_mid_job_is_remote_lost(files: Path) -> None:
    """A stand-in dashboard: takes the job, says RUNNING once, then is gone."""
    import http.server
    import json
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def _json(self, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"] or 0))
            self._json({"submission_id": "x", "job_id": None})

        def do_PUT(self) -> None:  # the job's package
            self.rfile.read(int(self.headers["Content-Length"] or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            if self.path.startswith("/api/packages/"):  # not there yet: the client PUTs it
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path.endswith("/logs"):
                self._json({"logs": "starting\n"})
                threading.Thread(target=server.shutdown).start()
                threading.Thread(target=server.server_close).start()
            else:
                self._json({"status": "RUNNING"})

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = files / "token"
    token.write_text("t")
    head = RayHead(f"http://127.0.0.1:{server.server_address[1]}", token)
    d = driver(head, files)
    try:
        failure = failed(d.run("forward"))
    finally:
        d.close()
    assert failure.kind == "remote_lost", failure
    assert "cannot reach the Ray dashboard" in failure.message


def minigpt_on_ray(head: RayHead, tmp_path: Path) -> Path:
    """A copy of tests/workloads/minigpt with the Ray head as its remote `cluster`."""
    local = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", local, ignore=shutil.ignore_patterns("out"))
    (local / "pyproject.toml").write_text(
        "[project]\nname = 'minigpt'\n\n"
        '[tool.kernelscope.remotes.cluster]\nkind = "ray"\n'
        f"address = {json.dumps(head.address)}\n"
        f"token_file = {json.dumps(str(head.token_file))}\n"
        f"python = {json.dumps(sys.executable)}\n"
        'env = { OMP_NUM_THREADS = "1" }\n'
    )
    return local


def profile_in(local: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    """`kernelscope profile ARGS` on the remote `cluster` from the project's folder, as a user
    runs it there (CPU, JSON, no line pass): the report."""
    cwd = Path.cwd()
    os.chdir(local)
    try:
        code = main(["profile", *args, "--remote", "cluster", "--device", "cpu", "--json",
                     "--no-lines"])  # fmt: skip
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    return json.loads(out)


def test_a_program_runs_on_ray_with_via(
    ray_head: RayHead, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--via on a Ray remote: the program's folder travels with the job (its scripts,
    configs and text data) and runs there to the call; the report names the local files."""
    local = minigpt_on_ray(ray_head, tmp_path)
    train = "train.py config/tiny.py --max_iters=3 --eval_interval=2 --device=cpu"
    report = profile_in(local, capsys, "model.py::Block.forward", "--via", train, "--call", "2")
    assert report["runner"]["remote"] == "cluster"
    site = report["call_site"]
    assert (site["call"], site["captured"]) == (2, True)
    assert site["caller_path"] == str(local / "model.py")
    assert report["function"]["path"] == str(local / "model.py")
    assert site["saved"] is None and site["reused"] is False  # no capture is kept remotely


def test_in_place_on_ray_the_steps_are_timed_where_the_profiler_was_never_warmed(
    ray_head: RayHead, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In place, the steps before the profiler starts are the timing, as locally in the worker
    that never profiles: the Ray job's worker does not warm its profiler at start."""
    local = minigpt_on_ray(ray_head, tmp_path)
    train = "train_main.py --max_iters 20 --device cpu --num_workers 0"
    report = profile_in(
        local, capsys, "train_main.py::train_step", "--via", train, "--in-place", "--skip", "5"
    )
    assert report["timing"]["unprofiled_process"] == (
        "before the profiler started, in a worker that never profiled"
    )
    assert report["call_site"]["modes"][0].startswith("calls 6-14 profiled")
