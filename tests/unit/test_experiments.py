"""What-if experiments judged: speedups, intervals, summaries and suggestions from synthetic
rounds (the measuring is tests/integration/test_try_cli.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kernelscope.analysis.experiments import judge, paired_speedup, suggested
from kernelscope.analysis.verdict import Verdict
from kernelscope.protocol import TryFinished, VariantOutcome


def outcome(name: str, rounds: list[float], **fields: Any) -> VariantOutcome:
    return VariantOutcome(name=name, status="ok", rounds_us=rounds, **fields)


def test_a_variant_twice_as_fast_every_round_is_2x_with_a_tight_interval() -> None:
    speedup, low, high = paired_speedup([200.0, 210.0, 190.0] * 3, [100.0, 105.0, 95.0] * 3)
    assert speedup == pytest.approx(2.0)
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)


def test_noise_that_straddles_one_is_no_speedup() -> None:
    base = [100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0]
    var = [80.0, 125.0, 90.0, 115.0, 100.0, 85.0, 120.0]
    finished = TryFinished(
        job_id="j", device_type="cpu", device_name="cpu", method="perf_counter",
        baseline_rounds_us=base,
        variants=[outcome("compile", var, results="equal", one_time_s=3.2,
                          one_time_what="compile")],
    )  # fmt: skip
    e = judge(finished, "m.py", "f", 3)
    v = e.variants[0]
    assert v.ci_low is not None and v.ci_high is not None
    assert v.ci_low < 1.0 < v.ci_high and not v.faster
    assert e.best is None
    assert "within the noise" in v.summary and "3.2 s to compile" in v.summary


def test_the_best_is_faster_beyond_the_noise_and_equal_results_come_first() -> None:
    base = [100.0] * 8
    finished = TryFinished(
        job_id="j", device_type="cuda", device_name="NVIDIA H200", method="cuda_events",
        baseline_rounds_us=base,
        variants=[
            outcome("bf16", [30.0, 31.0] * 4, results="changed", max_rel_err=3e-3,
                    tolerance="rtol 0.0001, atol 1e-05 (float32)"),
            outcome("compile", [50.0, 52.0] * 4, results="equal", one_time_s=2.1,
                    one_time_what="compile"),
            VariantOutcome(name="graphs", status="failed", why="RuntimeError: boom", line=7),
            outcome("batch2", [150.0] * 8, items=2, results="not compared: other inputs"),
        ],
    )  # fmt: skip
    e = judge(finished, "m.py", "f", 3)
    by = {v.name: v for v in e.variants}
    assert e.best == "compile"  # bf16 is faster but changes results
    assert by["compile"].summary == (
        "torch.compile: 1.96× faster (measured, 2.1 s to compile), results equal"
    )
    assert by["bf16"].summary.startswith("bf16 autocast: 3.28× faster")
    assert "changes results (max rel err 3.0e-03" in by["bf16"].summary
    assert by["graphs"].summary == "CUDA Graphs: failed: RuntimeError: boom"
    assert by["batch2"].speedup == pytest.approx(100 * 2 / 150)
    assert "per item" in by["batch2"].summary


def test_what_a_verdict_suggests() -> None:
    overhead = Verdict(bound="overhead", summary="")
    compute32 = Verdict(bound="compute", summary="", matmul_dtype="float32")
    compute16 = Verdict(bound="compute", summary="", matmul_dtype="bfloat16")
    assert suggested(overhead, [], "cuda") == ["compile", "graphs", "batch2"]
    assert suggested(overhead, [], "cpu") == ["compile", "batch2"]
    assert suggested(compute32, ["aten::convolution"], "cuda") == [
        "tf32", "bf16", "channels_last", "batch2",
    ]  # fmt: skip
    assert suggested(compute16, [], "cuda") == ["batch2"]
    assert suggested(Verdict(bound="memory", summary=""), [], "cuda") == ["compile", "batch2"]
    assert suggested(Verdict(bound="host", summary=""), [], "cpu") == ["compile", "batch2"]


def test_rounds_the_host_slowed_are_left_out_whole_and_counted() -> None:
    """The worker drops whole rounds (each variant stays paired with the baseline) in which a
    block ran 1.3x slower than its candidate's fastest: the H200's host slowed a thread
    1.4-1.7x in spells that a reference loop 40 ms away did not see
    (docs/h200-run/tenth/cpu_sweep.txt); the summary says how many."""
    from kernelscope.render.summary import experiments_summary

    from support.worker import worker_modules

    unslowed_rounds = worker_modules()["experiments"].unslowed_rounds
    out = {"baseline": [100.0, 101.0, 101.0, 99.0, 102.0, 100.0],
           "compile": [50.0, 85.0, 51.0, 49.0, 84.0, 50.0]}  # fmt: skip
    # the loops after each round's two blocks read the host's speed, but not rounds 1 and 4's
    refs = [[40.0, 41.0], [41.0, 40.5], [41.0, 40.0], [40.5, 40.1], [40.0, 40.3], [40.2, 40.0]]
    kept, info = unslowed_rounds(out, refs)
    slowed = info["left_out"]
    assert info == {"left_out": 2, "kept": 0, "reference_us": 40.0}
    assert kept == {"baseline": [100.0, 101.0, 99.0, 100.0], "compile": [50.0, 51.0, 49.0, 50.0]}
    steady = {"baseline": out["baseline"], "compile": [50.0, 51.0, 52.0, 49.0, 50.0, 60.0]}
    slow_loops = [[40.0, 70.0]] * 6  # loops read slow, the blocks did not: all kept
    assert unslowed_rounds(steady, slow_loops) == (
        steady,
        {"left_out": 0, "kept": 0, "reference_us": 40.0},
    )
    mostly = {"baseline": out["baseline"], "compile": [50.0, 85.0, 84.0, 86.0, 50.0, 83.0]}
    # the host slowed most rounds: all kept, and counted
    assert unslowed_rounds(mostly, refs) == (
        mostly,
        {"left_out": 0, "kept": 4, "reference_us": 40.0},
    )
    finished = TryFinished(
        job_id="j", device_type="cuda", device_name="NVIDIA H200", method="cuda_events",
        baseline_rounds_us=kept["baseline"], variants=[outcome("compile", kept["compile"])],
        slowed_rounds=slowed,
    )  # fmt: skip
    e = judge(finished, "m.py", "f", 3)
    assert e.rounds == 4 and e.slowed_rounds == 2
    assert "4 rounds in turns (2 more left out: the host ran this thread's CPU slower" in (
        experiments_summary(e)
    )


def test_a_thread_slowed_throughout_is_seen_against_the_hosts_best() -> None:
    """On the H200 a whole process ran host-bound calls ~1.7x slower (compiled LayerNorm 58.6
    and 68.6 µs against 31.1 in another process, docs/h200-run/sixth/try_blocks.txt), its own
    loops slowed alike, so against its own best no round stood out. Against the host's best
    (another process's loop) its rounds are slowed: with too few at full speed they are kept
    in, counted, and the summary says to run again."""
    from kernelscope.render.summary import experiments_summary

    from support.worker import worker_modules

    unslowed_rounds = worker_modules()["experiments"].unslowed_rounds
    out = {"baseline": [186.0] * 6, "compile": [58.0, 60.0, 57.0, 59.0, 58.0, 61.0]}
    slow = [[66.0, 68.0], [67.0, 66.5], [68.0, 69.0], [66.0, 67.0], [65.9, 66.2], [67.0, 68.0]]
    assert unslowed_rounds(out, slow) == (out, {"left_out": 0, "kept": 0, "reference_us": 66.0})
    kept, info = unslowed_rounds(out, slow, host_best=37.0)
    assert kept == out and info == {"left_out": 0, "kept": 6, "reference_us": 66.0}
    # where the thread ran at the host's speed at times, its slowed blocks' rounds go
    half = [[37.5, 38.0], *slow[1:4], [38.0, 37.0], [37.2, 37.9]]
    mixed = {"baseline": [186.0] * 6, "compile": [33.0, 58.0, 57.0, 59.0, 34.0, 32.5]}
    kept, info = unslowed_rounds(mixed, half, host_best=37.0)
    assert info["left_out"] == 3 and kept["compile"] == [33.0, 34.0, 32.5]
    finished = TryFinished(
        job_id="j", device_type="cuda", device_name="NVIDIA H200", method="cuda_events",
        baseline_rounds_us=out["baseline"], variants=[outcome("compile", out["compile"])],
        slowed_kept=6, reference_us=66.2, host_reference_us=37.0,
    )  # fmt: skip
    e = judge(finished, "m.py", "f", 3)
    assert (e.slowed_kept, e.reference_us, e.host_reference_us) == (6, 66.2, 37.0)
    text = experiments_summary(e)
    assert "6 rounds in turns (in 6 of them the host ran this thread's CPU slower" in text
    assert "its loop read 66 µs at best against 37 µs in another process of this host" in text
    assert "run it again" in text
    # a host reading slower than the thread's own best says nothing of the thread
    slower = msgspec.structs.replace(e, host_reference_us=80.0)
    assert "in another process" not in experiments_summary(slower)
    # the editor's hover says it too
    from kernelscope.lsp.views import experiment_markdown

    hover = experiment_markdown(e)
    assert "6 rounds; in 6 of them the host ran this thread's CPU slower" in hover
    assert "its loop read 66 µs at best against 37 µs" in hover and "run it again" in hover
    left = msgspec.structs.replace(e, slowed_kept=0, slowed_rounds=2)
    assert "6 rounds; 2 more left out: the host ran this thread's CPU slower" in (
        experiment_markdown(left)
    )
    assert "rounds):" in experiment_markdown(msgspec.structs.replace(e, slowed_kept=0))


def test_a_not_compared_names_the_dropout_that_changes_the_results() -> None:
    """word_language_model's RNNModel.forward, tried through its program (call 3, train
    mode): "not compared: the function's results change from call to call" with no cause;
    its dropout draws new masks each call, and the note now says so."""
    import torch

    from support.worker import worker_modules

    experiments = worker_modules()["experiments"]

    class RNNModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = torch.nn.Dropout(0.2)
            self.encoder = torch.nn.Embedding(10, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.drop(self.encoder(x))

    model = RNNModel()
    x = torch.zeros(3, dtype=torch.long)
    said = experiments.random_layers(torch, RNNModel.forward, [model, x], {})
    assert said == ["RNNModel is in train mode with 1 dropout layer (new masks each call)"]

    def step(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return net(x)

    named = experiments.random_layers(torch, step, [model, x], {})
    assert named == ["net (RNNModel) is in train mode with 1 dropout layer (new masks each call)"]
    assert experiments.random_layers(torch, step, [model.eval(), x], {}) == []
    drift = experiments._drift({"max_rel_err": 0.0908}, said)  # pyright: ignore[reportPrivateUsage]
    assert drift == (
        "its first two calls differ by up to 0.0908 relative to the result's scale; RNNModel "
        "is in train mode with 1 dropout layer (new masks each call)"
    )
