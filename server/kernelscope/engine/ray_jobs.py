"""Jobs on a Ray cluster through the Ray Jobs REST API (``kind = "ray"``), standard library only.

Each job is one Ray job whose entrypoint runs the same worker program as every other kind,
one-shot: the bootstrap reads the program and the request from the job's working_dir (a zip
the server uploads with ``PUT /api/packages/gcs/...``, as Ray's own job client does), feeds the
request to the worker's protocol fd, and prints every frame the worker sends as a
``KSFRAME <base64>`` line on stdout. The server submits with ``POST /api/jobs/``
(``Authorization: Bearer`` the token from ``token_file``), polls the job's status and logs,
decodes the frames, and stops the job on cancel, timeout, or when it cannot be scheduled. Not
Ray Client: no Ray or torch import here.

Not environment variables: Ray starts the job's supervisor with the whole runtime_env,
``env_vars`` included, as one argument (``--serialized-runtime-env-context``), and Linux
refuses one argument over 128 KiB (MAX_ARG_STRLEN): the process dies before it registers and
the job stays PENDING.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import io
import json
import shlex
import time
import urllib.error
import urllib.request
import uuid
import zipfile
import zlib
from pathlib import Path
from typing import Any, cast

import msgspec

from kernelscope import protocol
from kernelscope.engine.clean_timing import (
    CLEAN_WORKER,
    TIMING_WORKER_ENV,
    CleanTiming,
    clean_progress,
    host_bound,
    timed_again,
    timing_request,
)
from kernelscope.engine.ranks import GRACE_S, RankState, rank_failure
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobFailed, JobResult, ProgressCallback
from kernelscope.engine.shipping import ShipError, keep_traces, remote_request
from kernelscope.protocol import (
    DIST_TIMEOUT_ENV,
    CalibrationFinished,
    JobOutcome,
    JobProgress,
    ProfileFailed,
    ProfileFinished,
    RunCalibration,
    RunProfile,
    RunTiming,
    RunTry,
    TryFinished,
    WorkerReady,
    failure,
)
from kernelscope.units import cut
from kernelscope.worker import worker_source

FRAME_PREFIX = "KSFRAME "
MAX_PACKAGE_BYTES = 90 * 2**20  # the dashboard reads a request body of up to 100 MiB
SRC_FILE, REQ_FILE = "ks_src.z", "ks_req.z"  # zlib'd, in the job's working_dir
_DONE = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})

# One-shot: program and request from files in the working directory (the request's name in
# KS_REQ_FILE when a rank's), frames out as text lines on stdout. A worker that ran a program
# (--via) ends with os._exit right after its result: os._exit here first waits for the relay
# thread to have written that result out.
RAY_BOOTSTRAP = r"""
import os,sys,base64,zlib,json,threading
def _ks_file(p):
    with open(p,'rb') as f: return zlib.decompress(f.read())
_ks_src=_ks_file('ks_src.z'); _ks_req=_ks_file(os.environ.get('KS_REQ_FILE','ks_req.z'))
_ks_exit=os._exit
_ks_out=os.dup(1)
_ks_r,_ks_w=os.pipe(); _ks_ir,_ks_iw=os.pipe()
os.dup2(_ks_w,1); os.close(_ks_w); os.dup2(_ks_ir,0); os.close(_ks_ir)
def _ks_feed():
    for b in (_ks_req,b'{"type":"shutdown"}'):
        d=memoryview(len(b).to_bytes(4,'big')+b)
        while d: d=d[os.write(_ks_iw,d):]
_ks_done=threading.Event()
def _ks_pump():
    f=os.fdopen(_ks_r,'rb'); o=os.fdopen(_ks_out,'wb')
    while True:
        h=f.read(4)
        if len(h)<4: break
        b=f.read(int.from_bytes(h,'big'))
        o.write(b'KSFRAME '+base64.b64encode(b)+b'\n'); o.flush()
        m=json.loads(b)
        if m.get('type','').endswith('_finished') or m.get('type')=='profile_failed':
            _ks_done.set()
    _ks_done.set()
def _ks_end(code=0):
    _ks_done.wait(30)
    sys.stderr.flush()
    _ks_exit(code)
