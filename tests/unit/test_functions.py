"""Time per function from a trace's Python frames (analysis/functions.py), and the recorded
paths found in the local project (report/sources.py): a hand-made trace with its numbers
worked out in the comments, a real CPU trace recorded with ``with_stack=True`` here, and the
raw H200 recordings of fixtures/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kernelscope.analysis.functions import function_times
from kernelscope.analysis.trace_load import decode_trace, load_trace
from kernelscope.report.build import analyze_trace
from kernelscope.report.sources import local_files, locate

from support import REPO_ROOT
from support.traces import NESTED_CALLS_MODULE, doc, dumps, gpu, launch, op, span, step

FIXTURES = REPO_ROOT / "fixtures"

# One 200 µs step. main() (def line 3) runs [0, 200]; it calls block() (line 10) twice,
# [10, 60] and [100, 150], and block() calls itself once, [20, 40] inside the first call.
# Kernels: a 30 µs one launched at 25 (in the recursive block, under main), a 40 µs one at
# 70 (main itself), a 50 µs one at 120 (block, second call). Autograd's thread (tid 7) runs
# the backward of the first aten::mm (sequence number 7) at 160 and launches a 60 µs kernel:
# it counts under the frames of the forward's thread then (main, waiting in backward()); an
# AccumulateGrad there (no sequence number) launches a 10 µs one: the same. A 5 µs copy is
# launched on tid 9, which has no frames and runs no backward: outside every function.
# Library frames (torch/nn/modules/module.py) are not the user's and are dropped.
#   block: calls 3; CPU total 50 + 50 = 100 (the recursive call is inside the first);
#          self (50 − 20) + 20 + 50 = 100; GPU self 30 + 50 = 80, total 80.
#   main:  calls 1; CPU total 200; self 200 − 50 − 50 = 100; GPU self 40 + 60 + 10 = 110,
#          total 110 + 80 = 190.
NESTED = doc(
    step(1, 0.0, 200.0),
    span("python_function", "train.py(3): main", 0.0, 200.0),
    span("python_function", "lib/train.py(10): block", 10.0, 50.0),
    span("python_function", "lib/train.py(10): block", 20.0, 20.0),
    span("python_function", "torch/nn/modules/module.py(1750): _call_impl", 21.0, 18.0),
    span("cpu_op", "aten::mm", 22.0, 10.0, External_id=2, Sequence_number=7, Fwd_thread_id=0),
    launch("cudaLaunchKernel", 25.0, 2.0, 21),
    gpu("gemm", 30.0, 30.0, 21, ext=2),
    op("aten::mul", 68.0, 10.0, 3),
    launch("cudaLaunchKernel", 70.0, 2.0, 22),
    gpu("mul", 75.0, 40.0, 22, ext=3),
    span("python_function", "lib/train.py(10): block", 100.0, 50.0),
    op("aten::add", 110.0, 20.0, 4),
    launch("cudaLaunchKernel", 120.0, 2.0, 23),
    gpu("add", 125.0, 50.0, 23, ext=4),
    span(
        "cpu_op",
        "autograd::engine::evaluate_function: MmBackward0",
        160.0,
        20.0,
        tid=7,
        Sequence_number=7,
        Fwd_thread_id=1,
    ),
    span("cuda_runtime", "cudaLaunchKernel", 165.0, 2.0, tid=7, correlation=24),
    gpu("gemm_bwd", 170.0, 60.0, 24),
    span("cpu_op", "torch::autograd::AccumulateGrad", 185.0, 10.0, tid=7),
    span("cuda_runtime", "cudaLaunchKernel", 186.0, 2.0, tid=7, correlation=25),
    gpu("accumulate", 231.0, 10.0, 25),
    span("cuda_runtime", "cudaMemcpyAsync", 190.0, 2.0, tid=9, correlation=26),
    gpu("copy", 242.0, 5.0, 26, cat="gpu_memcpy"),
)


def test_hand_made_nesting_recursion_and_other_threads() -> None:
    times = function_times(decode_trace(dumps(NESTED)))
    rows = {(r.path, r.line, r.name): r for r in times.functions}
    assert set(rows) == {("train.py", 3, "main"), ("lib/train.py", 10, "block")}
    block, main = rows["lib/train.py", 10, "block"], rows["train.py", 3, "main"]
    assert (block.calls, block.cpu_total_us, block.self_cpu_us) == (3, 100.0, 100.0)
    assert (block.self_gpu_us, block.gpu_total_us) == (80.0, 80.0)
    assert (main.calls, main.cpu_total_us, main.self_cpu_us) == (1, 200.0, 100.0)
    assert (main.self_gpu_us, main.gpu_total_us) == (110.0, 190.0)
    assert (times.gpu_us, times.gpu_outside_us) == (195.0, 5.0)
    assert times.functions[0] is main  # the costliest GPU total first
    assert times.frames_seen == 5


def test_a_trace_without_stacks_has_no_functions() -> None:
    plain = doc(step(1, 0.0, 10.0), op("aten::mm", 1.0, 5.0, 2))
    times = function_times(decode_trace(dumps(plain)))
    assert (times.functions, times.frames_seen) == ([], 0)


def record(tmp_path: Path) -> Path:
    """A real CPU trace with stacks of outer() calling inner() twice, three calls, from a
    project at machine/proj (the trace records its absolute path)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = tmp_path / "machine" / "proj" / "pkg" / "model.py"
    model.parent.mkdir(parents=True)
    model.write_text(NESTED_CALLS_MODULE)
    spec = importlib.util.spec_from_file_location("ks_test_pkg_model", model)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(3):
            module.outer(a, a)
    trace = tmp_path / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    return trace


