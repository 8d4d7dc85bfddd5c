"""The warmed schedule's events against the memory allowed them (the worker program run as
a module): recorded as asked, over fewer active steps, without shapes, or refused before the
schedule runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from support import FIXTURES
from support.worker import worker_namespace

COLD_TRACES = sorted(FIXTURES.glob("*/cold.json.gz"))


@pytest.fixture(scope="module")
def worker() -> dict[str, Any]:
    return worker_namespace()


GB = 1e9


def test_events_that_fit_are_recorded_as_asked(worker) -> None:
    recording = worker["recording"]
    assert recording(10_000, 5, 20 * GB, True) == (5, True, "")  # 1 GB of a 10 GB allowance
    assert recording(10_000, 5, None, True) == (5, True, "")  # off Linux: not known
    assert recording(0, 5, 1.0, True) == (5, True, "")  # no cold trace


def test_fewer_active_steps_keep_the_shapes_where_one_fits(worker) -> None:
    """150 k events a call (a large model's training step with its kernels): 3 GB a step
    with shapes; 10 GB allowed holds three of the five asked."""
    assert worker["recording"](150_000, 5, 20 * GB, True) == (
        3,
        True,
        "3 active steps, not 5: one call makes 150,000 profiler events, and more "
        "would take over the 10.0 GB allowed",
    )


def test_events_that_fit_only_without_shapes_drop_them_and_say_so(worker) -> None:
    """minGPT's Trainer.run: ~600 k events a call (500 tokens generated at iteration 0), one
    active call (each is 21 s) on a host with 20 GB available: 12 GB with shapes is over the
    10 GB allowed, 3 GB without is not."""
    assert worker["recording"](600_000, 1, 20 * GB, True) == (
        1,
        False,
        "recorded without shapes (no FLOPs or bytes per op): one call makes 600,000 profiler "
        "events, which with shapes would take ~12.0 GB per call, over the 10.0 GB allowed",
    )
    assert worker["recording"](600_000, 1, 20 * GB, False) == (1, False, "")  # as asked
    assert worker["recording"](600_000, 5, 20 * GB, False)[:2] == (3, False)


def test_events_that_would_not_fit_at_all_are_refused(worker) -> None:
    with pytest.raises(worker["JobError"]) as told:
        worker["recording"](3_000_000, 5, 20 * GB, True)
    assert told.value.kind == "trace_too_large"
    assert told.value.message.startswith(
        "One call makes 3.0 million profiler events (its cold call), and profiling one would "
        "take ~15.0 GB, over the 10.0 GB allowed"
    )


def test_the_users_allowance_wins(worker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_PROFILER_GB", "100")
    assert worker["recording"](600_000, 1, 20 * GB, True) == (1, True, "")
    for bad in ("nonsense", "", "-1", "0", "inf", "nan"):
        monkeypatch.setenv("KERNELSCOPE_PROFILER_GB", bad)
        assert worker["room_bytes"](20 * GB) == 10 * GB
    monkeypatch.setenv("KERNELSCOPE_PROFILER_GB", "2.5")
    assert worker["room_bytes"](None) == 2.5 * GB  # set: the host's memory is not needed


def test_the_cold_traces_events_are_counted_as_it_is_gzipped(worker, tmp_path: Path) -> None:
    events = [{"ph": "X", "name": "aten::add" + "x" * 200, "ts": i} for i in range(20_000)]
    plain = tmp_path / "cold.json"
    plain.write_text(json.dumps({"traceEvents": events}))  # 4 MB: the count crosses 1 MB chunks
    out, counted = worker["gzip_file"](str(plain))
    assert (out, counted) == (str(plain) + ".gz", 20_000) and not plain.exists()
    with gzip.open(out, "rt") as f:
        assert json.load(f) == {"traceEvents": events}
    for split in (3, 4, 5):  # a key across the first 1 MB chunk's end is counted once
        plain.write_bytes(b" " * ((1 << 20) - split) + b'[{"ph": "X"}, {"ph": "X"}]')
        assert worker["gzip_file"](str(plain))[1] == 2


@pytest.mark.parametrize("path", COLD_TRACES, ids=lambda p: p.parent.name)
def test_recorded_cold_traces_count_every_event(worker, path: Path, tmp_path: Path) -> None:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    plain = tmp_path / "cold.json"
    plain.write_bytes(raw)
    assert worker["gzip_file"](str(plain))[1] == len(json.loads(raw)["traceEvents"])
