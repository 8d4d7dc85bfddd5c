# pyright: basic
"""The call timed without the profiler: CUDA events on a GPU, ``perf_counter`` on the CPU."""

import os
import statistics
import threading
import time

from .host_usage import UsageClock
from .loader_clock import LoaderClock
from .names import PROFILED_BUDGET_ENV, positive_env
from .nvml import GpuSampler

#: Warm-up as a loop warms up: calls back to back in blocks (one call, then twice as many
#: each block up to WARMUP_BLOCK_S long, a sync at each block's end) until two blocks in a
#: row agree per call within STEADY, once WARMUP_MIN_S have passed since the first call, at
#: most WARMUP_MAX_S after it.
#: A fresh process's first calls can be 100x slower than its steady ones (lazy
#: initialization; CPU: 65 ms, then 0.2 ms, for a small transformer block), and a program's
#: DataLoader workers may still be filling their queues.
WARMUP_MIN_S = 0.1
WARMUP_MAX_S = 2.0
WARMUP_BLOCK_S = 0.05
STEADY = 1.15
#: The timed calls: at least TIMING_MIN_CALLS and at least TIMING_MIN_S of them, whichever
#: is more, at most TIMING_MAX_S (then no fewer than TIMING_FLOOR_CALLS) or TIMING_MAX_CALLS.
TIMING_MIN_CALLS = 20
TIMING_MIN_S = 0.5
TIMING_MAX_S = 5.0
TIMING_FLOOR_CALLS = 3
TIMING_MAX_CALLS = 100_000
#: The worker that never profiles times host-bound calls (the launcher sends it only those)
#: over at least this long, as the profiling worker does. It was 2 s for the H200's slow
#: spells of 0.4-2.4 s (docs/h200-run/timing/modes_2026-12-02.txt); the blocks a spell slows
#: are now left out and the timing extended while they come (to TIMING_MAX_S), and at 0.5 s
#: the host-timing test held within 1.2 % of fresh processes on all five patterns, the
#: one-vCPU case included (H100, docs/h200-run/fifteenth/README.md), and within 2.8 % on the
#: H200 itself (docs/h200-run/seventeenth/README.md), which saves a GPU job ~1.5 s
#: (docs/h200-run/fourteenth/README.md).
CLEAN_TIMING_MIN_S = 0.5
#: The timed calls are cut into blocks of TIMING_BLOCK_S. On the H200 host-bound code ran
#: 1.4-1.7x slower in spells that come and go within tens of ms, from outside the guest
#: (docs/h200-run/fourth/clocks.txt, docs/h200-run/tenth/cpu_sweep.txt): a block whose
#: calls' median ran more than SLOWED times at_speed_anchor's ran in such a spell,
#: and its calls are left out of the median (reported apart) while a quarter of the calls
#: remain. A pure-Python reference loop runs after each block, in the same thread (the
#: fastest of REFERENCE_RUNS loops of REFERENCE_LOOP iterations, ~40 µs each on the H200):
#: it read the host fast as often as slow beside a slowed block, so it judges no block; it
#: gives the thread's speed at its best, and where that never came within SLOWED of the
#: host's best (another process's) the thread ran slowed throughout, with no fast block to
#: judge by.
TIMING_BLOCK_S = 0.05
REFERENCE_RUNS = 3
REFERENCE_LOOP = 1000
SLOWED = 1.3
#: On a GPU a timing is host-bound (the calls of a slowed block slowed there too) when the
#: host's time per call is at least this share of the events' median (as the launcher's
#: CLEAN_TIMING_BELOW sends a call to the clean worker).
HOST_BOUND = 0.8
#: The warmed schedule's profiled calls (warm-up and active steps) are kept near this much of
#: the call's unprofiled time: profiled with stacks, a call of seconds (minGPT's whole
#: ``Trainer.run``, 21 s on the CPU) piled up ~0.4 GB of events a second, and five active
#: calls of it took the worker from 2.4 GB to 19.8 GB, where the kernel killed it.
PROFILED_BUDGET_S = 10.0


def profiled_budget_s():
    """PROFILED_BUDGET_S, or the seconds the user set in KERNELSCOPE_PROFILED_SECONDS."""
    return positive_env(PROFILED_BUDGET_ENV, PROFILED_BUDGET_S)


