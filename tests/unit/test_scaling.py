"""The batch-doubling test: the classifier on the recorded H200 MLP runs and on hand-made
series, the PNG and terminal charts, and live CPU runs of tests/workloads/three_lines.py."""

from __future__ import annotations

import argparse
import json
import struct
import zlib
from pathlib import Path

import pytest

from kernelscope.analysis.scaling import ScalePoint, classify, points_from_times
from kernelscope.app.scale import ScaleFailed, check_factors, run_scaling
from kernelscope.cli.scale import add_scale_parser, run_scale
from kernelscope.engine.launcher import Launcher, WorkerProcess
from kernelscope.engine.targets import load_target
from kernelscope.protocol import JobProgress
from kernelscope.render.plot import IDEAL, KNEE, MEASURED, PNG_SIGNATURE, render_png, text_chart

from support import FIXTURES, WORKLOADS


def recorded(width: int, timing: str = "unprofiled") -> list[ScalePoint]:
    """fixtures/mlp_<width>/meta.json's scaling runs (base batch 32, factors 1..128)."""
    runs = json.loads((FIXTURES / f"mlp_{width}" / "meta.json").read_text())["scaling"]
    factors = [int(f) for f in runs]
    if timing == "unprofiled":
        us = [run["timing"]["unprofiled_us_per_call"] for run in runs.values()]
    else:  # the independent CUDA-event timing, a separate process
        us = [run["cuda_events"]["median_us"] for run in runs.values()]
    return points_from_times(factors, us, base_batch=32)


# --- the classifier on real data ----------------------------------------------------------


@pytest.mark.parametrize("timing", ["unprofiled", "cuda_events"])
def test_mlp_width_64_is_flat_at_every_factor(timing: str) -> None:
    verdict = classify(recorded(64, timing))
    assert (verdict.shape, verdict.bound, verdict.knee_factor) == ("flat", "overhead", None)
    assert set(verdict.segment_shapes) == {"flat"}
    assert len(verdict.slopes) == 7
    assert verdict.summary.startswith("flat")


def test_mlp_width_64_defaults_are_flat() -> None:
    verdict = classify(recorded(64)[:4])  # factors 1, 2, 4, 8
    assert (verdict.shape, verdict.knee_factor) == ("flat", None)


@pytest.mark.parametrize("timing", ["unprofiled", "cuda_events"])
def test_mlp_width_8192_is_flat_then_linear(timing: str) -> None:
    points = recorded(8192, timing)
    verdict = classify(points)
    assert verdict.shape == "mixed"
    assert verdict.bound == "overhead"  # at the base batch
    assert verdict.knee_factor in {4, 8}
    k = [p.factor for p in points].index(verdict.knee_factor)
    assert verdict.segment_shapes == ["flat"] * k + ["linear"] * (len(points) - 1 - k)
    before, after = verdict.run_slopes
    assert before < 0.25 <= 0.75 <= after
    assert f"flat to ×{verdict.knee_factor}, then linear" in verdict.summary


def test_mlp_width_8192_unprofiled_knee_is_x4() -> None:
    assert classify(recorded(8192)).knee_factor == 4
    assert classify(recorded(8192)[:4]).knee_factor == 4  # the default factors see it too


# --- the classifier on hand-made series --------------------------------------------------


def series(us: list[float]) -> list[ScalePoint]:
    return points_from_times([2**i for i in range(len(us))], us)


def test_hand_made_flat_linear_sublinear() -> None:
    flat = classify(series([100, 104, 97, 101, 99]))
    assert (flat.shape, flat.bound, flat.knee_factor) == ("flat", "overhead", None)
    linear = classify(series([100, 210, 390, 820, 1600]))
    assert (linear.shape, linear.bound, linear.knee_factor) == ("linear", "compute", 1)
    sublinear = classify(series([100 * 2 ** (0.5 * i) for i in range(5)]))
    assert (sublinear.shape, sublinear.bound, sublinear.knee_factor) == (
        "sublinear",
        "memory",
        None,
    )
    assert sublinear.slopes == pytest.approx([0.5] * 4)


def test_hand_made_knee() -> None:
    verdict = classify(series([100, 100, 100, 200, 400, 800]))
    assert (verdict.shape, verdict.knee_factor) == ("mixed", 4)
    assert verdict.run_slopes == pytest.approx([0.0, 1.0])
    last_pair = classify(series([100, 100, 100, 190]))  # a knee on the last pair still counts
    assert last_pair.knee_factor == 4


@pytest.mark.parametrize(
    ("slope", "shape"), [(0.2, "flat"), (0.3, "sublinear"), (0.7, "sublinear"), (0.8, "linear")]
)
def test_thresholds(slope: float, shape: str) -> None:
    assert classify(series([50 * 2 ** (slope * i) for i in range(4)])).shape == shape


def test_points_and_factors() -> None:
    points = points_from_times([1, 2, 4], [10.0, 15.0, 30.0], base_batch=32)
    assert [p.batch_size for p in points] == [32, 64, 128]
    assert [p.us_per_item for p in points] == [10.0, 7.5, 7.5]
    assert [p.growth for p in points] == [None, 1.5, 2.0]
    assert check_factors([8, 1, 2, 2, 4]) == [1, 2, 4, 8]
    with pytest.raises(ValueError, match="two"):
        check_factors([4, 4])
    with pytest.raises(ValueError, match=">= 1"):
        check_factors([0, 1])
    with pytest.raises(ValueError, match="two points"):
        classify(points[:1])


# --- charts ---------------------------------------------------------------------------------


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the RGB rows (filter bytes removed) of an 8-bit RGB PNG."""
    assert data[:8] == PNG_SIGNATURE
    pos, idat, size, kind = 8, b"", (0, 0), b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body)
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2)
            size = (width, height)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert kind == b"IEND"
    width, height = size
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    assert all(raw[y * stride] == 0 for y in range(height))
    return width, height, b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))


def count(rgb: bytes, color: tuple[int, int, int]) -> int:
    return sum(1 for i in range(0, len(rgb), 3) if tuple(rgb[i : i + 3]) == color)


def test_png_is_a_valid_chart() -> None:
    points = recorded(8192)
    data = render_png(points, classify(points), title="MLP.forward · NVIDIA H200", width=500)
    width, height, rgb = decode_png(data)
    assert (width, height) == (500, 440)
    assert count(rgb, MEASURED) > 500  # line, points and legend
    assert count(rgb, IDEAL) > 100  # the dashed ideal-linear reference
    assert count(rgb, KNEE) > 50  # the knee marker
    assert count(rgb, (255, 255, 255)) > width * height // 2


def test_png_of_flat_data_has_no_knee() -> None:
    points = recorded(64)
    _, _, rgb = decode_png(render_png(points, classify(points)))
    assert count(rgb, MEASURED) > 500
    assert count(rgb, KNEE) == 0


def test_text_chart() -> None:
    chart = text_chart(recorded(8192)).splitlines()
    assert len(chart) == 6  # five rows and the factor labels
    assert chart[-1].split()[:8] == ["×1", "×2", "×4", "×8", "×16", "×32", "×64", "×128"]
    assert chart[0].rstrip().endswith("▄▄▄▄")  # only the largest factor reaches the top row
    flat = text_chart(recorded(64)[:4]).splitlines()
    assert all(set(row.split()[-1]) <= {"│"} for row in flat[1:4])  # empty upper rows


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
