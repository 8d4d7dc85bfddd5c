"""The worker's unprofiled timing rules (issue 24, item 5), on the CPU with the shipped
module: how many calls, the warm-up's estimate, and the stop when calls turn slow. The calls
take their time on a clock of the test's (``Clock``): sleeps overshoot on a loaded machine,
and a 1 ms call read 1.7 ms there, inside the spells these rules are about."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
import torch

from support.fresh_timing import TimingJob
from support.worker import worker_modules


@pytest.fixture(scope="module")
def timing_module() -> Any:
    return worker_modules()["timing"]


class Clock:
    """``perf_counter`` and ``monotonic`` for the timing module; a call advances it by what
    it takes (``take``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def take(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def timing(timing_module: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The timing module on the test's clock."""
    monkeypatch.setattr(timing_module, "time", clock)
    return timing_module


def test_at_least_20_calls_and_half_a_second_of_them_at_most_five(timing: Any) -> None:
    job = TimingJob(torch, 0)
    assert timing.timing_reps(job, 100_000.0) == 20  # 0.1 s calls: 20 of them, 2 s
    assert timing.timing_reps(job, 1000.0) == 500  # 1 ms calls: 0.5 s of them
    assert timing.timing_reps(job, 1_000_000.0) == 5  # 1 s calls: capped at 5 s
    assert timing.timing_reps(job, 10_000_000.0) == 3  # never fewer than 3
    assert timing.timing_reps(job, 0.01) == timing.TIMING_MAX_CALLS
    assert timing.timing_reps(TimingJob(torch, 7), 1000.0) == 7  # the request's count wins


def test_the_clean_worker_times_as_long_as_the_profiling_worker(timing: Any) -> None:
    """At least 20 calls and 0.5 s of them, capped at 5 s, as the issue asks: at that floor
    the host-timing test held within 1.2 % of fresh processes on the H100 (2026-12-06); the
    blocks a slow spell slows are left out and the timing extended instead."""
    job = TimingJob(torch, 0)
    assert timing.CLEAN_TIMING_MIN_S == timing.TIMING_MIN_S == 0.5
    assert timing.timing_reps(job, 100.0, timing.CLEAN_TIMING_MIN_S) == 5_000
    assert timing.timing_reps(job, 100_000.0, timing.CLEAN_TIMING_MIN_S) == 20
    assert timing.timing_reps(job, 1_000_000.0, timing.CLEAN_TIMING_MIN_S) == 5  # still 5 s


def test_the_warm_up_runs_until_steady_and_sizes_the_timing(timing: Any, clock: Clock) -> None:
    calls: list[float] = []

    def call() -> None:
        calls.append(clock.now)
        clock.take(0.02 if len(calls) == 1 else 0.001)  # a slow first call, then steady

    per_call = timing.warm_up(TimingJob(torch, 0), call, lambda: None, stage=None)
    assert per_call == pytest.approx(1000.0)  # the steady calls', not the cold one's
    assert calls[-1] - calls[1] >= timing.WARMUP_MIN_S * 0.9
    assert calls[-1] - calls[0] <= timing.WARMUP_MAX_S + 0.5


def test_calls_far_slower_than_the_warm_up_said_stop_the_timing(
    timing: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing, "TIMING_MAX_S", 0.05)
    t = clock.now
    out = timing.time_unprofiled(
        TimingJob(torch, 0), lambda: clock.take(0.01), lambda: None, False, None, 1000
    )
    assert clock.now - t < 0.5
    assert 5 <= out["reps"] < 20 and len(out["samples_us"]) == out["reps"]


def test_calls_faster_than_the_warm_up_said_go_on_to_20_and_half_a_second(
    timing: Any, clock: Clock
) -> None:
    """The count comes from the warm-up's last block: a slowed spell there read a 42 ms call
    as 1.7 s (karpathy/ng-video-lecture's gpt.py on a busy 2-vCPU host), and 3 calls (0.13 s)
    were the figure. The calls' own median sets how many more."""
    t = clock.now
    out = timing.unprofiled_timing(
        TimingJob(torch, 0), lambda: clock.take(0.042), lambda: None, torch.device("cpu"),
        1_700_000.0,
    )  # fmt: skip
    assert out["reps"] == 20  # 20 calls of 42 ms: 0.84 s, over half a second
    fast = timing.unprofiled_timing(
        TimingJob(torch, 0), lambda: clock.take(0.001), lambda: None, torch.device("cpu"),
        1_700_000.0,
    )  # fmt: skip
    assert fast["reps"] == 500  # 1 ms calls: half a second of them
    assert clock.now - t < timing.TIMING_MAX_S * 2
    asked = timing.unprofiled_timing(
        TimingJob(torch, 3), lambda: clock.take(0.001), lambda: None, torch.device("cpu"),
        1_700_000.0,
    )  # fmt: skip
    assert asked["reps"] == 3  # the request's count is kept


def slowed_host(
    timing: Any,
    monkeypatch: pytest.MonkeyPatch,
    spell: range,
    extend: bool = False,
    host_best: float | None = None,
) -> tuple[dict[str, Any], int]:
    """Time 1 ms calls where calls in `spell` run 1.7 ms, as the H200's host ran a thread's
    CPU ~1.7x slower in spells (docs/h200-run/fourth/clocks.txt), and the reference loop
    reads the thread's speed (the real loop cannot be slowed on demand here)."""
    made = [0]
    clock = timing.time

    def call() -> None:
        made[0] += 1
        clock.take(0.0017 if made[0] in spell else 0.001)

    monkeypatch.setattr(timing, "reference_us", lambda: 70.0 if made[0] in spell else 40.0)
    job = TimingJob(torch, 0)
    out = timing.time_unprofiled(job, call, lambda: None, False, None, 600, extend, host_best)
    return out, made[0]


def test_calls_the_host_slowed_are_left_out_and_reported_apart(
    timing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, made = slowed_host(timing, monkeypatch, range(200, 400))
    slowed = out["slowed"]
    assert made == 600 and slowed is not None and slowed["left_out"]
    assert 1.6 < slowed["factor"] < 1.9 and 0.2 < slowed["share"] < 0.5
    assert slowed["us_per_call"] == pytest.approx(1700) and out["us_per_call"] == pytest.approx(
        1000
    )
    assert out["reps"] == 600 and len(out["samples_us"]) == 200
    assert out["p90_us"] < slowed["us_per_call"]  # the spread of the calls kept
    assert out["reference_us"] == 40.0  # the thread at its fastest, to compare processes


def test_a_host_slow_for_most_of_the_timing_keeps_every_call_and_says_so(
    timing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left out only while a quarter of the calls remain: a laptop whose turbo fades after
    a first burst reads as a host slow after its first blocks."""
    out, _ = slowed_host(timing, monkeypatch, range(120, 10_000))  # in the third block of 50
    slowed = out["slowed"]
    assert slowed is not None and not slowed["left_out"] and slowed["share"] > 0.75
    assert out["us_per_call"] == pytest.approx(1700)  # the median of all, and the report says why


def test_one_fast_reading_alone_sets_no_baseline(
    timing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing, "TIMING_BLOCK_S", 0.02)  # 20 calls a block: one fast block
    out, _ = slowed_host(timing, monkeypatch, range(25, 10_000))
    assert out["slowed"] is None and out["us_per_call"] == pytest.approx(1700)


def test_a_steady_host_leaves_every_call_in(timing: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = slowed_host(timing, monkeypatch, range(0))
    assert out["slowed"] is None and out["reps"] == 600


def test_the_reference_loop_reads_this_threads_speed(
    timing_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = timing_module.reference_us()  # on the real clock
    monkeypatch.setattr(timing_module, "REFERENCE_LOOP", 20 * timing_module.REFERENCE_LOOP)
    assert 0 < short < 50_000 and timing_module.reference_us() > 5 * short  # it runs the loop


def test_the_slowed_factor_is_weighed_by_calls_as_the_share_is(timing: Any) -> None:
    """One block of 39 calls 1.6x slow and two of one ~100 ms call each (a long call closes
    its block alone): the factor is 1.6, not 250 (the median over blocks read 242x beside
    632 µs against 392 on gpt.py's Head.forward, docs/tries/ng-video-lecture_2026-12-05.md)."""
    blocks = timing.Blocks()
    blocks.ends = [40, 80, 120, 159, 160, 161, 200]
    blocks.refs = [40.0] * 7
    blocks.host_s = [0.004] * 7
    samples = [100.0] * 120 + [160.0] * 39 + [25_000.0, 26_000.0] + [100.0] * 39
    _, _, slowed = blocks.unslowed(samples)
    assert slowed is not None and slowed["reps"] == 41
    assert slowed["factor"] == pytest.approx(1.6)


def test_blocks_leave_out_exactly_the_calls_of_slowed_blocks(timing: Any) -> None:
    """Six blocks of 3 calls; blocks 3 and 4 ran 1.7x slower: their calls go, and their host
    time. The loops beside the blocks judge none: on the H200 a loop 40 ms from a slowed block
    read the host fast as often as slow (docs/h200-run/tenth/cpu_sweep.txt)."""
    blocks = timing.Blocks()
    blocks.ends = [3, 6, 9, 12, 15, 18]
    blocks.refs = [40.0, 70.0, 40.0, 41.0, 70.0, 41.0]  # slow beside fast blocks, fast beside slow
    blocks.host_s = [0.003, 0.003, 0.0051, 0.0051, 0.003, 0.003]
    samples = [1000.0, 1010.0, 990.0] * 2 + [1700.0, 1690.0, 1710.0] * 2 + [1000.0] * 6
    kept, host_us, slowed = blocks.unslowed(samples)
    assert kept == samples[:6] + samples[12:]
    assert host_us == pytest.approx(1000.0)  # 12 ms over the 12 calls kept
    assert blocks.host_us() == pytest.approx(22.2e3 / 18)  # all blocks: the slowed ones too
    assert slowed == {"share": 6 / 18, "factor": pytest.approx(1.7),
                      "us_per_call": 1700.0, "reps": 6, "left_out": True,
                      "kept_because": ""}  # fmt: skip
    assert blocks.baseline() == 40.0
    steady = [1000.0, 1020.0, 980.0] * 6  # a steady host: the loops' readings change nothing
    assert blocks.unslowed(steady) == (steady, blocks.host_us(), None)
    blocks.ends = [3 * (i + 1) for i in range(12)]  # 12 blocks, 10 slowed: all kept
    blocks.refs, blocks.host_s = [40.0] * 12, [0.003] * 12
    samples = [1000.0] * 3 + [1700.0] * 30 + [1000.0] * 3
    kept, _, slowed = blocks.unslowed(samples)
    assert kept == samples and slowed is not None and not slowed["left_out"]
    assert slowed["kept_because"] == "most slowed"


def test_calls_descheduled_between_fast_loops_are_left_out(
    timing: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside a CPU hog on 2 CPUs (CI, 2026-12-03) churn's calls read 0.3-95 ms: the slow ones
    descheduled between loops that read fast, the fast ones beside loops that read slow.
    Judged by the loops, leaving calls out made the figure 11.6 ms where they took 1.6;
    judged by their blocks, the descheduled ones go and the figure is what the calls took."""
    made = [0]
    spell = range(200, 300)

    def call() -> None:
        made[0] += 1
        clock.take(0.02 if made[0] in spell else 0.0016)

    monkeypatch.setattr(timing, "reference_us", lambda: 40.0 if made[0] in spell else 70.0)
    out = timing.time_unprofiled(TimingJob(torch, 0), call, lambda: None, False, None, 600)
    slowed = out["slowed"]
    assert slowed is not None and slowed["left_out"] and slowed["us_per_call"] > 10_000
    assert out["us_per_call"] == pytest.approx(1600)


def test_a_timing_slowed_throughout_is_seen_against_the_hosts_best(
    timing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the H200 the clean worker's loop read 52-58 µs for all of its 2 s while the
    profiling worker's and fresh processes' read ~40 (docs/h200-run/fifth/host_timing.txt):
    its own best was slowed. The profiling worker's best (the host's) shows it."""
    alone, _ = slowed_host(timing, monkeypatch, range(0, 10_000))
    assert alone["slowed"] is None and alone["reference_us"] == 70.0  # nothing to see by
    seen, _ = slowed_host(timing, monkeypatch, range(0, 10_000), host_best=40.0)
    slowed = seen["slowed"]
    assert slowed is not None and slowed["share"] == 1.0 and not slowed["left_out"]
    assert 1.7 < slowed["factor"] < 1.8 and seen["reference_us"] == 70.0  # its own, still


def test_a_timing_that_kept_too_few_calls_goes_on_while_five_seconds_allow(
    timing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slowed for its first 500 of 600 calls: in quarters (150 calls) until half of 600
    fell in unslowed blocks; their median is the figure."""
    out, made = slowed_host(timing, monkeypatch, range(0, 500), extend=True, host_best=40.0)
    slowed = out["slowed"]
    assert made == out["reps"] and made in (750, 900)  # the blocks beside 500 go too
    assert slowed is not None and slowed["left_out"] and out["us_per_call"] < 1700
    steady, made = slowed_host(timing, monkeypatch, range(0), extend=True)
    assert made == 600 and steady["slowed"] is None  # nothing slowed: no more calls


def test_a_timing_goes_on_no_longer_than_five_seconds(
    timing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slowed throughout: quarters more while TIMING_MAX_S (here 2 s) allow, then all kept."""
    monkeypatch.setattr(timing, "TIMING_MAX_S", 2.0)
    t = timing.time.now
    out, made = slowed_host(timing, monkeypatch, range(0, 10_000), extend=True, host_best=40.0)
    took = timing.time.now - t
    assert 750 <= made <= 1200 and made % 150 == 0 and took < 2.0 + 0.6
    assert out["slowed"] is not None and not out["slowed"]["left_out"]


def test_a_requested_count_of_calls_is_kept_even_when_slowed(
    timing: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`timing_reps` in the request wins: no quarters more (the H200 test times its fresh
    processes with the worker's count)."""
    made = [0]

    def call() -> None:
        made[0] += 1
        clock.take(0.001)

    monkeypatch.setattr(timing, "reference_us", lambda: 70.0)
    out = timing.time_unprofiled(
        TimingJob(torch, 300), call, lambda: None, False, None, 300, True, 40.0
    )
    assert made[0] == out["reps"] == 300 and out["slowed"] is not None


def test_the_threads_a_call_ran_on_are_reported(timing_module: Any) -> None:
    """A call whose work runs on a thread of its own (as a training step's backward runs on
    autograd's device thread): both threads are named, with their CPU and CPU time, the
    timing thread marked. On the lent H200 where the host put that thread moved a
    checkpointed step 4.1 or 6.5 ms (docs/h200-run/tenth/checkpointed_threads.txt)."""
    import queue
    import threading
    import time

    jobs: queue.Queue[float] = queue.Queue()
    done: queue.Queue[None] = queue.Queue()

    def helper() -> None:
        while (seconds := jobs.get()) > 0:
            end = time.thread_time() + seconds
            while time.thread_time() < end:
                pass
            done.put(None)

    worker = threading.Thread(target=helper, daemon=True)
    worker.start()

    def call() -> None:
        jobs.put(0.01)  # 10 ms of CPU on the helper thread
        done.get()

    try:
        out = timing_module.time_unprofiled(
            TimingJob(torch, 20), call, lambda: None, False, None, 20
        )
    finally:
        jobs.put(0.0)
    busiest = out["threads"][0]  # the helper (its system name is the process's here)
    assert busiest["cpu_s"] >= 0.1 and not busiest["timing"] and busiest["cpu"] >= 0
    assert all(t["cpu_s"] <= busiest["cpu_s"] for t in out["threads"])
    assert sum(t["timing"] for t in out["threads"]) <= 1  # the calling thread, if it ran a tick


def test_a_noisy_call_is_not_read_as_slowed_spells(timing: Any) -> None:
    """Twenty blocks of one call each, varying ±15 % with no spell: judged against the
    second-fastest, the slowest went as 'slowed' (a 38 % share in a simulation, the figure
    7.6 % low); against the block a fifth of the others beat, none. A spell of 1.55x on
    eight of them is still found whole."""
    noisy = [1000.0 * (0.85 + 0.3 * ((7 * i) % 20) / 19) for i in range(20)]
    blocks = timing.Blocks()
    blocks.ends = list(range(1, 21))
    blocks.refs, blocks.host_s = [40.0] * 20, [0.001] * 20
    assert blocks.unslowed(noisy)[2] is None
    spelled = [us * (1.55 if i % 5 in (1, 3) else 1.0) for i, us in enumerate(noisy)]
    kept, _, slowed = blocks.unslowed(spelled)
    assert slowed is not None and slowed["left_out"] and slowed["reps"] == 8
    assert kept == [us for i, us in enumerate(spelled) if i % 5 not in (1, 3)]


def test_in_place_each_threads_cpu_is_summed_over_the_timed_calls_alone(
    timing_module: Any,
) -> None:
    """In place the program runs its own code between the timed calls: the threads' CPU
    seconds are summed call by call (a thread born in a call counts whole), then listed as
    a timing's are."""
    spent: dict[int, Any] = {}
    me = timing_module.threading.get_native_id()
    call = timing_module.add_thread_use
    call(spent, {me: ("python", 0, 5.0, 1.0)}, {me: ("python", 1, 5.25, 1.5)})
    # between the calls the program spent 3 s (5.25 -> 8.25) and waited 2: not counted
    call(spent, {me: ("python", 1, 8.25, 3.5)},
         {me: ("python", 1, 8.5, 3.5), 7: ("pt_autograd_0", 3, 0.1, 0.02)})  # fmt: skip
    assert timing_module.threads_used({}, spent) == [
        {"name": "python", "cpu": 1, "cpu_s": 0.5, "wait_s": 0.5, "timing": True},
        {"name": "pt_autograd_0", "cpu": 3, "cpu_s": 0.1, "wait_s": 0.02, "timing": False},
    ]
    readings = timing_module.thread_times()  # this process, read for real
    assert me in readings and readings[me][2] >= 0 and readings[me][3] >= 0


def test_the_child_processes_cpu_is_read_as_a_dataloaders_workers_would_be(
    timing_module: Any,
) -> None:
    """A child that spins for ~0.3 s of CPU (a DataLoader worker decoding images) shows in
    children_cpu_s while it lives (Linux: each thread's /proc children list)."""
    before = timing_module.children_cpu_s()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass\ntime.sleep(30)",
        ]
    )
    try:
        deadline = time.monotonic() + 20
        spent = 0.0
        while time.monotonic() < deadline and spent < 0.25:
            time.sleep(0.05)
            spent = (timing_module.children_cpu_s() or 0.0) - (before or 0.0)
        assert spent >= 0.25
    finally:
        child.kill()
        child.wait()


def test_a_timing_slowed_throughout_is_judged_by_the_threads_second_best_loop(
    timing_module: Any,
) -> None:
    """In place no fast step is there to judge by: the thread's reference loops at their
    best (the second-fastest: one fast reading alone does not set it) against the host's."""
    samples = [100.0, 120.0, 110.0]
    slowed = timing_module.slowed_throughout(samples, [70.0, 58.0, 61.0], 40.0)
    assert slowed == {"share": 1.0, "factor": 61.0 / 40.0, "us_per_call": 110.0, "reps": 3,
                      "left_out": False, "kept_because": "most slowed"}  # fmt: skip
    assert timing_module.slowed_throughout(samples, [70.0, 30.0, 50.0], 40.0) is None  # 1.25x
    assert timing_module.slowed_throughout(samples, [41.0, 40.0], 40.0) is None
    assert timing_module.slowed_throughout(samples, [70.0, 70.0], None) is None  # its own best
    assert timing_module.slowed_throughout([], [70.0, 70.0], 40.0) is None
    assert timing_module.slowed_throughout(samples, [], 40.0) is None