def fitted_schedule(steps, per_call_us, budget_s, what="call", keep_wait=False):
    """The schedule's (wait, warmup, active) steps, fewer where the calls (or iterations, as
    `what` names them) are long: no wait step (one, where asked for and `keep_wait`: in
    place it counts a step's events), one warm-up and as many active steps as fit in
    `budget_s` (at least one); with the sentence that says why ("" when as asked)."""
    wait, warmup, active = steps
    per_call_s = per_call_us / 1e6
    if per_call_s <= 0 or (warmup + active) * per_call_s <= budget_s:
        return steps, ""
    fit = int(budget_s // per_call_s)
    warmup = min(warmup, 1) if fit >= 2 else 0
    fitted = (min(wait, 1) if keep_wait else 0, warmup, max(1, min(active, fit - warmup)))
    if fitted == tuple(steps):
        return steps, ""
    took = "each %s takes %s" % (what, _seconds(per_call_s))
    budget = "%g s (%s)" % (budget_s, PROFILED_BUDGET_ENV)
    if fit == 0:
        why = "%s, over the %s the profiled %ss are kept within: one active step alone"
    else:
        why = "%s, and the profiled %ss (warm-up and active) are kept within %s"
    return fitted, why % ((took, budget, what) if fit == 0 else (took, what, budget))


def _seconds(s):
    return "%.2f s" % s if s >= 1 else "%.2f ms" % (s * 1e3)


def run_timing(job):
    """Only the unprofiled timing, in a worker that never ran the profiler: a profiling
    session leaves host-bound code slower in its process. Warmed up as a loop would be:
    this worker may have just started."""

    def timed(_fn, call, device, sync):
        per_call_us = warm_up(job, call, sync)
        host_best = job.req.get("host_reference_us")
        timing = unprofiled_timing(
            job,
            call,
            sync,
            device,
            per_call_us,
            job.req.get("timing_min_s") or CLEAN_TIMING_MIN_S,
            extend=True,
            host_best=host_best,
        )
        job.progress("done")
        timing["process"] = "clean worker"
        timing["replayed_from"], timing["replay_note"] = job.replayed
        return {"type": "timing_finished", "job_id": job.id, "timing": timing}

    return job.with_call(timed)


def warm_up(job, call, sync, stage: "str | None" = "cold"):
    """Call back to back until steady (see WARMUP_MIN_S); the steady time per call (µs).
    `stage` is the progress reported (None: none)."""
    if stage:
        job.progress(stage)
    n = 1
    previous = None
    t0 = None  # the clock starts after the first call: a cold one (a compile) says nothing
    job.warmup_calls = 0
    while True:
        t = time.perf_counter()
        for _ in range(n):
            call()
        sync()
        now = time.perf_counter()
        job.warmup_calls += n
        per_call = (now - t) / n
        elapsed = now - (t if t0 is None else t0)
        steady = previous is not None and max(per_call, previous) <= STEADY * min(
            per_call, previous
        )
        done = t0 is not None and (elapsed >= WARMUP_MAX_S or (elapsed >= WARMUP_MIN_S and steady))
        t0 = now if t0 is None else t0
        # Every rank of a job makes as many calls (each may hold a collective): all stop
        # when the last one is steady, and all take the same block sizes.
        if job.ranks.agree(int(done), "min", what="the end of warm-up"):
            return per_call * 1e6
        previous = per_call
        if per_call * n * 2 <= WARMUP_BLOCK_S:
            n *= 2
        n = job.ranks.agree(n, "min", what="a warm-up block")


def timing_reps(job, per_call_us, min_s=TIMING_MIN_S):
    """How many calls to time: the request's count, else TIMING_MIN_CALLS and `min_s`
    of calls, whichever is more, within TIMING_MAX_S (see there)."""
    reps = int(job.req.get("timing_reps") or 0)
    if reps > 0:
        return reps
    per = max(per_call_us, 1.0)
    reps = max(TIMING_MIN_CALLS, int(min_s * 1e6 / per + 0.999))
    reps = min(reps, max(TIMING_FLOOR_CALLS, int(TIMING_MAX_S * 1e6 / per)), TIMING_MAX_CALLS)
    return job.ranks.agree(reps, what="the timed calls")


def unprofiled_timing(
    job, call, sync, device, per_call_us, min_s=TIMING_MIN_S, extend=False, host_best=None
):
    """The call timed without the profiler (before the schedule, which slows host code),
    right after its warm-up: nothing in between (no probe call, no sync, no cache freed);
    `min_s` of calls at least (see timing_reps); `extend` and `host_best` as
    time_unprofiled says."""
    job.progress("timing")
    reps = timing_reps(job, per_call_us, min_s)
    cuda = device.type == "cuda"
    timing = time_unprofiled(job, call, sync, cuda, device, reps, extend, host_best, min_s)
    timing["warmup_calls"] = getattr(job, "warmup_calls", 0)
    return timing


def time_unprofiled(job, call, sync, cuda, device, reps, extend=False, host_best=None, min_s=None):
    """Median of `reps` calls (or more: `extend`) back to back (CUDA events on a GPU), their
    spread, and NVML's view of the GPU around them (read before and after: no thread runs
    while they do); the calls of blocks the host slowed (see SLOWED) left out while a quarter
    of the calls remain.
    `host_best`: the reference loop at its best in another process of this host (µs), where
    this thread's own best may be slowed too. With `extend` (and no count of calls in the
    request), a host-bound timing that kept fewer than half its calls goes on in quarters of
    them, each begun within TIMING_MAX_S of the first call. With `min_s` (and no count in
    the request), calls faster than the warm-up said (its last block slowed) go on to
    TIMING_MIN_CALLS and `min_s` of calls, within TIMING_MAX_S (_shortfall)."""
    sampler = GpuSampler(job.torch, device) if cuda else None
    if sampler is not None:
        sampler.start()
    # Calls slower than the warm-up said (a stall, a new epoch) stop the timing at twice
    # TIMING_MAX_S; with ranks every rank makes every call (each may hold a collective).
    alone = job.ranks.dist is None
    asked = bool(job.req.get("timing_reps"))  # the request's count of calls is kept
    threads_before, children_before = thread_times(), children_cpu_s()
    usage = UsageClock()
    usage.start()
    began = time.monotonic()
    blocks = Blocks(host_best)
    deadline = blocks.began + 2 * TIMING_MAX_S
    samples = []
    more = reps
    loader = LoaderClock(job.torch).install()  # a DataLoader the call iterates, if any
    loader.on = True
    try:
        while more:
            if cuda:
                _time_on_gpu(job.torch, call, sync, blocks, samples, more, deadline, alone)
            else:
                _time_on_host(call, blocks, samples, more, deadline, alone)
            more = _more_calls(blocks, samples, reps, cuda) if extend and alone and not asked else 0
            if not more and min_s and alone and not asked:
                more = _shortfall(samples, min_s, blocks.began)
            blocks.reopen()
    finally:
        loader.remove()
    usage.stop()
    method = "cuda_events" if cuda else "perf_counter"
    window = [began, time.monotonic()]
    gpu = sampler.stop() if sampler is not None else None
    threads = threads_used(threads_before, thread_times())
    children = children_cpu_s()
    # Left out only where the host decides the calls' time (on a GPU the calls of a block run
    # there later, behind the queue) and one process times them (ranks stall on each other).
    host_bound = _host_bound(blocks, samples, cuda)
    kept, host_us, slowed = (
        blocks.unslowed(samples) if alone and host_bound else (samples, blocks.host_us(), None)
    )
    p10, p90 = spread(kept)
    return {
        "us_per_call": statistics.median(kept),
        "method": method,
        "reps": len(samples),
        "samples_us": samples[:200],
        "host_us_per_call": host_us,
        "p10_us": p10,
        "p90_us": p90,
        "gpu": gpu,
        "process": "profiling worker",
        "replayed_from": "",
        "replay_note": "",
        "traced": "",
        "window_s": window,
        "slowed": slowed,
        "reference_us": thread_best(blocks.refs),
        "host_reference_us": host_best,
        "threads": threads,
        **loader.fields(samples),
        **usage.fields(len(samples)),
        "children_cpu_s": (
            round(max(children - children_before, 0.0), 3)
            if children is not None and children_before is not None
            else None
        ),
    }


def _time_on_gpu(torch, call, sync, blocks, samples, count, deadline, alone):
    """`count` more calls timed by CUDA events, their µs appended to `samples`."""
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(count)
    ]
    blocks.reopen()  # making the events is none of the calls' host time
    done = len(samples)
    timed = 0
    for start, end in events:
        start.record()
        call()
        end.record()
        timed += 1
        now = time.perf_counter()
        blocks.after_call(done + timed, now)
        if alone and now > deadline:
            break
    blocks.close(done + timed)
    sync()
    samples.extend(s.elapsed_time(e) * 1e3 for s, e in events[:timed])


