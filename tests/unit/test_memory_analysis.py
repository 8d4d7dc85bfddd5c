"""The memory pass's findings (KS131-KS133) through analyze(), and the batch forecast's fit."""

from __future__ import annotations

import msgspec

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.memory_diff import memory_delta
from kernelscope.analysis.memory_fit import BatchPoint, checked, fit_line, forecast
from kernelscope.analysis.trace_load import decode_trace
from kernelscope.findings import Code, Finding
from kernelscope.protocol import (
    MemoryLine,
    MemoryPass,
    ProfileFailed,
    Sidecar,
    decode_from_worker,
)
from kernelscope.render.memory import memory_delta_lines, memory_section, render_forecast
from kernelscope.render.text import render_failure

from support.sidecars import cpu_sidecar
from support.traces import doc, dumps, launch, op, span

MiB = 2**20
TRACE = doc(
    span("user_annotation", "ks:call", 0.0, 500.0),
    op("aten::mm", 10.0, 100.0, 1),
    launch("cudaMalloc", 20.0, 30.0, 5),
    launch("cudaFree", 60.0, 10.0, 6),
)


def memory_pass(**fields: object) -> MemoryPass:
    base: dict[str, object] = {
        "source": "cuda allocator history",
        "peak_allocated_bytes": 100 * MiB,
        "trace_peak_bytes": 100 * MiB,
        "baseline_bytes": 20 * MiB,
        "lines": [
            MemoryLine("/p/model.py", 12, "", 60 * MiB, {"activations": 60 * MiB}),
            MemoryLine("/p/model.py", 14, "", 10 * MiB, {"temporaries": 10 * MiB}),
        ],
    }
    return msgspec.convert({**base, **fields}, MemoryPass)


def findings(m: MemoryPass, code: Code) -> list[Finding]:
    side = msgspec.structs.replace(cpu_sidecar(), memory_pass=m, active=2)
    return [f for f in analyze(decode_trace(dumps(TRACE)), side).findings if f.code == code]


def test_a_line_holding_most_of_the_peak_is_named_with_what_to_try() -> None:
    (f,) = findings(memory_pass(), Code.MEMORY_HEAVY_LINE)
    assert (f.path, f.line, f.severity) == ("/p/model.py", 12, "warning")
    assert "60.0 MiB at the memory peak, 60% of 100.0 MiB" in f.message
    assert any("checkpoint" in t for t in f.try_)
    assert f.evidence["kind"] == "activations"


def test_temporaries_get_inference_mode_offered_only_where_no_backward_runs() -> None:
    """pytorch/examples' word_language_model: KS131 on a training step's decoder output
    offered torch.inference_mode(); a call whose memory pass saw a backward trains."""
    temporaries = [MemoryLine("/p/model.py", 14, "", 60 * MiB, {"temporaries": 60 * MiB})]
    (f,) = findings(memory_pass(lines=temporaries), Code.MEMORY_HEAVY_LINE)
    assert any("inference_mode" in t for t in f.try_)
    backward = MemoryLine("/p/model.py", 14, "backward", 10 * MiB, {"temporaries": 10 * MiB})
    (f,) = findings(memory_pass(lines=[*temporaries, backward]), Code.MEMORY_HEAVY_LINE)
    assert f.try_ and not any("inference_mode" in t for t in f.try_)


def test_fragmentation_needs_a_large_unused_reserve() -> None:
    assert not findings(memory_pass(reserved_at_peak_bytes=110 * MiB), Code.MEMORY_FRAGMENTED)
    (f,) = findings(memory_pass(reserved_at_peak_bytes=600 * MiB), Code.MEMORY_FRAGMENTED)
    assert f.evidence["unused_at_peak_bytes"] == 500 * MiB
    assert any("expandable_segments" in t for t in f.try_)


def test_churn_is_on_the_line_that_grew_the_allocator_with_its_time() -> None:
    assert not findings(memory_pass(device_allocs=0, device_frees=0), Code.ALLOCATOR_CHURN)
    assert not findings(memory_pass(), Code.ALLOCATOR_CHURN)  # the CPU: no counters
    grew = MemoryLine("/p/model.py", 14, "", 0, {}, device_allocs=3, device_alloc_bytes=6 * MiB)
    m = memory_pass(device_allocs=3, device_frees=2, lines=[grew])
    (f,) = findings(m, Code.ALLOCATOR_CHURN)
    assert (f.path, f.line) == ("/p/model.py", 14)
    assert f.evidence["device_allocs"] == 3 and f.evidence["device_alloc_bytes"] == 6 * MiB
    assert f.evidence["device_memory_us_per_step"] == 20.0  # (30 + 10) µs over 2 steps