os._exit=_ks_end
threading.Thread(target=_ks_feed,daemon=True).start()
threading.Thread(target=_ks_pump,daemon=True).start()
_ks_code=0
try:
    exec(compile(_ks_src,'kernelscope_worker.py','exec'),{'__name__':'kernelscope_worker'})
except SystemExit as e:
    _ks_code=e.code if isinstance(e.code,int) else 1
_ks_done.wait(30)
sys.stderr.flush()
_ks_exit(_ks_code)
"""


# N ranks in one job: each runs the one-shot bootstrap above as torchrun would start it, its
# request's job_id suffixed -r<rank>; its frames are relayed as KSFRAME<rank> lines, and its
# stderr line by line beside them. A rank that reports a failure, or ends without a result
# (a failure frame is written for it), stops the others after KS_GRACE s (they would wait
# in a collective).
RAY_RANKS_BOOTSTRAP = r"""
import os,sys,json,base64,zlib,socket,subprocess,threading,time
n=int(os.environ['KS_NPROC']); GRACE=float(os.environ['KS_GRACE'])
with open('ks_req.z','rb') as f: req=json.loads(zlib.decompress(f.read()))
s=socket.socket(); s.bind(('127.0.0.1',0)); port=s.getsockname()[1]; s.close()
base=dict(os.environ)
base.setdefault('OMP_NUM_THREADS','1')
procs=[]; jobs=[]
for r in range(n):
    jobs.append('%s-r%d'%(req['job_id'],r))
    mine=zlib.compress(json.dumps(dict(req,job_id=jobs[r])).encode(),6)
    with open('ks_req_%d.z'%r,'wb') as f: f.write(mine)
    env=dict(base,RANK=str(r),WORLD_SIZE=str(n),LOCAL_RANK=str(r),MASTER_ADDR='127.0.0.1',MASTER_PORT=str(port),KS_REQ_FILE='ks_req_%d.z'%r)
    procs.append(subprocess.Popen([sys.executable,'-u','-c',BOOT],env=env,stdout=subprocess.PIPE,stderr=subprocess.PIPE))
lock=threading.Lock(); failed=[]; ended=[False]*n
def put(stream,line):
    with lock:
        stream.write(line); stream.flush()
def relay(r,p):
    for line in p.stdout:
        if line.startswith(b'KSFRAME '):
            try:
                kind=json.loads(base64.b64decode(line[8:])).get('type')
                if kind=='profile_failed': failed.append(time.time())
                if kind in ('profile_finished','profile_failed'): ended[r]=True
            except Exception: pass
            line=b'KSFRAME%d '%r+line[8:]
        put(sys.stdout.buffer,line)
def errors(p):
    for line in p.stderr: put(sys.stderr.buffer,line)
ts=[threading.Thread(target=relay,args=(r,p)) for r,p in enumerate(procs)]
es=[threading.Thread(target=errors,args=(p,)) for p in procs]
for t in ts+es: t.start()
told=[False]*n
while any(p.poll() is None for p in procs) or not all(told):
    for r,p in enumerate(procs):
        # a rank gone without its result (killed, crashed): say so, as its worker would
        if p.poll() is not None and not ts[r].is_alive() and not told[r]:
            told[r]=True
            if p.returncode and not ended[r]:
                c=p.returncode
                why='killed by signal %d'%-c if c<0 else 'exited with code %d'%c
                m={'type':'profile_failed','job_id':jobs[r],'kind':'crash',
                   'message':'the worker '+why+' before it reported'}
                frame=base64.b64encode(json.dumps(m).encode())
                put(sys.stdout.buffer,b'KSFRAME%d '%r+frame+b'\n')
                failed.append(time.time())
    if failed and time.time()-failed[0]>GRACE:
        for p in procs:
            if p.poll() is None: p.kill()
    time.sleep(0.1)
for t in ts+es: t.join()
sys.exit(1 if any(p.returncode for p in procs) else 0)
""".replace("BOOT]", repr(RAY_BOOTSTRAP) + "]", 1)


#: What one frame prefix of a job gave: its outcome and its ready message, if any.
_Slot = tuple[JobOutcome | ProfileFailed | None, WorkerReady | None]


class RayError(Exception):
    """An HTTP exchange with the Ray dashboard failed; `kind` names the cause, `status` the
    HTTP status where one came back."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