def _time_on_host(call, blocks, samples, count, deadline, alone):
    """`count` more calls timed by ``perf_counter``, their µs appended to `samples`."""
    for _ in range(count):
        t = time.perf_counter()
        call()
        now = time.perf_counter()
        samples.append((now - t) * 1e6)
        blocks.after_call(len(samples), now)
        if alone and t > deadline:
            break
    blocks.close(len(samples))


def _host_bound(blocks, samples, cuda):
    """Whether the host decides the calls' time: always on the CPU; on a GPU when the host's
    time per call is at least HOST_BOUND of the events' median."""
    return not cuda or blocks.host_us() >= HOST_BOUND * statistics.median(samples)


def _more_calls(blocks, samples, reps, cuda):
    """How many more calls a host-bound timing makes (0: none): a quarter of `reps` while
    fewer than half of them fell in unslowed blocks and TIMING_MAX_S have not passed."""
    if time.perf_counter() - blocks.began >= TIMING_MAX_S:
        return 0
    if not _host_bound(blocks, samples, cuda) or blocks.unslowed_calls(samples) >= reps // 2:
        return 0
    return max(1, reps // 4)


def _shortfall(samples, min_s, began):
    """How many more calls reach TIMING_MIN_CALLS and `min_s` of calls (0: they do), at the
    calls' own median, within TIMING_MAX_S of `began`: the count came from the warm-up's
    last block, which a slowed spell can make many times longer than the calls (a 42 ms call
    timed 3 times, 0.13 s, after a warm-up block read it as 1.7 s)."""
    left = TIMING_MAX_S - (time.perf_counter() - began)
    per = statistics.median(samples) / 1e6 if samples else 0.0
    if left <= 0 or per <= 0:
        return 0
    want = max(TIMING_MIN_CALLS - len(samples), int((min_s - sum(samples) / 1e6) / per + 0.999))
    return max(0, min(want, int(left / per), TIMING_MAX_CALLS - len(samples)))


def at_speed_anchor(values):
    """What a block's time is judged against (SLOWED times it or more: slowed): the block
    one in five others beat (at least the second-fastest), robust to a workload's own noise
    (the second-fastest of 20 blocks of calls varying 15 % read 38 % of them slowed, with
    no spell at all); the second-fastest where that one ran SLOWED times slower itself (the
    host slowed most blocks). At least two values."""
    ordered = sorted(values)
    anchor = ordered[max(1, (len(ordered) - 1) // 5)]
    return ordered[1] if anchor > SLOWED * ordered[1] else anchor


def thread_times():
    """Each thread of this process: {native id: (name, the CPU it last ran on, CPU
    seconds, seconds it was ready to run and waited for a CPU)}, from /proc/self/task
    (Linux; the wait from schedstat, 0 where the kernel keeps none); {} where there is
    none."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return out
    for tid in tids:
        try:
            # "tid (name) state ...": the name as /proc/.../comm gives it, one read fewer
            name, fields = _stat("/proc/self/task/%s/stat" % tid)
            cpu_s = (int(fields[11]) + int(fields[12])) / tick
            last = int(fields[36])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        out[int(tid)] = (name, last, cpu_s, _run_queue_s(tid))
    return out


def children_cpu_s():
    """CPU seconds this process's descendants have spent (a DataLoader's workers, forked or
    under a forkserver): those alive, from the /proc children lists (Linux), and those
    reaped, from this process's cutime and cstime; None where there is no such list."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        fields = _stat("/proc/self/stat")[1]
        total = (int(fields[13]) + int(fields[14])) / tick
    except (OSError, ValueError, IndexError):
        return None
    alive = _children("self")
    if alive is None:
        return None
    seen, depth = set(), 0
    while alive and depth < 4:
        nxt = []
        for pid in alive:
            if pid in seen:
                continue
            seen.add(pid)
            try:
                fields = _stat("/proc/%s/stat" % pid)[1]
                # its own time and its reaped children's: theirs are in no list now
                total += sum(int(fields[k]) for k in (11, 12, 13, 14)) / tick
            except (OSError, ValueError, IndexError):
                continue  # a child that ended meanwhile
            nxt += _children(pid) or []
        alive, depth = nxt, depth + 1
    return total


def _stat(path):
    """A /proc stat file's name and the fields after it (state first: utime is [11])."""
    with open(path) as f:
        head, _, rest = f.read().rpartition(")")
    return head.partition("(")[2], rest.split()


def _children(pid):
    """The child pids of every thread of `pid` ("self" or a number); None without the
    kernel's children lists."""
    try:
        tids = os.listdir("/proc/%s/task" % pid)
    except OSError:
        return None
    out, listed = [], False
    for tid in tids:
        try:
            with open("/proc/%s/task/%s/children" % (pid, tid)) as f:
                out += f.read().split()
            listed = True
        except OSError:
            continue
    return out if listed else None


def _run_queue_s(tid):
    """Seconds the thread waited on a run queue ("cpu_ns wait_ns slices"); 0 without it."""
    try:
        with open("/proc/self/task/%s/schedstat" % tid) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def add_thread_use(spent, before, after):
    """Add each thread's CPU seconds and run-queue wait between two thread_times readings
    into `spent` (a thread_times reading of sums): in place the timed calls are the
    program's, with its own code between them."""
    for tid, (name, cpu, total, waited) in after.items():
        was = before.get(tid, (name, cpu, 0.0, 0.0))  # one born in the call: all of it
        sums = spent.get(tid, (name, cpu, 0.0, 0.0))
        spent[tid] = (name, cpu, sums[2] + total - was[2], sums[3] + waited - was[3])


def threads_used(before, after):
    """The threads that spent CPU time between two thread_times readings, busiest first:
    name, last CPU, CPU seconds, seconds waiting for a CPU, and whether it is this one
    (the timing thread)."""
    me = threading.get_native_id()
    used = []
    for tid, (name, cpu, total, waited) in after.items():
        was = before.get(tid, (name, cpu, 0.0, 0.0))
        spent = total - was[2]
        if spent > 0:
            used.append({"name": name, "cpu": cpu, "cpu_s": round(spent, 3),
                         "wait_s": round(max(waited - was[3], 0.0), 3),
                         "timing": tid == me})  # fmt: skip
    return sorted(used, key=lambda t: -t["cpu_s"])


def thread_best(readings):
    """This thread's CPU at its best over some reference loops (µs): the second-fastest, as
    one fast reading alone does not set it, or the only one; None for none."""
    return sorted(readings)[min(1, len(readings) - 1)] if readings else None


def best_speed(readings, host_best=None):
    """What slowed loops are judged against: this thread's best (thread_best), or the host's
    (a loop read in another process) where that was faster; None before any reading."""
    best = thread_best(readings)
    if best is None or not host_best:
        return best
    return min(best, host_best)


def host_best(job):
    """The host's CPU at its best (µs of reference_us) as the launcher saw it in its
    workers, or as this worker read it at its start where that was faster; None for neither."""
    seen = [x for x in (job.req.get("host_reference_us"), job.worker.reference_us) if x]
    return min(seen) if seen else None


def slowed_throughout(samples, readings, host=None):
    """The timed calls as SlowedSpells has them where this thread's reference loops
    (`readings`, µs) never came within SLOWED of the host's best (`host`): all ran slowed,
    with no fast one to judge by, so all are kept. None where they did, or for no samples or
    no reading."""
    own, base = thread_best(readings), best_speed(readings, host)
    if not samples or own is None or base is None or own <= SLOWED * base:
        return None
    return {"share": 1.0, "factor": own / base, "us_per_call": statistics.median(samples),
            "reps": len(samples), "left_out": False, "kept_because": "most slowed"}  # fmt: skip


def enough_left(kept, total):
    """Whether leaving the slowed ones out keeps enough: a quarter of `total`, and 3."""
    return kept >= max(TIMING_FLOOR_CALLS, total // 4)


def reference_us():
    """The fastest of REFERENCE_RUNS pure-Python loops (µs): this thread's CPU speed now."""
    best = float("inf")
    for _ in range(REFERENCE_RUNS):
        t = time.perf_counter()
        total = 0
        for i in range(REFERENCE_LOOP):
            total += i * i
        best = min(best, time.perf_counter() - t)
    return best * 1e6


class Blocks:
    """The timed calls cut into blocks of TIMING_BLOCK_S, each closed by a reference loop;
    a block's host time is its calls' (the loops' own left out)."""

    def __init__(self, host_best=None):
        self.host_best = host_best
        self.ends = []  # calls done when each block closed
        self.refs = []  # the reference loop that closed it (µs)
        self.host_s = []  # the host's time in it
        self.began = time.perf_counter()
        self._opened = self.began

    def after_call(self, done, now):
        if now - self._opened >= TIMING_BLOCK_S:
            self._close_block(done, now)

    def close(self, done):
        if done and (not self.ends or self.ends[-1] < done):
            self._close_block(done, time.perf_counter())

    def _close_block(self, done, now):
        self.host_s.append(now - self._opened)
        self.refs.append(reference_us())
        self.ends.append(done)
        self._opened = time.perf_counter()

    def baseline(self):
        """This thread's CPU at its best (thread_best), or the host's where it was faster;
        None before any block."""
        return best_speed(self.refs, self.host_best)

    def reopen(self):
        """The next block starts now (what ran since the last closed is in none)."""
        self._opened = time.perf_counter()

    def unslowed_calls(self, samples):
        """Calls in blocks not slowed (all, before three blocks)."""
        calls = [e - (self.ends[i - 1] if i else 0) for i, e in enumerate(self.ends)]
        slowed = self._slowed(samples) or [1.0] * len(calls)
        return sum(c for c, b in zip(calls, slowed) if b <= SLOWED)

    def _slowed(self, samples):
        """Each block's calls' median over at_speed_anchor's (see SLOWED); SLOWED
        times over for all where the thread's best loop never came within SLOWED of the
        host's (slowed throughout); empty before three blocks."""
        if len(self.ends) < 3:
            return []
        own, base = thread_best(self.refs), self.baseline()
        if own is not None and base is not None and own > SLOWED * base:
            return [own / base] * len(self.ends)
        medians = [
            statistics.median(samples[(self.ends[i - 1] if i else 0) : e] or [0.0])
            for i, e in enumerate(self.ends)
        ]
        fast = at_speed_anchor(medians)
        return [m / fast if fast > 0 else 1.0 for m in medians]

    def host_us(self, keep=None):
        """The host's µs per call over the blocks `keep` says (all by default)."""
        keep = keep or [True] * len(self.ends)
        calls = sum(self.ends[i] - (self.ends[i - 1] if i else 0) for i, k in enumerate(keep) if k)
        spent = sum(s for s, k in zip(self.host_s, keep) if k)
        return spent * 1e6 / max(calls, 1)

    def unslowed(self, samples):
        """The samples of the blocks the host did not slow, the host's µs per call over
        them, and what the slowed blocks were (None when none was). A block was slowed when
        its calls' median ran more than SLOWED times at_speed_anchor's, or all were
        where the thread ran slowed throughout. All are kept unless enough_left (a host whose
        turbo fades after a first burst reads as slowed throughout). The slowed blocks ran
        slower than the rest by this rule: ``kept_because`` "not slower" (the rule before
        2026-12-04 night, judged by a reference loop) is never given now."""
        ratios = self._slowed(samples)
        flags = [r > SLOWED for r in ratios]
        if not any(flags):
            return samples, self.host_us(), None
        kept, slowed, factors = [], [], []
        begin = 0
        for end, flag, ratio in zip(self.ends, flags, ratios):
            (slowed if flag else kept).extend(samples[begin:end])
            if flag:  # weighed by calls, as the share is: a one-call block is one call
                factors.extend([ratio] * (end - begin))
            begin = end
        left_out = enough_left(len(kept), len(samples))
        info = {
            "share": len(slowed) / len(samples),
            "factor": statistics.median(factors or [r for r in ratios if r > SLOWED]),
            "us_per_call": statistics.median(slowed),
            "reps": len(slowed),
            "left_out": left_out,
            "kept_because": "" if left_out else "most slowed",
        }
        if not left_out:
            return samples, self.host_us(), info
        return kept, self.host_us([not f for f in flags]), info


def spread(samples):
    """p10 and p90 of the samples (within their range: few samples are not extrapolated)."""
    if len(samples) < 2:
        return samples[0], samples[0]
    deciles = statistics.quantiles(samples, n=10, method="inclusive")
    return deciles[0], deciles[-1]
