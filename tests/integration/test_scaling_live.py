"""The batch-doubling test run live on CPU: `run_scaling` on one warm worker and the `scale`
subcommand, on tests/workloads/three_lines.py (the classifier and the charts on recorded runs:
tests/unit/test_scaling.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kernelscope.analysis.scaling import classify
from kernelscope.app.scale import ScaleFailed, run_scaling
from kernelscope.cli.scale import add_scale_parser, run_scale
from kernelscope.engine.launcher import Launcher, WorkerProcess
from kernelscope.engine.targets import load_target
from kernelscope.protocol import JobProgress

from support import WORKLOADS
from support.png import decode_png

# --- live CPU runs ------------------------------------------------------------------------


async def test_run_scaling_on_one_warm_worker(tmp_path: Path) -> None:
    target = load_target(f"{WORKLOADS}/three_lines.py::sized")
    launcher = Launcher()
    workers: set[int] = set()
    seen: list[tuple[int, JobProgress]] = []

    def on_progress(factor: int, msg: JobProgress) -> None:
        seen.append((factor, msg))
        worker: WorkerProcess | None = launcher.worker
        assert worker is not None
        workers.add(id(worker))

    try:
        points = await run_scaling(
            target, [4, 1, 2], launcher, "cpu", 60.0, on_progress, trace_dir=tmp_path
        )
        # a provider without batch_size: the worker's missing_inputs, on the same worker
        no_batch = load_target(f"{WORKLOADS}/three_lines.py::Scaler.scale")
        with pytest.raises(ScaleFailed) as info:
            await run_scaling(
                no_batch, [1, 2], launcher, "cpu", 60.0, on_progress, trace_dir=tmp_path
            )
    finally:
        await launcher.close()
    assert [(p.factor, p.batch_size) for p in points] == [(1, 1), (2, 2), (4, 4)]
    assert all(p.us_per_call > 0 and p.method == "perf_counter" for p in points)
    assert points[1].growth == pytest.approx(points[1].us_per_call / points[0].us_per_call)
    assert points[2].us_per_item == pytest.approx(points[2].us_per_call / 4)
    assert points[0].device_type == "cpu"
    assert len({p.trace_path for p in points}) == 3
    assert {f for f, _ in seen} == {1, 2, 4}
    assert len(workers) == 1
    classify(points)  # CPU timings of a tiny op are noise; any verdict will do

    failure = info.value.failure
    assert failure.kind == "missing_inputs"
    assert "Scaler_scale_inputs() takes no batch_size" in failure.message
    assert failure.path and failure.path.endswith("three_lines.py") and failure.line
    assert (info.value.factor, info.value.points) == (1, [])


async def test_no_provider_fails_before_any_job(tmp_path: Path) -> None:
    target = load_target(f"{WORKLOADS}/three_lines.py::three_lines")
    launcher = Launcher()
    with pytest.raises(ScaleFailed) as info:
        await run_scaling(target, [1, 2], launcher, "cpu", 60.0, None, trace_dir=tmp_path)
    assert launcher.worker is None  # nothing was started
    failure = info.value.failure
    assert failure.kind == "missing_inputs"
    assert "three_lines_inputs(batch_size" in failure.message
    assert failure.line == 4
    assert failure.hint and "def three_lines_inputs(batch_size" in failure.hint


# --- the CLI subcommand -------------------------------------------------------------------


def scale(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="kernelscope")
    add_scale_parser(parser.add_subparsers(dest="command", required=True))
    return run_scale(parser.parse_args(["scale", *argv]))


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "sized.png"
    spec = f"{WORKLOADS}/three_lines.py::sized"
    status = scale(spec, "--device", "cpu", "--factors", "1,2", "--png", str(png), "--json")
    out = capsys.readouterr()
    assert status == 0, out.err
    result = json.loads(out.out)  # exactly one object
    assert set(result) == {"function", "device", "points", "verdict", "png"}
    assert result["function"]["qualname"] == "sized"
    assert result["device"]["type"] == "cpu"
    assert [p["factor"] for p in result["points"]] == [1, 2]
    assert {"shape", "bound", "knee_factor", "summary"} <= set(result["verdict"])
    assert result["png"] == str(png)
    decode_png(png.read_bytes())


def test_cli_text_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "chart.png"
    spec = f"{WORKLOADS}/three_lines.py::sized"
    assert scale(spec, "--device", "cpu", "--factors", "1,2", "--png", str(png)) == 0
    out = capsys.readouterr().out
    for text in ("factor  batch  per call  per item  growth", "×2", "verdict   ", "chart  "):
        assert text in out
    assert png.is_file()

    assert scale(f"{WORKLOADS}/three_lines.py::three_lines", "--json") == 1  # no provider
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "missing_inputs"
    assert "three_lines_inputs(batch_size" in error["message"]

    assert scale(f"{WORKLOADS}/nowhere.py::f", "--json") == 2
    assert json.loads(capsys.readouterr().out)["error"]["kind"] == "usage"
    with pytest.raises(SystemExit) as exit_info:
        scale(spec, "--factors", "1")
    assert exit_info.value.code == 2
