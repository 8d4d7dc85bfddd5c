"""KS107, data-pipeline-bound (docs/findings.md#ks107): a host-bound call whose host time is its
DataLoader's next() names that line and its share, and the verdict says so instead of launch
arithmetic. On a real torch.profiler trace of a DataLoader-fed loop (CPU, recorded here) and
on a hand-built GPU trace whose numbers are worked out in the comments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec

from kernelscope.analysis.data_pipeline import loader_time, pipeline_summary
from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_load import load_trace
from kernelscope.findings import Code
from kernelscope.protocol import CallSite, UnprofiledTiming

from support.sidecars import cpu_sidecar
from support.traces import doc, gpu, launch, op, span, step, write

WORKLOAD = Path(__file__).parents[1] / "workloads" / "slow_loader.py"
NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def test_a_dataloader_fed_loop_is_data_pipeline_bound_on_its_loader_line(tmp_path: Path) -> None:
    """The loader's next() (4 items × 0.5 ms of sleep) is ~95 % of each step's host time."""
    out = tmp_path / "trace.json"
    env = {**os.environ, "KINETO_LOG_LEVEL": "99"}
    subprocess.run([sys.executable, str(WORKLOAD), str(out)], check=True, env=env, timeout=120)
    a = analyze(load_trace(out))
    assert a.calls_found_by == "profiler steps" and a.steps == 4
    (f,) = [f for f in a.findings if f.code == Code.DATA_PIPELINE]
    # a raw trace names the function around the loader (Kineto's frame of main(), named by
    # the line it stood on when tracing began), not the loop's line: a line in main()
    lines = WORKLOAD.read_text().splitlines()
    first = next(i for i, text in enumerate(lines, 1) if text.startswith("def main"))
    loop = next(i for i, text in enumerate(lines, 1) if "LOADER LINE" in text)
    assert f.path is not None and f.path.endswith("slow_loader.py")
    assert f.line is not None and first <= f.line <= loop + 4
    assert 0.7 < float(f.evidence["loader_share"]) <= 1.0
    assert 1500 < float(f.evidence["loader_us_per_step"]) < 20000
    assert "data-pipeline-bound" in f.message and "launch" in f.message


# One 100 µs step: the DataLoader's next() holds the host for [5, 85] (80 µs), then aten::add
# launches a 2 µs kernel at 90. The call spans [5, 95]: busy 2 of 90 µs → overhead, and the
# loader is 80 of the call's 90 µs of host time: 89 %.
FED = doc(
    step(1, 0.0, 100.0),
    span("user_annotation", NEXT, 5.0, 80.0),
    op("aten::add", 86.0, 9.0, 2),
    launch("cudaLaunchKernel", 87.0, 3.0, 11),
    gpu("add_kernel", 90.0, 2.0, 11, ext=2),
    deviceProperties=[{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000}],
)


def test_the_verdict_names_the_data_pipeline_not_launches(tmp_path: Path) -> None:
    a = analyze(load_trace(write(tmp_path / "t.json", FED)))
    v = a.verdict
    assert v.bound == "overhead"
    assert v.summary.startswith("data-pipeline-bound: the DataLoader's next() takes 89%")
    assert "per launch" not in v.summary
    (bound,) = [f for f in a.findings if f.code == Code.OVERHEAD_BOUND]
    assert "num_workers" in bound.try_[0]
    (pipeline,) = [f for f in a.findings if f.code == Code.DATA_PIPELINE]
    assert pipeline.evidence["loader_us_per_step"] == 80.0


def test_a_loader_that_takes_little_of_the_call_is_no_finding(tmp_path: Path) -> None:
    """The same step with a 10 µs next(): 10 of 90 µs, under the 25 % threshold."""
    events = [dict(e) for e in FED["traceEvents"]]
    for e in events:
        if e.get("name") == NEXT:
            e["dur"] = 10.0
    a = analyze(load_trace(write(tmp_path / "t.json", {**FED, "traceEvents": events})))
    assert Code.DATA_PIPELINE not in [f.code for f in a.findings]
    assert "data-pipeline" not in a.verdict.summary


def test_the_loaders_unprofiled_figures_are_the_ones_where_the_worker_timed_them(
    tmp_path: Path,
) -> None:
    """The profiler's range gives next() as the profiler inflated it: 80 of 90 µs here. The
    worker's own timing of next() with the calls unprofiled (30 µs a call, 40 % of them)
    decides instead, and the messages say which it is."""
    trace = load_trace(write(tmp_path / "t.json", FED))
    profiled = loader_time(trace, None, 1)
    assert profiled is not None and not profiled.unprofiled
    assert (profiled.us_per_step, profiled.how) == (80.0, "as profiled")
    timing = UnprofiledTiming(us_per_call=75.0, method="perf_counter", reps=20,
                              loader_us_per_call=30.0, loader_share=0.4)  # fmt: skip
    measured = loader_time(trace, None, 1, timing)
    assert measured is not None and measured.op is profiled.op  # its line: the range's
    assert (measured.us_per_step, measured.share, measured.how) == (30.0, 0.4, "unprofiled")
    assert pipeline_summary(measured, 0.02, 2.0).startswith(
        "data-pipeline-bound: the DataLoader's next() takes 40% of the call's host time "
        "(30.0 µs per step, unprofiled)"
    )
    none = msgspec.structs.replace(timing, loader_us_per_call=None, loader_share=None)
    assert loader_time(trace, None, 1, none) == profiled  # no next() in the timed calls


def test_the_finding_gives_the_command_that_profiles_the_datasets_item(tmp_path: Path) -> None:
    """A live run's worker names what the loader ran (the dataset's __getitem__, a collate_fn
    of the user's): KS107's first tries are the commands that profile them, through the
    same program."""
    timing = UnprofiledTiming(us_per_call=90.0, method="perf_counter", reps=20,
                              loader_us_per_call=80.0, loader_share=0.89,
                              loader_sources=["/p/data.py::Items.__getitem__",
                                              "/p/data.py::collate"])  # fmt: skip
    sidecar = msgspec.structs.replace(
        cpu_sidecar(us_per_call=90.0),
        timing=timing,
        call_site=CallSite(via="train.py --epochs 1", call=1),
    )
    a = analyze(load_trace(write(tmp_path / "t.json", FED)), sidecar=sidecar)
    (pipeline,) = [f for f in a.findings if f.code == Code.DATA_PIPELINE]
    assert pipeline.try_[:2] == [
        "profile where that time goes: kernelscope profile /p/data.py::Items.__getitem__ "
        "--via 'train.py --epochs 1'",
        "profile where that time goes: kernelscope profile /p/data.py::collate "
        "--via 'train.py --epochs 1'",
    ]
    assert "num_workers" in pipeline.try_[2]
