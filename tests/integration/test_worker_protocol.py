"""Every message a real worker sends round-trips through the server's Structs without losing a
field (the worker program driven frame by frame, no launcher in between)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from kernelscope import protocol
from kernelscope.protocol import FRAME_HEADER, RunProfile
from kernelscope.worker import BOOTSTRAP, bootstrap_payload

from support import WORKLOADS

# A project as the user has it locally: it does not exist where the worker runs, so the
# worker can only import it from the files shipped with the request.
SHIPPED_ROOT = "/nonexistent-local/proj"
SHIPPED_FILES = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "from .helper import g\n\n\ndef f():\n    return g()\n",
    "pkg/helper.py": "import torch\n\n\ndef g():\n    return torch.ones(4).cos().sum()\n",
}


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class RawWorker:
    """The worker program driven frame by frame, with no launcher in between."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdin and self.proc.stdout
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.stdin.write(bootstrap_payload())
        self.stdin.flush()

    def send(self, message: protocol.ToWorker) -> None:
        self.stdin.write(protocol.encode_frame(message))
        self.stdin.flush()

    def receive(self) -> bytes:
        header = self.stdout.read(FRAME_HEADER.size)
        assert len(header) == FRAME_HEADER.size, "worker closed its protocol channel"
        return self.stdout.read(FRAME_HEADER.unpack(header)[0])

    def close(self) -> None:
        self.send(protocol.Shutdown())
        self.proc.wait(10)


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    worker = RawWorker()
    seen: dict[str, list[bytes]] = {}
    seen.setdefault("worker_ready", []).append(worker.receive())
    requests = [
        RunProfile(
            job_id=job_id,
            path=str(WORKLOADS / "three_lines.py"),
            qualname=qualname,
            module_name="three_lines",
            project_root=str(WORKLOADS),
            trace_dir=str(tmp_path_factory.mktemp("traces")),
            wait=0,
            warmup=1,
            active=1,
        )
        for job_id, qualname in (("ok", "three_lines"), ("bad", "needs_inputs"))
    ]
    requests.append(
        RunProfile(
            job_id="shipped",
            path=f"{SHIPPED_ROOT}/pkg/mod.py",
            qualname="f",
            module_name="pkg.mod",
            project_root=SHIPPED_ROOT,
            trace_dir="/nonexistent-local/traces",
            files=SHIPPED_FILES,
            return_traces=True,
            wait=0,
            warmup=1,
            active=1,
        )
    )
    requests.append(
        protocol.RunTiming(
            job_id="timed",
            path=str(WORKLOADS / "three_lines.py"),
            qualname="three_lines",
            module_name="three_lines",
            project_root=str(WORKLOADS),
            trace_dir=str(tmp_path_factory.mktemp("timed")),
        )
    )
    for request in requests:
        worker.send(request)
        while True:
            body = worker.receive()
            kind = json.loads(body)["type"]
            seen.setdefault(kind, []).append(body)
            if kind != "job_progress":
                break
    worker.close()
    return seen


@pytest.mark.parametrize(
    "kind",
    ["worker_ready", "job_progress", "profile_finished", "profile_failed", "timing_finished"],
)
def test_round_trip(frames: dict[str, list[bytes]], kind: str) -> None:
    assert frames.get(kind), f"the worker sent no {kind} frame"
    for body in frames[kind]:
        message = protocol.decode_from_worker(body)
        again = json.loads(msgspec.json.encode(message))
        assert _normalize(again) == _normalize(json.loads(body))


def test_shipped_job_returns_local_paths_and_its_traces(frames: dict[str, list[bytes]]) -> None:
    bodies = [protocol.decode_from_worker(b) for b in frames["profile_finished"]]
    done = next(m for m in bodies if m.job_id == "shipped")
    assert isinstance(done, protocol.ProfileFinished)
    assert done.sidecar.path == f"{SHIPPED_ROOT}/pkg/mod.py"
    paths = {(s.path, s.line) for s in done.sidecar.lines}
    assert {(f"{SHIPPED_ROOT}/pkg/mod.py", 5), (f"{SHIPPED_ROOT}/pkg/helper.py", 5)} <= paths
    names = {done.trace_path.rsplit("/", 1)[1], str(done.sidecar.cold.trace_path).rsplit("/", 1)[1]}
    assert set(done.traces) == names
    for data in done.traces.values():
        assert "traceEvents" in json.loads(gzip.decompress(data))
    ops = {
        e.get("name") for e in json.loads(gzip.decompress(done.traces[min(names)]))["traceEvents"]
    }
    assert "aten::cos" in ops
