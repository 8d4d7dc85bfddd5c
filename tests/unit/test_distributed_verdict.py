"""The step across ranks, judged from per-rank reports (synthetic collectives added to a
recorded CPU report; the real ranks are tests/integration/test_distributed.py)."""

from __future__ import annotations

import msgspec

from kernelscope.report.distributed import COLLECTIVE, analyze_ranks
from kernelscope.report.schema import LineRow, OpRow, Report

from support import FIXTURES


def rank_report(comm_us: float, line_us: float = 0.0) -> Report:
    """A recorded report with `comm_us` per step of gloo all-reduce added."""
    report = msgspec.json.decode(
        (FIXTURES / "matmul_add_64" / "report.json").read_bytes(), type=Report
    )
    steps = report.steps.active
    report.timing.wall_us_per_step = 10_000.0
    report.device.type = "cpu"
    report.ops = [o for o in report.ops if not COLLECTIVE.match(o.name)]
    report.ops.append(OpRow("gloo:all_reduce", steps, comm_us * steps, comm_us * steps, 0, 0))
    report.lines = [
        LineRow(report.function.path, 12, line_us, line_us, code="y = heavy(x)"),
        LineRow(
            report.function.path,
            13,
            comm_us,
            comm_us,
            top_ops=["gloo:all_reduce"],
            code="dist.all_reduce(y)",
        ),
    ]
    return report


def test_collective_names() -> None:
    names = [
        "gloo:all_reduce",
        "nccl:all_gather",
        "c10d::allreduce_",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    ]
    assert all(COLLECTIVE.match(n) for n in names)
    assert not any(COLLECTIVE.match(n) for n in ["aten::mm", "cudaLaunchKernel", "aten::all"])


def test_the_rank_that_waits_least_is_the_straggler() -> None:
    d = analyze_ranks([rank_report(6000), rank_report(500, line_us=400)], "gloo")
    assert d.straggler == 1 and d.verdict.bound == "straggler"
    assert d.arrival_skew_us == 5500
    (f,) = d.findings
    assert f.code == "KS902" and f.line == 12 and "`y = heavy(x)`" in f.message


def test_every_rank_in_collectives_is_communication_bound() -> None:
    d = analyze_ranks([rank_report(6000), rank_report(5500)], "gloo")
    assert d.straggler is None and d.verdict.bound == "communication"
    (f,) = d.findings
    assert f.code == "KS901" and f.line == 13  # where the collectives are issued


def test_balanced_light_communication_keeps_the_ranks_verdict() -> None:
    d = analyze_ranks([rank_report(300), rank_report(250)], "gloo")
    assert d.straggler is None and not d.findings
    assert d.verdict.summary.startswith("the ranks agree")