def test_the_memory_section_names_lines_kinds_and_approximations() -> None:
    m = memory_pass(
        approximate=["peak_reserved_bytes: no reserve"], kinds_after_call={"gradients": MiB}
    )
    text = "\n".join(memory_section(m))
    assert "peak      100.0 MiB allocated" in text
    assert "after     gradients 1.0 MiB held when the call returned" in text
    assert "activations 60.0 MiB" in text
    assert "approximate: peak_reserved_bytes: no reserve" in text


def test_a_straight_line_gives_the_largest_batch_that_fits() -> None:
    points = [BatchPoint(8, (100 + 8 * 10) * MiB), BatchPoint(16, (100 + 16 * 10) * MiB)]
    fit = fit_line(points)
    assert fit is not None and round(fit.per_item_bytes) == 10 * MiB
    out = forecast("step", "NVIDIA H200", "reserved", points, 1100 * MiB, headroom=0.0)
    assert out.largest_batch == 100 and out.predicted == 1100 * MiB
    assert not out.not_linear
    good = checked(out, 1090 * MiB, None)
    assert good.fits and "-0.9% from the prediction" in (good.check or "")
    assert "batch 100 fits" in render_forecast(good)


def test_a_bent_curve_is_said_not_linear_and_an_oom_does_not_fit() -> None:
    points = [BatchPoint(1, 100 * MiB), BatchPoint(2, 101 * MiB), BatchPoint(4, 200 * MiB)]
    out = forecast("step", "cpu", "allocated", points, 1000 * MiB)
    assert "not grow linearly" in out.not_linear
    bad = checked(out, None, "cuda_oom: CUDA out of memory")
    assert bad.fits is False and "did not run" in (bad.check or "")


def test_one_batch_size_gives_no_fit() -> None:
    out = forecast("step", "cpu", "allocated", [BatchPoint(4, MiB)], 10 * MiB)
    assert out.fit is None and out.largest_batch is None and out.notes


def test_sidecars_without_a_memory_pass_still_decode() -> None:
    side = msgspec.json.decode(msgspec.json.encode(cpu_sidecar()), type=Sidecar)
    assert side.memory_pass is None


def test_a_failed_pass_says_why_and_makes_no_findings() -> None:
    failed = memory_pass(error="AttributeError: no _record_memory_history", lines=[])
    assert memory_section(failed) == [
        "memory pass failed: AttributeError: no _record_memory_history"
    ]
    assert not findings(failed, Code.MEMORY_HEAVY_LINE)


def test_a_peak_that_grew_is_a_memory_regression_with_the_lines_that_moved() -> None:
    before = memory_pass()
    grown = MemoryLine("/p/model.py", 12, "", 90 * MiB, {"activations": 90 * MiB})
    after = memory_pass(peak_allocated_bytes=130 * MiB, lines=[grown, before.lines[1]])
    delta = memory_delta(before, after)
    assert delta is not None and delta.regression
    assert [(d.line, d.before_bytes, d.after_bytes) for d in delta.lines] == [
        (12, 60 * MiB, 90 * MiB)
    ]
    text = "\n".join(memory_delta_lines(delta))
    assert "peak 100.0 MiB → 130.0 MiB (+30.0%): a memory regression" in text
    same = memory_delta(before, memory_pass(peak_allocated_bytes=100 * MiB + 4096))
    assert same is not None and not same.regression and not same.lines
    assert memory_delta(before, None) is None


def test_an_out_of_memory_failure_says_what_was_live_at_it() -> None:
    frame = {
        "type": "profile_failed",
        "job_id": "j",
        "kind": "cuda_oom",
        "message": "OutOfMemoryError: CUDA out of memory",
        "memory_at_failure": {
            "source": "cuda allocator history, to the out-of-memory",
            "peak_allocated_bytes": 70 * 2**30,
            "trace_peak_bytes": 70 * 2**30,
            "baseline_bytes": 2 * 2**30,
            "baseline_kinds": {"parameters": 2**30, "optimizer_state": 2**30},
            "oom_request_bytes": 8 * 2**30,
            "free_bytes": 3 * 2**30,
            "lines": [{"path": "/p/model.py", "line": 30, "via": "",
                       "live_at_peak_bytes": 60 * 2**30, "kinds": {"temporaries": 60 * 2**30}}],
        },
    }  # fmt: skip
    failure = decode_from_worker(msgspec.json.encode(frame))
    assert isinstance(failure, ProfileFailed) and failure.memory_at_failure is not None
    text = render_failure(failure, "model.py::step")
    assert "memory at the failure: 70.0 GiB allocated, asking for 8.0 GiB" in text
    assert "/p/model.py:30  60.0 GiB  temporaries 60.0 GiB" in text