def job_env(extra: dict[str, str]) -> dict[str, str]:
    """The job's environment beside the remote's env (the program and request are files)."""
    return {**extra, "KINETO_LOG_LEVEL": "99", "PYTHONUNBUFFERED": "1"}


def job_package(request: RunProfile | RunTry | RunCalibration | RunTiming) -> tuple[str, bytes]:
    """The job's working_dir: a zip of the program and the request, named by its content
    (``_ray_pkg_<hash>.zip``, the form Ray's packages take)."""
    members = {
        SRC_FILE: zlib.compress(worker_source(), 6),
        REQ_FILE: zlib.compress(msgspec.json.encode(request), 6),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    data = buf.getvalue()
    return f"_ray_pkg_{hashlib.sha256(data).hexdigest()[:32]}.zip", data


def frames_by_prefix(logs: str, prefixes: list[str]) -> list[list[protocol.FromWorker]]:
    """The frames of each prefix among the log's whole lines, in one pass. A line the log
    holds only in part so far (its end not written yet) waits for the next read; a line that
    is not a frame after all (other output glued to it) is skipped."""
    out: list[list[protocol.FromWorker]] = [[] for _ in prefixes]
    index = {prefix: k for k, prefix in enumerate(prefixes)}
    for line in logs[: logs.rfind("\n") + 1].splitlines():
        if not line.startswith("KSFRAME"):
            continue
        head, _, body = line.partition(" ")
        k = index.get(head + " ")
        if k is None:
            continue
        try:
            out[k].append(protocol.decode_from_worker(base64.b64decode(body.strip())))
        except (binascii.Error, ValueError, msgspec.MsgspecError):
            continue
    return out


def _pending(label: str, sid: str, waited: float, gpus: int) -> str:
    """Why a job still PENDING was given up: no GPU free, or (asking for none) its process
    never started."""
    if gpus:
        need = f"{gpus} GPU{'s' if gpus > 1 else ''}"
        node = "free GPUs" if gpus > 1 else "a free GPU"
        why = f"it asked for {need}; is a node with {node} in the cluster?"
    else:  # a job's supervisor takes no CPU: nothing to wait for but its process
        why = (
            "it asked for no GPU, so its process or runtime environment did not start; "
            "the head's raylet.out and runtime_env_agent.log say why"
        )
    within = f"Ray could not schedule the job within {waited:.0f} s"
    return f"{label}: {within} ({why}); job {sid} was stopped"


def rank_prefix(rank: int) -> str:
    """The prefix of rank ``rank``'s frames in a job of ranks."""
    return f"KSFRAME{rank} "


class RayJobs:
    """Runs each job as one Ray job on the remote's cluster (a JobRunner; nothing stays warm)."""

    warm = False

    def __init__(
        self,
        remote: Remote,
        schedule_timeout: float = 120.0,
        poll_interval: float = 0.25,
        clean_timing: CleanTiming = "auto",
    ) -> None:
        assert remote.kind == "ray" and remote.address
        self.remote = remote
        self.clean_timing: CleanTiming = clean_timing
        self.address = remote.address.rstrip("/")
        self.schedule_timeout = schedule_timeout
        self.poll_interval = poll_interval
        self.last_submission: str | None = None

    # --- HTTP -------------------------------------------------------------------------------

    def _token(self) -> str | None:
        if not self.remote.token_file:
            return None
        path = Path(self.remote.token_file).expanduser()
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise RayError(
                "remote_auth", f"{self.remote.label}: cannot read token_file {path}: {e.strerror}"
            ) from None

    def _http(self, method: str, path: str, body: object | None = None) -> Any:
        if isinstance(body, bytes):  # a package
            data, kind = body, "application/octet-stream"
        else:
            data, kind = None if body is None else json.dumps(body).encode(), "application/json"
        headers = {"Content-Type": kind}
        if (token := self._token()) is not None:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.address + path, data, headers, method=method)
        label = self.remote.label
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(cast(bytes, resp.read()) or b"null")
        except urllib.error.HTTPError as e:
            text = cut(e.read().decode("utf-8", "replace").strip(), 500)
            if e.code in (401, 403):
                how = (
                    f"check token_file ({self.remote.token_file})"
                    if self.remote.token_file
                    else "the cluster wants a token: set token_file in the remote's definition"
                )
                raise RayError(
                    "remote_auth",
                    f"{label}: the Ray dashboard refused the token (HTTP {e.code}); {how}",
                ) from None
            raise RayError(
                "remote_http", f"{label}: {method} {path} answered HTTP {e.code}: {text}", e.code
            ) from None
        except (urllib.error.URLError, OSError) as e:
            why = getattr(e, "reason", e)
            raise RayError(
                "remote_unreachable", f"{label}: cannot reach the Ray dashboard ({why})"
            ) from None

    async def _call(self, method: str, path: str, body: object | None = None) -> Any:
        return await asyncio.to_thread(self._http, method, path, body)

    async def stop(self, submission_id: str) -> None:
        """Ask Ray to stop the job (best effort)."""
        with contextlib.suppress(RayError):
            await self._call("POST", f"/api/jobs/{submission_id}/stop")

    async def _upload(self, name: str, package: bytes) -> None:
        """Put the job's package in the cluster's store unless it is there. The GET first, as
        Ray's job client does: it pins the package a while, so Ray's garbage collector keeps
        it until the job holds it, and drops it once no job does."""
        path = f"/api/packages/gcs/{name}"
        try:
            await self._call("GET", path)
            return
        except RayError as e:
            if e.status != 404:
                raise
        await self._call("PUT", path, package)

    async def status(self, submission_id: str) -> str:
        """The job's status as Ray names it (PENDING, RUNNING, STOPPED, ...)."""
        info = await self._call("GET", f"/api/jobs/{submission_id}")
        return str(cast(dict[str, Any], info).get("status", ""))

    # --- jobs -------------------------------------------------------------------------------

    async def profile(
        self,
        request: RunProfile,
        on_progress: ProgressCallback | None = None,
        timeout: float = 120.0,
    ) -> JobResult:
        """Run one profile job there; JobFailed says why it produced no profile."""
        try:
            request = await asyncio.to_thread(remote_request, request, self.remote)
        except ShipError as e:
            raise JobFailed(failure(e.kind, f"{self.remote.label}: {e}")) from None
        in_place = request.entry is not None and request.entry.in_place
        # In place, the steps before the profiler starts are the timing: in a process that
        # never warmed the profiler, as a local in-place job runs in the clean worker.
        clean = {TIMING_WORKER_ENV: CLEAN_WORKER} if in_place else None
        finished, ready = await self.run(request, on_progress, timeout, clean)
        assert isinstance(finished, ProfileFinished)
        if not in_place and (
            self.clean_timing == "always" or (self.clean_timing == "auto" and host_bound(finished))
        ):
            finished = await self._time_cleanly(request, finished, on_progress, timeout)
        try:
            finished = await asyncio.to_thread(keep_traces, finished, Path(request.trace_dir))
        except (ShipError, OSError) as e:
            raise JobFailed(failure("internal", f"cannot keep the traces: {e}")) from None
        return JobResult(finished, ready)

    async def _time_cleanly(
        self,
        request: RunProfile,
        finished: ProfileFinished,
        on_progress: ProgressCallback | None,
        timeout: float,
    ) -> ProfileFinished:
        """Time the call again in one more job, whose process never profiles: the profiling
        job's timing came after its cold call under the profiler, which slows host-bound
        code in its process for good. No host reference goes with it (the job may run on
        another node, where neither a host reference nor a saved capture holds: a program runs
        again to its call). On a failure the profiling job's timing stays (and the log says
        why)."""
        job = timing_request(request, finished, None, replay_saved=False)
        progress = clean_progress(on_progress)

        async def run() -> JobOutcome:
            outcome, _ = await self.run(job, progress, timeout, {TIMING_WORKER_ENV: CLEAN_WORKER})
            return outcome

        return await timed_again(finished, run, "profiling job's")

    async def try_variants(
        self,
        request: RunTry,
        on_progress: ProgressCallback | None = None,
        timeout: float = 300.0,
    ) -> tuple[TryFinished, WorkerReady]:
        """Time the function and its variants there, in turns."""
        try:
            request = await asyncio.to_thread(remote_request, request, self.remote)
        except ShipError as e:
            raise JobFailed(failure(e.kind, f"{self.remote.label}: {e}")) from None
        outcome, ready = await self.run(request, on_progress, timeout)
        assert isinstance(outcome, TryFinished)
        return outcome, ready

    async def calibrate(
        self, request: RunCalibration, timeout: float = 300.0
    ) -> tuple[CalibrationFinished, WorkerReady]:
        """Measure the GPU's ceilings there."""
        measured, ready = await self.run(request, None, timeout)
        assert isinstance(measured, CalibrationFinished)
        return measured, ready

    async def run(
        self,
        request: RunProfile | RunTry | RunCalibration | RunTiming,
        on_progress: ProgressCallback | None,
        timeout: float,
        extra: dict[str, str] | None = None,
    ) -> tuple[JobOutcome, WorkerReady]:
        """Submit, wait, read the frames; stop the job on cancel and timeout. `extra`: more
        of the job's environment."""
        gpus = 0 if request.device == "cpu" else 1
        ((outcome, ready),), (sid, status, text) = await self._job(
            request, on_progress, timeout, gpus, [FRAME_PREFIX], extra or {}, RAY_BOOTSTRAP
        )
        if isinstance(outcome, ProfileFailed):
            raise JobFailed(outcome)
        if outcome is None or ready is None:
            raise JobFailed(await self._ended(sid, status, text))
        return outcome, ready

    async def profile_ranks(
        self,
        request: RunProfile,
        nproc: int,
        on_progress: ProgressCallback | None = None,
        timeout: float = 120.0,
    ) -> list[JobResult]:
        """Run ``request`` on ``nproc`` ranks in one Ray job (``entrypoint_num_gpus = nproc``
        on GPUs), started there as torchrun would; their results by rank. JobFailed names
        each rank when one fails."""
        try:
            request = await asyncio.to_thread(remote_request, request, self.remote)
        except ShipError as e:
            raise JobFailed(failure(e.kind, f"{self.remote.label}: {e}")) from None
        gpus = 0 if request.device == "cpu" else nproc
        ranks = [RankState(r) for r in range(nproc)]
        extra = {
            "KS_NPROC": str(nproc),
            "KS_GRACE": f"{GRACE_S:g}",
            DIST_TIMEOUT_ENV: f"{max(5.0, timeout / 2):g}",
        }
        prefixes = [rank_prefix(r) for r in range(nproc)]
        outcomes, (sid, status, text) = await self._job(
            request, on_progress, timeout, gpus, prefixes, extra, RAY_RANKS_BOOTSTRAP, ranks
        )
        for rank, (outcome, ready) in zip(ranks, outcomes, strict=True):
            if isinstance(outcome, ProfileFailed):
                rank.outcome = outcome
            elif isinstance(outcome, ProfileFinished) and ready is not None:
                try:
                    kept = await asyncio.to_thread(keep_traces, outcome, Path(request.trace_dir))
                except (ShipError, OSError) as e:
                    raise JobFailed(failure("internal", f"cannot keep the traces: {e}")) from None
                rank.outcome = JobResult(kept, ready)
        failed = rank_failure(ranks)
        if failed is not None:
            raise JobFailed(failed)
        if any(not isinstance(r.outcome, JobResult) for r in ranks):
            raise JobFailed(await self._ended(sid, status, text))
        return [r.outcome for r in ranks if isinstance(r.outcome, JobResult)]

    async def _job(
        self,
        request: RunProfile | RunTry | RunCalibration | RunTiming,
        on_progress: ProgressCallback | None,
        timeout: float,
        gpus: int,
        prefixes: list[str],
        extra: dict[str, str],
        bootstrap: str,
        ranks: list[RankState] | None = None,
    ) -> tuple[list[_Slot], tuple[str, str, str]]:
        """Submit one Ray job and follow it: the outcome and ready of each frame prefix, and
        (submission id, last status, logs)."""
        env = {**self.remote.env, **job_env(extra)}
        label = self.remote.label
        name, package = job_package(request)
        if len(package) > MAX_PACKAGE_BYTES:
            raise JobFailed(
                failure(
                    "project_too_large",
                    f"{label}: the job's files are {len(package) / 2**20:.1f} MB packed, over "
                    f"the {MAX_PACKAGE_BYTES / 2**20:.0f} MB the Ray dashboard takes in one "
                    "upload; set workdir in the remote's definition to a copy of the project there",
                )
            )
        submission_id = f"kernelscope-{request.job_id}-{uuid.uuid4().hex[:6]}"
        body = {
            "submission_id": submission_id,
            "entrypoint": f"{shlex.quote(self.remote.python)} -u -c {shlex.quote(bootstrap)}",
            "entrypoint_num_gpus": gpus,
            "runtime_env": {"working_dir": f"gcs://{name}", "env_vars": env},
            "metadata": {"kernelscope_job": request.job_id, "kernelscope_remote": self.remote.name},
        }
        deadline = time.monotonic() + min(self.schedule_timeout, 30.0)
        while True:
            try:
                await self._upload(name, package)
                await self._call("POST", "/api/jobs/", body)
                break
            except RayError as e:
                # A head that just started answers 500 "No available agent ... try again later".
                if "try again" in str(e) and time.monotonic() < deadline:
                    await asyncio.sleep(0.5)
                    continue
                raise JobFailed(failure(e.kind, str(e))) from None
        self.last_submission = submission_id
        try:
            return await self._follow(submission_id, on_progress, timeout, gpus, prefixes, ranks)
        except RayError as e:
            await self.stop(submission_id)
            kind = "remote_lost" if e.kind == "remote_unreachable" else e.kind
            message = str(e) if kind != "remote_lost" else f"{e}; the job was {submission_id}"
            raise JobFailed(failure(kind, message)) from None
        except BaseException:
            await asyncio.shield(self.stop(submission_id))
            raise

    async def _follow(
        self,
        sid: str,
        on_progress: ProgressCallback | None,
        timeout: float,
        gpus: int,
        prefixes: list[str],
        ranks: list[RankState] | None,
    ) -> tuple[list[_Slot], tuple[str, str, str]]:
        label = self.remote.label
        submitted = time.monotonic()
        started: float | None = None
        consumed = 0  # the log's characters read already (whole lines)
        ready: list[WorkerReady | None] = [None] * len(prefixes)
        outcome: list[JobOutcome | ProfileFailed | None] = [None] * len(prefixes)
        text = ""
        while True:
            status = await self.status(sid)
            now = time.monotonic()
            if status == "PENDING":
                waited = now - submitted
                if waited > min(self.schedule_timeout, timeout):
                    await self.stop(sid)
                    raise JobFailed(
                        failure("remote_unschedulable", _pending(label, sid, waited, gpus))
                    )
            else:
                started = started or now
                logs = await self._call("GET", f"/api/jobs/{sid}/logs")
                text = str(cast(dict[str, Any], logs or {}).get("logs", ""))
                whole = text[: text.rfind("\n") + 1]
                fresh = frames_by_prefix(whole[consumed:], prefixes)
                consumed = len(whole)
                for k, frames in enumerate(fresh):
                    for msg in frames:
                        if isinstance(msg, WorkerReady):
                            ready[k] = msg
                        elif isinstance(msg, JobProgress):
                            if ranks is not None:
                                ranks[k].stage = protocol.STAGE_LABELS.get(msg.stage, msg.stage)
                            if on_progress is not None and k == 0:
                                on_progress(msg)
                        else:
                            outcome[k] = msg
                if all(o is not None for o in outcome) or status in _DONE:
                    break
                if now - started > timeout:
                    await self.stop(sid)
                    raise JobFailed(
                        failure(
                            "timeout",
                            f"{label}: timed out after {timeout:g} s; job {sid} was stopped",
                        )
                    )
            await asyncio.sleep(self.poll_interval)
        return list(zip(outcome, ready, strict=True)), (sid, status, text)

    async def _ended(self, sid: str, status: str, text: str) -> ProfileFailed:
        """The failure of a job that ended without a result."""
        tail = [ln for ln in text.splitlines() if not ln.startswith("KSFRAME")][-8:]
        info = cast(dict[str, Any], await self._call("GET", f"/api/jobs/{sid}") or {})
        why = info.get("message") or status
        return failure(
            "crash",
            f"{self.remote.label}: job {sid} ended {status} without a result ({why})",
            traceback=tail,
        )

    def start(self) -> None:
        """Nothing stays warm on Ray: each job is its own Ray job."""

    async def close(self) -> None:
        """Nothing to shut down."""