def test_real_cpu_trace_with_stack_found_in_another_checkout(tmp_path: Path) -> None:
    trace = load_trace(record(tmp_path))
    times = function_times(trace)
    times.functions = [r for r in times.functions if r.path.endswith("model.py")]  # not ours
    by_name = {r.name: r for r in times.functions}
    assert set(by_name) == {"inner", "outer"}
    inner, outer = by_name["inner"], by_name["outer"]
    assert (inner.calls, outer.calls) == (6, 3)
    assert (inner.line, outer.line) == (4, 8)
    assert inner.path.endswith("machine/proj/pkg/model.py")
    # outer's self time is its total less the time in inner(), which it holds entirely
    assert outer.self_cpu_us == pytest.approx(outer.cpu_total_us - inner.cpu_total_us)
    assert 0 < inner.cpu_total_us < outer.cpu_total_us
    assert (outer.gpu_total_us, times.gpu_us) == (0.0, 0.0)

    # The same project checked out elsewhere, edited (two lines above outer), beside a
    # decoy with the same file name: the longest shared tail wins.
    local = tmp_path / "checkout"
    (local / "src" / "pkg").mkdir(parents=True)
    (local / "src" / "pkg" / "model.py").write_text(
        NESTED_CALLS_MODULE.replace("\n\ndef outer", "\n# a\n# b\n\ndef outer")
    )
    (local / "other").mkdir()
    (local / "other" / "model.py").write_text(NESTED_CALLS_MODULE)
    rows = {r.name: r for r in locate(times.functions, local)}
    here = str(local / "src" / "pkg" / "model.py")
    assert (rows["inner"].local_path, rows["inner"].local_line, rows["inner"].moved) == (
        here,
        4,
        False,
    )
    assert (rows["outer"].local_path, rows["outer"].local_line, rows["outer"].moved) == (
        here,
        10,
        True,
    )
    assert rows["outer"].qualname == "outer" and rows["outer"].ties == 1

    # Not under the root at all: kept as recorded, said to be unfound.
    nowhere = tmp_path / "empty"
    nowhere.mkdir()
    assert all(r.local_path is None for r in locate(times.functions, nowhere))


def test_local_files_prefers_the_longest_tail_and_counts_ties(tmp_path: Path) -> None:
    for rel in ("a/pkg/m.py", "b/pkg/m.py", "c/m.py", ".venv/pkg/m.py", "x/node_modules/pkg/m.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    found = local_files(["/home/u/pkg/m.py", "C:\\work\\c\\m.py", "nope.py"], tmp_path)
    assert found["/home/u/pkg/m.py"] == (tmp_path / "a/pkg/m.py", 2)
    assert found["C:\\work\\c\\m.py"] == (tmp_path / "c/m.py", 1)
    assert found["nope.py"] is None


@pytest.mark.parametrize("scenario", ["train_mlp", "compiled", "cuda_graph", "vit_train"])
def test_raw_h200_traces(scenario: str) -> None:
    """Every kernel launched counts once: in the self GPU time of one function, or outside
    them all; a function's GPU total holds its callees'."""
    trace = load_trace(FIXTURES / scenario / "raw.json.gz")
    times = function_times(trace)
    assert times.functions and times.frames_seen > len(times.functions)
    self_gpu = sum(r.self_gpu_us for r in times.functions)
    assert self_gpu + times.gpu_outside_us == pytest.approx(times.gpu_us)
    assert times.gpu_us == pytest.approx(sum(g.dur for g in trace.gpu_events if g.launch >= 0))
    for r in times.functions:
        assert r.self_cpu_us <= r.cpu_total_us + 1e-6 and r.self_gpu_us <= r.gpu_total_us + 1e-6


def test_raw_train_step_found_in_its_fixture_folder() -> None:
    """train_mlp's raw trace (recorded on the H200, paths shortened by Kineto to
    `train_mlp.py`): train_step and MLP.forward, at their def lines in the fixture's copy."""
    root = FIXTURES / "train_mlp"
    result = analyze_trace("raw.json.gz", load_trace(root / "raw.json.gz"), root=root)
    assert result.functions is not None
    rows = {r.qualname: r for r in result.functions.rows}
    assert set(rows) == {"train_step", "MLP.forward"}
    assert (rows["train_step"].local_line, rows["MLP.forward"].local_line) == (19, 15)
    assert rows["train_step"].gpu_total_us > rows["MLP.forward"].gpu_total_us > 0
    assert rows["train_step"].local_path == str(root / "train_mlp.py")
    # backward's kernels, launched on autograd's thread, count under train_step
    assert result.functions.gpu_outside_us == 0.0
    assert rows["train_step"].gpu_total_us == pytest.approx(result.functions.gpu_us)
