"""The server's messages to the worker round-trip through its Structs; frames are length-prefixed.
(What a real worker sends back: tests/integration/test_worker_protocol.py.)"""

from __future__ import annotations

import json

import msgspec

from kernelscope import protocol
from kernelscope.protocol import FRAME_HEADER, RunProfile


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
        files={"p.py": "x = 1\n", "pkg/q.py": ""},
        remote_root="~/proj",
        return_traces=True,
    )
    timing = msgspec.convert(msgspec.structs.asdict(request), protocol.RunTiming)
    for message in (request, timing, protocol.Cancel(job_id="j"), protocol.Shutdown()):
        body = protocol.encode_frame(message)[FRAME_HEADER.size :]
        assert protocol.decode_to_worker(body) == message


def test_frames_are_length_prefixed() -> None:
    frame = protocol.encode_frame(protocol.Shutdown())
    (size,) = FRAME_HEADER.unpack(frame[:4])
    assert size == len(frame) - 4
    assert json.loads(frame[4:]) == {"type": "shutdown"}
