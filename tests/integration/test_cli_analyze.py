"""`kernelscope analyze` as a user runs it, on hand-built traces: an unreadable trace exits 1
with one line, bad events give a partial analysis with warnings, never a traceback; every kind
of trace gives the documented JSON and text. (The analyses themselves on these traces:
tests/unit/test_trace_kinds.py and tests/unit/test_bad_traces.py.)
"""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import REPO_ROOT
from support.traces import (
    ANNOTATED,
    CPU_ONLY,
    NESTED_CALLS_MODULE,
    ROCM,
    TWO_STREAMS,
    doc,
    dumps,
    gpu,
    launch,
    span,
    step,
    write,
)


def kernelscope(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelscope", "analyze", str(path), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "XDG_CACHE_HOME": str(path.parent / "cache")},
        timeout=120,
    )


# -- fatal: exit 1 with one line -------------------------------------------------------------

GOOD = dumps(ANNOTATED)
FATAL: dict[str, bytes] = {
    "truncated gzip": gzip.compress(GOOD)[: len(gzip.compress(GOOD)) // 2],
    "gzip header only": gzip.compress(GOOD)[:10],
    "truncated json": GOOD[: len(GOOD) // 2],
    "truncated json at one byte": GOOD[:1],
    "not json": b"this is not a trace\n",
    "binary": bytes(range(256)) * 4,
    "empty object": b"{}",
    "a list": b"[]",
    "a list of events": dumps(ANNOTATED["traceEvents"]),
    "traceEvents a number": b'{"traceEvents": 3}',
    "traceEvents null": b'{"traceEvents": null}',
    "traceEvents empty": b'{"traceEvents": []}',
    "a string": b'"traceEvents"',
    "empty file": b"",
    "whitespace": b" \n\t ",
    "gzip of nothing": gzip.compress(b""),
    "all events lack fields": dumps({"traceEvents": [{"ph": "X"}, {"name": "a"}, {}]}),
    "all durations bad": dumps(
        doc(
            span("cpu_op", "aten::add", 0.0, -1.0),
            span("cpu_op", "aten::add", 0.0, math.nan),
            span("cpu_op", "aten::add", 0.0, math.inf),
        )
    ),
    "json nested 100 000 deep": b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
    "events nested 100 000 deep in args": GOOD.replace(
        b'"External id": 1}', b'"External id": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    ),
    "not utf-8": b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe"}]}',
}


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("data", FATAL.values(), ids=FATAL.keys())
def test_unreadable_traces_exit_1_with_one_line(tmp_path: Path, data: bytes, as_json: bool) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    done = kernelscope(path, *(["--json"] if as_json else []))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelscope: "), done.stderr
    assert str(path) in lines[0]
    if as_json:
        error = json.loads(done.stdout)["error"]
        assert error["kind"] == "bad_trace" and error["message"] in lines[0]
    else:
        assert done.stdout == ""


def test_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    done = kernelscope(tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"kernelscope: no such file: {tmp_path}"]


# -- partial: exit 0 with the bad events counted in warnings ------------------------------------


def with_bad(*bad: dict[str, Any] | str) -> bytes:
    """TWO_STREAMS with bad events appended."""
    return dumps(TWO_STREAMS | {"traceEvents": [*TWO_STREAMS["traceEvents"], *bad]})


SKIPPED = "skipped events with a bad or missing ph, name, ts or dur"
ADD = span("cpu_op", "aten::add", 30.0, 5.0)
PARTIAL: dict[str, tuple[bytes, list[str]]] = {
    "missing fields": (
        with_bad(
            {k: v for k, v in ADD.items() if k != "dur"},
            {k: v for k, v in ADD.items() if k != "ts"},
            {k: v for k, v in ADD.items() if k != "name"},
            {"ph": "X"},
            "not an event",
        ),
        [f"{SKIPPED}: 5"],
    ),
    "negative durations": (
        with_bad(ADD | {"dur": -1.0}, gpu("k", 50.0, -3.0, 99)),
        [f"{SKIPPED}: 2"],
    ),
    "nan durations": (with_bad(ADD | {"dur": math.nan}), [f"{SKIPPED}: 1"]),
    "infinite times": (
        with_bad(ADD | {"dur": math.inf}, ADD | {"ts": -math.inf}, ADD | {"ts": 1e300}),
        [f"{SKIPPED}: 3"],
    ),
    "args of the wrong type": (
        with_bad(launch("cudaLaunchKernel", 30.0, 1.0, 0) | {"args": {"correlation": "x"}}),
        ["ignored malformed args of cuda_runtime events: 1"],
    ),
    "deviceProperties not a list": (
        with_bad({}).replace(b'"schemaVersion"', b'"deviceProperties": "H200", "schemaVersion"'),
        ["ignored a malformed deviceProperties: 1", f"{SKIPPED}: 1"],
    ),
}


@pytest.mark.parametrize(("data", "warnings"), PARTIAL.values(), ids=PARTIAL.keys())
def test_bad_events_give_a_partial_analysis_with_warnings(
    tmp_path: Path, data: bytes, warnings: list[str]
) -> None:
    path = tmp_path / "partial.json"
    path.write_bytes(data)
    done = kernelscope(path, "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout)
    assert result["warnings"] == warnings
    # the good events are analyzed as if the bad ones were not there
    assert result["verdict"]["bound"] == "memory"
    assert result["verdict"]["gpu_busy_fraction"] == pytest.approx(60 / 90)  # the step's ops
    text = kernelscope(path)
    assert text.returncode == 0 and "warnings" in text.stdout and warnings[0] in text.stdout


def nested(depth: int) -> dict[str, Any]:
    """``depth`` complete events each strictly inside the previous, a kernel in the innermost."""
    events = [span("cpu_op", f"op{i}", float(i), 2.0 * (depth - i)) for i in range(depth)]
    events += [
        launch("cudaLaunchKernel", depth - 0.5, 0.25, 1),
        gpu("k", depth + 1.0, 10.0, 1),
    ]
    return doc(step(1, -1.0, 2.0 * depth + 2), *events)


def test_ten_thousand_nested_events_are_analyzed(tmp_path: Path) -> None:
    depth = 10_000
    path = tmp_path / "deep.json.gz"
    path.write_bytes(gzip.compress(dumps(nested(depth))))
    done = kernelscope(path, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["warnings"] == []
    assert result["steps"] == 1
    assert result["verdict"]["kernels_per_step"] == 1
    innermost = next(r for r in result["ops"] if r["name"] == f"op{depth - 1}")
    assert innermost["self_cuda_us"] == 10.0
    outermost = next(r for r in result["ops"] if r["name"] == "op0")
    assert outermost["cuda_total_us"] == 10.0
    assert outermost["self_cpu_us"] == pytest.approx(2.0)


# -- every kind of trace: the documented JSON and text ---------------------------------------------


def check_schema(data: dict[str, Any]) -> None:
    verdict = data["verdict"]
    assert {"bound", "gpu_busy_fraction", "achieved_tflops", "achieved_gbps", "summary"} <= set(
        verdict
    )
    for f in data["findings"]:
        assert {"code", "severity", "path", "line", "message"} <= set(f)
        assert f["path"] is None or isinstance(f["path"], str)
        assert f["line"] is None or isinstance(f["line"], int)
    assert "entry_to_first_kernel_us" in data["dead_window"]
    assert isinstance(data["warnings"], list)


def test_cli_json_on_a_cpu_only_trace(tmp_path: Path) -> None:
    path = write(tmp_path / "cpu.json.gz", CPU_ONLY, compress=True)
    done = kernelscope(path, "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    data = json.loads(done.stdout)
    check_schema(data)
    assert data["verdict"]["bound"] == "host"
    assert data["verdict"]["gpu_busy_fraction"] is None
    assert data["verdict"]["achieved_tflops"] is None
    assert data["dead_window"]["entry_to_first_kernel_us"] is None
    assert [f["code"] for f in data["findings"]] == ["KS104"]
    assert data["steps"] == 2


def test_cli_json_on_a_rocm_trace(tmp_path: Path) -> None:
    path = write(tmp_path / "rocm.json", ROCM)
    done = kernelscope(path, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    check_schema(data)
    v = data["verdict"]
    assert v["bound"] == "compute"
    assert v["gpu_busy_fraction"] == pytest.approx(2100 / 2180)
    assert v["achieved_tflops"] == pytest.approx(2 * 8192**3 / 2100 / 1e6)
    assert v["achieved_gbps"] == pytest.approx(2 * 3 * 8192 * 8192 * 2 / 2100 / 1e3)
    assert v["summary"].startswith("compute-bound")
    assert data["device"] == "AMD Instinct MI300X"
    assert data["dead_window"]["entry_to_first_kernel_us"] == pytest.approx(40.0)
    assert {f["code"] for f in data["findings"]} == {"KS103", "KS301"}


def test_cli_text_on_a_two_stream_trace(tmp_path: Path) -> None:
    path = write(tmp_path / "two.json", TWO_STREAMS)
    done = kernelscope(path)
    assert done.returncode == 0, done.stderr
    assert "memory-bound: GPU busy 67%" in done.stdout
    assert "KS301" in done.stdout


# -- time per function from a raw trace's Python frames ----------------------------------------

RAW_TRAIN = REPO_ROOT / "fixtures" / "train_mlp" / "raw.json.gz"


def test_cli_text_on_a_raw_trace_with_stacks() -> None:
    """train_mlp's raw H200 trace (``with_stack=True``, paths recorded as ``train_mlp.py``):
    its two functions at their def lines in the fixture's folder, CPU and GPU time each (the
    backward's kernels under train_step), the lines left to a live run; no empty field."""
    done = kernelscope(RAW_TRAIN, "--trace-only", "--root", "fixtures/train_mlp")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    table = text[text.index("\nfunctions (") :].splitlines()
    assert " ".join(table[2].split()) == "function calls self CPU CPU total self GPU GPU total def"
    step, forward = table[3].split(), table[4].split()
    assert (step[0], step[1], step[-1]) == ("train_step", "3", "fixtures/train_mlp/train_mlp.py:19")
    assert (forward[0], forward[1], forward[-1]) == (
        "MLP.forward",
        "3",
        "fixtures/train_mlp/train_mlp.py:15",
    )
    assert " ".join(step[2:10]) == "11.64 ms 15.08 ms 5.05 ms 6.64 ms"
    assert "launched outside them" not in text  # backward's kernels count under train_step
    assert "time per line inside a function is not in a trace: profile it live" in text
    assert not [ln for ln in text.splitlines() if ln.rstrip().endswith((" -", "—"))]

    as_json = kernelscope(RAW_TRAIN, "--trace-only", "--root", "fixtures/train_mlp", "--json")
    assert as_json.returncode == 0, as_json.stderr
    functions = json.loads(as_json.stdout)["functions"]
    rows = {r["qualname"]: r for r in functions["rows"]}
    assert set(rows) == {"train_step", "MLP.forward"}
    assert rows["train_step"]["path"] == "train_mlp.py" and rows["train_step"]["line"] == 19
    assert rows["train_step"]["local_path"] == str(REPO_ROOT / "fixtures/train_mlp/train_mlp.py")
    assert rows["train_step"]["calls"] == 3
    assert functions["frames_seen"] == 1299


def test_cli_text_without_stacks_or_gpu_has_no_empty_fields(tmp_path: Path) -> None:
    """A CPU trace: no "entry → first kernel -" line; the functions section says why it
    has none."""
    events = [e for e in CPU_ONLY["traceEvents"] if e.get("cat") != "python_function"]
    path = write(tmp_path / "cpu.json", CPU_ONLY | {"traceEvents": events})
    done = kernelscope(path)
    assert done.returncode == 0, done.stderr
    assert "entry → first kernel" not in done.stdout
    assert "functions   the trace has no Python frames (record with with_stack=True" in done.stdout


def test_a_missing_root_is_a_usage_error(tmp_path: Path) -> None:
    done = kernelscope(RAW_TRAIN, "--root", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"kernelscope: --root: no such folder: {tmp_path / 'nope'}"]


RECORD = """import torch
from torch.profiler import ProfilerActivity, profile
from pkg.model import outer

a = torch.randn(64, 64)
with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
    for _ in range(3):
        outer(a, a)
prof.export_chrome_trace("cpu.pt.trace.json")
"""


def test_cli_text_on_a_cpu_trace_recorded_elsewhere(tmp_path: Path) -> None:
    """A real CPU trace recorded with ``with_stack=True`` in one folder (Kineto writes
    ``pkg/model.py``), analyzed against a checkout elsewhere: the functions at their def
    lines there, the script's body as module level, no CUDA columns and no empty field."""
    pytest.importorskip("torch")
    machine, checkout = tmp_path / "machine", tmp_path / "checkout"
    for root in (machine, checkout / "src"):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "model.py").write_text(NESTED_CALLS_MODULE)
    (machine / "record.py").write_text(RECORD)
    subprocess.run(
        [sys.executable, "record.py"], cwd=machine, check=True, capture_output=True, timeout=120
    )
    done = kernelscope(machine / "cpu.pt.trace.json", "--root", str(checkout))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "CUDA" not in text and "GPU" not in text.split("\nfunctions (")[1]
    rows = {ln.split()[0]: ln.split() for ln in text.split("\nfunctions (")[1].splitlines()[2:5]}
    assert rows["outer"][1] == "3" and rows["outer"][-1].endswith("checkout/src/pkg/model.py:8")
    assert rows["inner"][1] == "6" and rows["inner"][-1].endswith("checkout/src/pkg/model.py:4")
    assert rows["<module>"][-2:] == ["(module", "level)"]
    assert "ops (totals over 1 step)" in text
    assert not [ln for ln in text.splitlines() if " - " in ln or ln.rstrip().endswith(" -")]
