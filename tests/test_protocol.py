"""Every worker message round-trips through the server's Structs without losing a field."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from kernelscope import protocol
from kernelscope.protocol import FRAME_HEADER, RunProfile
from kernelscope.worker import BOOTSTRAP, bootstrap_payload

from conftest import WORKLOADS


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
    for job_id, qualname in (("ok", "three_lines"), ("bad", "needs_inputs")):
        worker.send(
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
        )
        while True:
            body = worker.receive()
            kind = json.loads(body)["type"]
            seen.setdefault(kind, []).append(body)
            if kind != "job_progress":
                break
    worker.close()
    return seen


@pytest.mark.parametrize(
    "kind", ["worker_ready", "job_progress", "profile_finished", "profile_failed"]
)
def test_round_trip(frames: dict[str, list[bytes]], kind: str) -> None:
    assert frames.get(kind), f"the worker sent no {kind} frame"
    for body in frames[kind]:
        message = protocol.decode_from_worker(body)
        again = json.loads(msgspec.json.encode(message))
        assert _normalize(again) == _normalize(json.loads(body))


def test_requests_round_trip() -> None:
    request = RunProfile(
        job_id="j",
        path="/p.py",
        qualname="f",
        module_name="p",
        project_root="/",
        trace_dir="/t",
        source="x = 1\n",
        batch_size=4,
    )
    for message in (request, protocol.Cancel(job_id="j"), protocol.Shutdown()):
        body = protocol.encode_frame(message)[FRAME_HEADER.size :]
        assert protocol.decode_to_worker(body) == message


def test_frames_are_length_prefixed() -> None:
    frame = protocol.encode_frame(protocol.Shutdown())
    (size,) = FRAME_HEADER.unpack(frame[:4])
    assert size == len(frame) - 4
    assert json.loads(frame[4:]) == {"type": "shutdown"}
