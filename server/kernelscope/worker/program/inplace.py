# pyright: basic
"""In place: the program's own calls of the function (or iterations of a loop) are the
steps, with its own changing inputs. Step 1 is the cold one; steps 2..skip are timed
without the profiler; where --skip was not given, at least TIMING_MIN_CALLS of them, and more
while they settle (Steps.settle);
the next wait + warmup + active steps run under the profiler's schedule; then the result is
sent and the worker ends. Run
locally, this is the worker that never profiled (a warmed profiler slows host code for the
rest of the process); through a command prefix or a remote, the profiling worker.

Where the steps before the profiler are long, fewer are profiled (as for a long call:
timing.fitted_schedule). The first wait step runs under a light profiler instead, to count
the events one step makes and weigh them (event_budget.recording); with no wait step asked
for, nothing is weighed.

kernelscope adds syncs only around the profiler: where the timed steps end, around the
counting step, before the active window opens and before it closes (CUDA events time the
steps before, with no sync). There is no line pass in place.

The steps are found by sys.monitoring from Python 3.12; before it by sys.settrace, which a
function's calls need only until the first returns (trampoline.py), a loop of the script
not at all and a loop of a module the program imports only until that import (loop_mark.py).
"""

import contextlib
import dis
import inspect
import math
import os
import statistics
import sys
import threading
import time
import types
from typing import Any

from .devices import profiler_activities
from .dynamo import compiled_around
from .errors import JobError
from .event_budget import available_bytes, recording
from .host_usage import UsageClock
from .loader_clock import LoaderClock
from .loop_mark import LoopMark, MarkingImport
from .names import CALL_RANGE, DIST_WORLD_SIZE, STAGES_PROFILED, TIMING_WORKER_ENV
from .optimizers import StepWatch
from .phases import finished, peak_memory, profiler_schedule, trace_stem
from .timing import (
    STEADY,
    TIMING_BLOCK_S,
    TIMING_MAX_S,
    TIMING_MIN_CALLS,
    add_thread_use,
    children_cpu_s,
    fitted_schedule,
    host_best,
    profiled_budget_s,
    reference_us,
    slowed_throughout,
    spread,
    thread_best,
    thread_times,
    threads_used,
)
from .traces import count_events, gzip_file
from .trampoline import Trampoline, swappable
from .watch import CallWatch

#: Where --skip was not given, the timed steps go on past the 5th while they still speed up:
#: while the median of the settle_window steps before the last is over STEADY times it (a
#: warm-up's slow steps then fast ones: a DDP program's calls 2-5 read 1.70x its calls past
#: the 50th, docs/h200-run/fifteenth/README.md; a step slower than those before, a spike, or
#: noise within STEADY, goes on to the profiler). At most SETTLE_MAX_STEPS more, and none
#: once the timed steps took SETTLE_MAX_S. Not on ranks: every rank must make as many.
SETTLE_MAX_STEPS = 45
SETTLE_MAX_S = 10.0
#: Before settling is judged, where --skip was not given, the steps are timed until
#: TIMING_MIN_CALLS of them are (a timing of its own times as many calls), unless they took
#: TIMING_MAX_S: on an H200 a DDP tutorial's four timed calls (±30 % call to call) read 1.32x
#: and 0.89x its calls past the 50th, and minGPT's forward's four 5.9 ms with one of 0.46 s
#: among them (docs/h200-run/seventeenth/README.md). Not TIMING_MIN_S too: a program's steps
#: are its own, and a short program's 1 ms steps would need 500 of them.


def settle_window(before):
    """Of `before` timed steps, how many the last is weighed against: 3 to 10, half."""
    return max(3, min(10, before // 2))


def settled(samples):
    """Whether the last of `samples` (µs) is within STEADY of the median of the
    settle_window before it (None: fewer than 4)."""
    if len(samples) < 4:
        return None
    window = samples[-1 - settle_window(len(samples) - 1) : -1]
    return samples[-1] * STEADY >= statistics.median(window)


def by_line(samples, sites):
    """Each of `samples` (µs) over the median of the later half of those from its calling
    line (`sites`, in step; None for a loop's iterations): a function called from lines of
    different costs (a GAN's discriminator, 8 ms from one line and 2 ms from another) is
    judged as one series, not read as speeding up where a cheap line's call follows dear
    ones; the later half, so a warm-up over a line's first calls stays slower than its
    steady ones. `samples` themselves where they came from one line."""
    sites = list(sites)[: len(samples)] + [None] * (len(samples) - len(sites))
    lines = {}
    for site, us in zip(sites, samples):
        lines.setdefault(site, []).append(us)
    if len(lines) < 2:
        return list(samples)
    steady = {site: statistics.median(us[len(us) // 2 :]) for site, us in lines.items()}
    return [us / steady[site] if steady[site] > 0 else 1.0 for site, us in zip(sites, samples)]


def leading_warm_up(series, extended):
    """How many of `series`' first steps are a warm-up: the most, k, whose fastest is over
    STEADY times those after it (their median where more steps were timed while they sped
    up, else their p90: a warm-up, not the first of steady steps that vary; with the
    median, one run in five of steps ±30 % alike lost its first), at least 3 left."""
    for k in range(len(series) - 3, 0, -1):
        rest = series[k:]
        bar = statistics.median(rest) if extended else spread(rest)[1]
        if min(series[:k]) > STEADY * bar:
            return k
    return 0


class Steps:
    """The step machine: each step's begin and end, from calls or loop iterations."""

    def __init__(self, job, skip, steps, label, def_line, what, settle=False):
        self.job = job
        self.what = what  # call | iteration
        self.torch = job.torch
        self.skip = max(1, skip)
        self.settle = settle  # time more steps while they settle (--skip not given)
        self.extended = 0  # timed steps added past skip (to the minimum, and while settling)
        self.minimum = 0  # of those, the ones timed to reach TIMING_MIN_CALLS
        self.steady = None  # whether the kept timed steps agreed (None: not judged)
        self.kept_from = 0  # the first timed sample kept (those before: still settling)
        self.wait, self.warmup, self.active = steps
        self.label = label
        self.def_line = def_line
        self.n = 0  # steps begun
        self.open = False
        self.t0 = 0.0
        self.cold_us = None
        self.samples = []
        self.threads = {}  # each thread's CPU seconds over the timed steps (add_thread_use)
        self.threads_before = {}
        self.children_before = None  # the children's CPU s at a timed step's begin
        self.children_cpu = None  # their CPU s over the timed steps (None: never read)
        self.window = []  # the timed steps' first begin and last end, on time.monotonic()
        self.refs = []  # reference loops between the timed steps (µs; see _reference)
        self.loader = LoaderClock(job.torch)  # the DataLoader's next() in the timed steps
        self.usage = UsageClock()  # the process's page faults and CPU in the timed steps
        self.ref_at = 0.0
        self.events = []
        # each active call's begin and end (CUDA events or perf_counter): its wall, not the
        # iteration's around it (a call's active window also holds the program between calls)
        self.active_spans = []
        self.prof: Any = None  # the profiler, once the profiled steps begin
        self.counting: Any = None  # the light profiler of the step that counts events
        self.counted = 0  # 1 once a wait step counted the events one step makes
        self.first = self.skip + 1  # the first profiled step (the counting one too)
        self.shapes = bool(job.req.get("record_shapes", True))
        self.settrace = False  # found by sys.settrace (Python before 3.12): slower Python
        self.traced_factor = 1.0  # how much slower a pure-Python loop ran under it
        self.watch: Any = None  # what finds the steps (its ``swapped``: the tracer went)
        self.stepped = StepWatch()  # the optimizers that step in the cold one
        self.range: Any = None  # the open step's record_function
        self.marks = {}
        self.done = False
        self.started = time.perf_counter()
        self.trace_tmp = None
        self.after = ""  # --no-stop-after: what the program did after the profiled steps
        self.grad_modes = []  # each step's autograd mode as it began (grad_mode)
        self.sites = []  # each step's calling line, (path, line) (None: a loop's iteration)
        self.files_before = {}  # the program's folder's files at its start (what it wrote)
        cuda = self.torch.cuda.is_available() and self.torch.cuda.is_initialized()
        self.device = (
            self.torch.device("cuda", self.torch.cuda.current_device())
            if cuda
            else self.torch.device("cpu")
        )

    @property
    def cuda(self):
        return self.device.type == "cuda"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    # one step --------------------------------------------------------------------------
    def begin(self):
        if self.done:
            return
        if not self.cuda and self.torch.cuda.is_available() and self.torch.cuda.is_initialized():
            self.device = self.torch.device("cuda", self.torch.cuda.current_device())
        self.n += 1
        self.open = True
        if self.n == self.skip + 1 and not self.counted and self._settling():
            self.skip += 1
            self.extended += 1
            self.first = self.skip + 1
        n, profiled = self.n, self.n - self.skip
        self.grad_modes.append(grad_mode(self.torch))
        self.sites.append(getattr(self.watch, "site", None))
        if n == 1 or profiled < 1:
            self.job.progress("cold" if n == 1 else "timing", n, self.skip)
            if n == 1:
                self.stepped.start()
            elif not self.cuda:  # ~25 µs a thread: between a GPU loop's steps, left out
                self.threads_before = thread_times()
                self.children_before = children_cpu_s()
            if n == 2:
                self.loader.install()
            self.loader.on = n > 1
            if n > 1:
                self.usage.start()
            self.t0 = time.perf_counter()
            if n == 2:
                self.window = [time.monotonic()] * 2
            if self.cuda and n > 1:
                start = self.torch.cuda.Event(enable_timing=True)
                start.record()
                self.events.append([start, None])
            return
        if profiled == 1:
            self._close_timing()
            if self.wait >= 1 and not self.counted:
                self._start_counting()
                return
            self._start_profiler()
        total = self.wait + self.warmup + self.active
        stage = STAGES_PROFILED[
            0 if profiled <= self.wait else 1 if profiled <= self.wait + self.warmup else 2
        ]
        self.job.progress(stage, profiled + self.counted, total + self.counted)
        if profiled == self.wait + self.warmup + 1:
            self._open_window()
        from torch.autograd.profiler import record_function

        self.range = record_function(CALL_RANGE)
        self.range.__enter__()
        if self.what == "call" and profiled > self.wait + self.warmup:
            self.active_spans.append([self._stamp(), None])

    def end(self):
        if self.done or not self.open:
            return
        self.open = False
        n, profiled = self.n, self.n - self.skip
        if n == 1:
            self.sync()
            self.cold_us = (time.perf_counter() - self.t0) * 1e6
            self.stepped.stop()
            self.job.optimizer_lists = self.stepped.lists()
            return
        if profiled < 1:
            self.loader.on = False
            self.window[1] = time.monotonic()
            if self.cuda:
                end = self.torch.cuda.Event(enable_timing=True)
                end.record()
                self.events[-1][1] = end
            else:
                self.samples.append((time.perf_counter() - self.t0) * 1e6)
                add_thread_use(self.threads, self.threads_before, thread_times())
                now = children_cpu_s()
                if now is not None and self.children_before is not None:
                    spent = max(now - self.children_before, 0.0)
                    self.children_cpu = (self.children_cpu or 0.0) + spent
            self.usage.stop()  # after the step's end is taken: its ~9 µs are not the step's
            self._reference()
            return
        if self.counting is not None:
            self._stop_counting()
            return
        if self.active_spans and self.active_spans[-1][1] is None:
            self.active_spans[-1][1] = self._stamp()
        self.range.__exit__(None, None, None)
        self.range = None
        total = self.wait + self.warmup + self.active
        if profiled == total:
            self.sync()
            self.marks["active1"] = time.perf_counter()
        self.prof.step()
        if profiled == total:
            self.done = True
            self.prof.__exit__(None, None, None)

    def _settling(self):
        """Whether the step about to begin is timed too: fewer than TIMING_MIN_CALLS timed
        yet, or those timed not yet settled (see SETTLE_MAX_STEPS); judged on the steps whose
        CUDA events have completed (no sync: a GPU-bound loop's queue holds them back, and
        its steps are the GPU's time)."""
        if not self.settle or self.skip < 2 or _on_ranks():
            return False
        done = self._completed()
        spent = sum(done)
        timed = self._timed()
        short = timed < TIMING_MIN_CALLS or (  # or too few completed to judge yet
            len(done) < 4 and timed < TIMING_MIN_CALLS + SETTLE_MAX_STEPS
        )
        if short and spent < TIMING_MAX_S * 1e6:
            self.minimum += 1
            return True
        steady = settled(self._by_line(done))
        if steady is None:
            return False
        self.steady = steady
        added = self.extended - self.minimum
        if steady or added >= SETTLE_MAX_STEPS or spent >= SETTLE_MAX_S * 1e6:
            if added:  # the window and the step that settled (and those after it)
                self.kept_from = max(0, len(done) - 1 - settle_window(len(done) - 1))
            return False
        return True

    def left_to_time(self):
        """Steps the minimum still wanted: to TIMING_MIN_CALLS, fewer where those at the
        median so far reach TIMING_MAX_S first."""
        done = self._completed()
        left = max(TIMING_MIN_CALLS - self._timed(), 0)
        median = statistics.median(done) if done else 0.0
        if median > 0:
            left = min(left, max(math.ceil((TIMING_MAX_S * 1e6 - sum(done)) / median), 0))
        return left

    def _timed(self):
        """The steps timed so far, counted as the host began them (on the host clock, then
        by CUDA events): a GPU's queue may hold back their events, and what never completes
        must not time every step."""
        return len(self.samples) + len(self.events)

    def _by_line(self, samples):
        """The timed `samples` (from step 2 on) over their calling lines' medians (by_line)."""
        return by_line(samples, self.sites[1 : 1 + len(samples)])

    def _kept(self):
        """The timed steps the figure is of, and those left out as still settling: from
        kept_from, less (where settling was judged) a warm-up at their start
        (leading_warm_up); all of them where those left out were not STEADY times slower
        than those kept. Weighed by calling line (by_line)."""
        series = self._by_line(self.samples)
        start = self.kept_from
        if self.steady is not None:
            start += leading_warm_up(series[start:], self.extended > self.minimum)
        early = series[:start]
        if early and statistics.median(early) <= STEADY * statistics.median(series[start:]):
            return self.samples, []
        return self.samples[start:], self.samples[:start]

    def _settling_fields(self, early):
        """What the report says of the timed steps' settling (None: not judged: --skip
        given, on ranks, or too few steps completed to judge)."""
        if self.steady is None:
            return None
        return {
            "first": 2 + len(early),
            "left_out": len(early),
            "left_out_us": statistics.median(early) if early else None,
            "steady": bool(self.steady),
            "added": self.extended - self.minimum,
            "minimum": self.minimum,
        }

    def _sites(self, early):
        """The lines the figure's timed calls came from, each with its calls and their
        median, where there are several (one function called from a training step's three
        lines, a GAN's discriminator, ran 14-36 ms by line); [] for one."""
        by_site = {}
        for site, us in zip(self.sites[1 + early :], self.samples[early:]):
            if site is not None:
                by_site.setdefault(site, []).append(us)
        if len(by_site) < 2:
            return []
        most = sorted(by_site.items(), key=lambda item: -len(item[1]))  # --from names the first
        return [
            {"path": self.job.local_text(path), "line": line, "calls": len(times),
             "median_us": statistics.median(times)}
            for (path, line), times in most
        ]  # fmt: skip

    def _completed(self):
        """The timed steps' µs so far: on a GPU those whose end event has completed (after
        those timed on the host clock before the program started CUDA)."""
        if not self.cuda:
            return self.samples
        done = list(self.samples)
        for start, end in self.events:
            try:  # the function may have moved to another stream: both must have completed
                if end is None or not (start.query() and end.query()):
                    break
                done.append(start.elapsed_time(end) * 1e3)
            except RuntimeError:
                break
        return done

    def _stamp(self):
        """Now, on the stream (a recorded CUDA event) or on the host clock."""
        if not self.cuda:
            return time.perf_counter()
        event = self.torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _wall_us(self):
        """The wall time of an active step (µs): of each call, from its begin to its end
        (on a GPU, its work there too); a loop's iterations fill the window between them."""
        spans = [(a, b) for a, b in self.active_spans if b is not None]
        if not spans:
            return (self.marks["active1"] - self.marks["active0"]) * 1e6 / max(self.active, 1)
        if self.cuda:  # synchronized as the window closed
            return statistics.mean(a.elapsed_time(b) * 1e3 for a, b in spans)
        return statistics.mean((b - a) * 1e6 for a, b in spans)

    def _reference(self):
        """A reference loop after a timed step (outside its span), at most one each
        TIMING_BLOCK_S but the first two: where the thread's best of them stays SLOWED
        over the host's, every timed step ran slowed (timing.slowed_throughout). Not under
        sys.settrace, which slows the loop too (traced_factor)."""
        if self._traced():
            return
        if len(self.refs) >= 2 and time.perf_counter() - self.ref_at < TIMING_BLOCK_S:
            return
        self.refs.append(reference_us())
        self.ref_at = time.perf_counter()

    def _traced(self):
        """Whether sys.settrace still finds the steps (Python before 3.12, not swapped)."""
        return self.settrace and not getattr(self.watch, "swapped", False)

    # the profiler ----------------------------------------------------------------------
    def _start_profiler(self):
        from torch.profiler import profile

        req = self.job.req
        self.stem = trace_stem(self.job)
        self.trace_tmp = os.path.join(self.job.trace_dir, self.stem + ".pt.trace.json")
        tmp = self.trace_tmp
        self.prof = profile(
            activities=profiler_activities(self.device),
            schedule=profiler_schedule(self.wait, self.warmup, self.active),
            on_trace_ready=lambda p: p.export_chrome_trace(tmp),
            record_shapes=self.shapes,
            with_stack=bool(req.get("with_stack", True)),
            with_flops=self.shapes,
        )
        self.prof.__enter__()
        if self.wait + self.warmup == 0:
            self._open_window()

    def _close_timing(self):
        """The steps before the profiler are over: read their CUDA events, fit the schedule
        (once: a counting step comes first, where there is one)."""
        if self.counted:
            return
        self.loader.remove()
        self.sync()
        if self.cuda:
            # the steps before the program started CUDA kept their host-clock times, so
            # each sample stays its step's (Settling.first, the calling lines)
            self.samples += [s.elapsed_time(e) * 1e3 for s, e in self.events if e is not None]
        self.events = []
        self._fit()

    def _start_counting(self):
        """The first wait step runs under a light profiler (no shapes, no stacks): its trace
        counts the events one step makes, as the cold call's does for a function."""
        from torch.profiler import profile

        self.job.progress(STAGES_PROFILED[0], 1, self.wait + self.warmup + self.active)
        self.counting = profile(activities=profiler_activities(self.device))
        self.counting.__enter__()

    def _stop_counting(self):
        """Close the counting step; profile fewer active steps, or without shapes, where
        theirs would not fit in memory (event_budget.recording; JobError where not one
        does). The next step starts the schedule, one wait step fewer."""
        self.sync()
        prof, self.counting = self.counting, None
        prof.__exit__(None, None, None)
        tmp = os.path.join(self.job.trace_dir, trace_stem(self.job) + ".count.json")
        prof.export_chrome_trace(tmp)
        events = count_events(tmp)
        os.unlink(tmp)
        active, self.shapes, self.job.recording_note = recording(
            events, self.active, available_bytes(), self.shapes, self.what
        )
        # Each rank of a job counts its own steps: all must profile as many (each step may
        # hold a collective), so on ranks the asked count stands.
        self.active = self.active if _on_ranks() else active
        self.counted = 1
        self.skip += 1
        self.wait -= 1

    def _fit(self):
        """Fewer profiled steps where the steps before took long (fitted_schedule; the job's
        schedule_note says so): an epoch-long iteration profiled with stacks would pile up
        its events as a long call does."""
        if not self.samples or _on_ranks():  # as many steps on every rank (_stop_counting)
            return
        (self.wait, self.warmup, self.active), self.job.schedule_note = fitted_schedule(
            (self.wait, self.warmup, self.active),
            statistics.median(self._kept()[0]),
            profiled_budget_s(),
            self.what,
            keep_wait=True,  # the wait step asked for counts the events a step makes
        )

    def _open_window(self):
        self.sync()
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats(self.device)
        self.marks["active0"] = time.perf_counter()

    def conclude(self):
        """The finished message of the profiled steps."""
        from .entry import written_since

        job = self.job
        job.progress("export")
        trace_path, _events = gzip_file(self.trace_tmp)
        wall_us = self._wall_us()
        memory = peak_memory(job, self.device)
        # With none timed (--skip 1) there is no unprofiled figure: the cold call is its own.
        samples, early = self._kept()
        p10, p90 = spread(samples) if samples else (None, None)
        timing = {
            "us_per_call": statistics.median(samples) if samples else 0.0,
            "method": ("cuda_events" if self.cuda else "perf_counter") if samples else "none",
            "reps": len(samples),
            "samples_us": samples[:200],
            "host_us_per_call": None,
            "p10_us": p10,
            "p90_us": p90,
            "gpu": None,
            "process": (
                "before the profiler started, in a worker that never profiled"
                if os.environ.get(TIMING_WORKER_ENV)
                else "before the profiler started, in a worker whose profiler was warmed"
            ),
            "replayed_from": "",
            "replay_note": "",
            "window_s": self.window,
            "slowed": slowed_throughout(samples, self.refs, host_best(job)),
            "reference_us": thread_best(self.refs),
            "host_reference_us": host_best(job),
            "threads": threads_used({}, self.threads),
            **self.loader.fields(self.samples),  # its clock ran over all the timed steps
            **self.usage.fields(len(samples), first=len(early)),  # of the kept steps
            "children_cpu_s": (
                round(self.children_cpu, 3) if self.children_cpu is not None else None
            ),
            "traced": (
                "the steps are found by sys.settrace, under which a pure-Python loop ran "
                "%.1fx slower here: host-bound steps read slower than they run" % self.traced_factor
                if self._traced()
                else ""
            ),
            "settling": self._settling_fields(early),
        }
        cold = {
            "first_call_us": self.cold_us or 0.0,
            "entry_to_first_kernel_us": None,
            "process_fresh": job.worker.jobs_run == 0,
            "trace_path": None,
            "compile_us": None,
        }
        first = self.first
        last = self.skip + self.wait + self.warmup + self.active
        modes = ["%ss %d-%d profiled, %d-%d active"
                 % (self.what, first, last, last - self.active + 1, last)]  # fmt: skip
        modes += mixed_modes(self.grad_modes[1:last], self.what)
        if self.after:
            modes.append(self.after)
        job.call_site = {
            "sites": self._sites(len(early)),
            "via": self.label,
            "call": first,
            "caller_path": None,
            "caller_line": None,
            "modes": modes,
            "captured": False,
            "entry_s": self.marks.get("active0", time.perf_counter()) - self.started,
            "wrote": written_since(job.entry_cwd, self.files_before),
            "settled_s": 0.0,
            "saved": None,
            "save_error": None,
            "reused": False,
            "kept": False,
            "step": self.what,
        }
        job.progress("done")
        stand_in = types.SimpleNamespace(
            __code__=types.SimpleNamespace(co_firstlineno=self.def_line)
        )
        return finished(
            job,
            stand_in,
            self.device,
            (self.wait + self.counted, self.warmup, self.active),
            cold,
            timing,
            trace_path,
            wall_us,
            [],
            memory,
        )


def _on_ranks():
    """Whether this worker is one rank of a job of several (its steps must match theirs)."""
    return int(os.environ.get(DIST_WORLD_SIZE, "1")) > 1


def grad_mode(torch):
    """The autograd mode a step runs in, in the words of the captured call's modes."""
    if torch.is_inference_mode_enabled():
        return "inference_mode"
    return "" if torch.is_grad_enabled() else "no_grad"


def mixed_modes(modes, what):
    """What the report says of the steps' autograd modes (steps 2 on, `modes[0]` being step
    2's): the one mode they share, or which steps ran in which where they differ (a
    validation pass among training steps), with how to take one kind alone."""
    kinds = {}
    for n, mode in enumerate(modes, start=2):
        kinds.setdefault(mode or "with autograd", []).append(n)
    if len(kinds) <= 1:
        return [mode for mode in kinds if mode != "with autograd"]
    parts = [
        "%s %s%s" % (_spans(steps), "" if mode == "with autograd" else "under ", mode)
        for mode, steps in kinds.items()
    ]
    return [
        "%ss of different kinds: %s (the figures mix them: --from the line that makes one "
        "kind, a loop's line as the target, or --skip past them, takes one kind)"
        % (what, "; ".join(parts))
    ]


def _spans(steps):
    """``2-9, 11-14`` for [2, ..., 9, 11, ..., 14]."""
    out, start = [], steps[0]
    for a, b in zip(steps, [*steps[1:], None]):
        if b != a + 1:
            out.append(str(start) if start == a else "%d-%d" % (start, a))
            start = b
    return ", ".join(out)


#: Code flags of generators and coroutines, whose return events include each suspension.
_SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class LoopWatch(CallWatch):
    """Iterations of the loop whose body starts at `body_line` in `path`: each time that line
    runs, one iteration ends and the next begins; a line of the loop's code outside
    `loop_line`..`end_line`, or its code's return, is the loop's exit (``on_exit``: the
    iteration in progress ends there, not at the next run's first iteration)."""

    def __init__(self, path, body_line, is_user_file, loop_line=0, end_line=0):
        super().__init__(path, "", 0, 0, None, is_user_file)
        self.body_line = body_line
        self.loop_line = loop_line
        self.end_line = end_line
        self.on_line: Any = None
        self.on_exit: Any = None
        self.loop_code = None
        self.not_loop = set()  # the file's other code objects, each looked at once
        self.marked = False  # the loop's module marks its iterations itself (MarkingImport)
        self.swapped = False  # ... and the main thread's tracer went with it
        self.inside = False  # an iteration began since the loop last ended

    def iteration(self):
        self.inside = True
        self.on_line()

    def left(self):
        """A line past the loop, or its code's return: the loop's exit where it had begun."""
        if self.inside:
            self.inside = False
            self.on_exit()

    def holds(self, code):
        if self.loop_code is not None:
            return code is self.loop_code
        if not self.in_file(code) or code in self.not_loop:
            return False
        # dis.findlinestarts, not co_lines(): the worker runs on Python 3.9 too
        if any(line == self.body_line for _, line in dis.findlinestarts(code)):
            self.loop_code = code
            return True
        self.not_loop.add(code)
        return False

    def outside(self, line):
        """Whether a line of the loop's code is past the loop (or before it)."""
        return (
            bool(self.end_line)
            and line is not None
            and not (self.loop_line <= line <= self.end_line)
        )

    def returns_out(self, code):
        """Whether the code's return leaves the loop (a generator's yield does not)."""
        return bool(self.end_line) and not code.co_flags & _SUSPENDS

    def forked(self):
        """In a forked child: nothing to watch (its iterations are not the program's)."""
        self.disarm()

    def _arm_monitoring(self, monitoring):
        events = monitoring.events

        def on_start(code, offset):
            if self.holds(code):
                wanted = events.LINE | (events.PY_RETURN if self.returns_out(code) else 0)
                monitoring.set_local_events(self.tool, code, wanted)
                return None
            return monitoring.DISABLE

        def on_line(code, line):
            if code is not self.loop_code:
                return monitoring.DISABLE
            if line == self.body_line:
                self.iteration()
                return None
            if self.outside(line):
                self.left()
                return None
            return monitoring.DISABLE  # the loop's own lines: nothing to see there

        def on_return(code, offset, value):
            if code is self.loop_code:
                self.left()
                return None
            return monitoring.DISABLE

        monitoring.register_callback(self.tool, events.PY_START, on_start)
        monitoring.register_callback(self.tool, events.LINE, on_line)
        monitoring.register_callback(self.tool, events.PY_RETURN, on_return)
        monitoring.set_events(self.tool, events.PY_START)

    def hand_off(self):
        """The loop's module is being imported with the mark in: the tracer finds nothing
        from here on, and goes from this thread and those started later. Before 3.12 no
        thread can drop another's: imported off the main thread, the main thread keeps it
        (its slow path), and the report still names the tracer's factor."""
        self.marked = True
        if threading.current_thread() is threading.main_thread():
            self.swapped = True
            self.disarm()
        else:  # the main thread's goes as the job ends (disarm, there)
            sys.settrace(None)
            threading.settrace(None)

    def _trace(self, frame, event, arg):
        if event == "call" and not self.marked and self.holds(frame.f_code):
            return self._local_loop
        return None

    def _local_loop(self, frame, event, arg):
        if event == "line":
            if frame.f_lineno == self.body_line:
                self.iteration()
            elif self.outside(frame.f_lineno):
                self.left()
        elif event == "return" and self.returns_out(frame.f_code):
            self.left()
        return self._local_loop

    def disarm(self):
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None and self.tool is not None and self.loop_code is not None:
            monitoring.set_local_events(self.tool, self.loop_code, 0)
        if monitoring is not None and self.tool is not None:
            monitoring.register_callback(self.tool, monitoring.events.LINE, None)
            monitoring.register_callback(self.tool, monitoring.events.PY_RETURN, None)
        super().disarm()


class CallSteps(CallWatch):
    """The function's calls as steps: each outermost call begins one and its return (or
    exception) ends it; with `caller` (--from), only the calls with that user line on their
    stack (a training loop's, not a validation pass's)."""

    def __init__(self, path, qualname, first_line, is_user_file, caller=None):
        super().__init__(path, qualname, first_line, 0, caller, is_user_file)
        self.on_begin: Any = None
        self.on_end: Any = None
        self.depth = 0
        self.stepping = False  # the outermost call in progress is a step
        self.trampoline: Any = None  # before 3.12, after the first call: trampoline.py
        self.swap_tried = False
        self.swapped = False  # the steps after the first ran without the tracer
        self.site = None  # the calling line of the step in progress (calling_line)

    def started(self, frame):
        if os.getpid() != self.pid:  # a forked child's call: the parent hears of the first
            if not self.seen:
                self.seen = 1
                with contextlib.suppress(OSError):
                    os.write(self._child_w, b"x")
            return False
        self.depth += 1
        if self.depth == 1:
            # this frame never in a local of its own: the cycle would keep the trampoline's
            # copy of the function (up the stack) alive, and no later swap could be made
            self.stepping = self.caller is None or self.caller in self.callers_of(
                frame if frame is not None else sys._getframe()
            )
            if self.stepping:  # a step's calling line: no stack walk for the other calls
                self.site = self.calling_line(frame if frame is not None else sys._getframe())
                self.calls += 1
                self.on_begin()
        return True

    def calling_line(self, frame):
        """The nearest line of the user's code on the stack above `frame`, (path, line):
        the function's own frame skipped (a trampoline standing in for it is not the
        user's code), not another of its name (a ``forward`` calling another)."""
        f = frame.f_back
        while f is not None:
            code = f.f_code
            if self.is_user_file(code.co_filename) and not self.matches(code):
                return (os.path.realpath(code.co_filename), f.f_lineno)
            f = f.f_back
        return None

    def returned(self):
        if os.getpid() != self.pid:
            return
        self.depth -= 1
        if self.depth == 0 and self.stepping:
            self.on_end()

    def forked(self):
        """In a forked child: only note its first call to the parent, where watching costs
        it nothing (sys.monitoring, the trampoline); a tracer would slow each of its calls."""
        self.seen = 0
        if self.tool is None and self.trampoline is None:
            self.disarm()

    def _arm_monitoring(self, monitoring):
        events = monitoring.events
        name = self.name

        def on_start(code, offset):
            if code.co_name == name and self.matches(code):
                monitoring.set_local_events(self.tool, code, events.PY_RETURN)
                self.started(None)
                return None
            return monitoring.DISABLE

        def on_return(code, offset, value):
            if code is self.code:
                self.returned()

        # PY_UNWIND (a call ended by an exception) cannot be a local event: it is a global
        # one, rare, and ignored for every other code object.
        monitoring.register_callback(self.tool, events.PY_START, on_start)
        monitoring.register_callback(self.tool, events.PY_RETURN, on_return)
        monitoring.register_callback(self.tool, events.PY_UNWIND, on_return)
        monitoring.set_events(self.tool, events.PY_START | events.PY_UNWIND)

    def _trace(self, frame, event, arg):
        if self.trampoline is not None:  # another thread's tracer: it goes too
            sys.settrace(None)
            return None
        code = frame.f_code
        if (
            event == "call"
            and code.co_name == self.name
            and self.matches(code)
            and self.started(frame)
        ):
            frame.f_trace_lines = False
            return self._local_steps
        return None

    def _local_steps(self, frame, event, arg):
        if event == "return":
            self.returned()
            if self.depth == 0 and not self.swap_tried and self.armed:
                self._swap(frame)
        return self._local_steps

    def _swap(self, frame):
        """After the first call, the tracer's steps handed to a trampoline on the function,
        and the tracer dropped (trampoline.py), where the function allows it."""
        self.swap_tried = True
        fn = swappable(frame.f_code, frame)
        if fn is None:
            return
        self.trampoline = Trampoline(fn, self._through)
        self.swapped = True
        sys.settrace(None)
        threading.settrace(None)

    def _through(self, original, args, kwargs):
        if not self.armed or not self.started(None):  # a forked child, or disarmed
            return original(*args, **kwargs)
        try:
            return original(*args, **kwargs)
        finally:
            self.returned()

    def disarm(self):
        if self.trampoline is not None:
            self.trampoline.restore()
            self.trampoline = None
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None and self.tool is not None:
            if self.code is not None:
                monitoring.set_local_events(self.tool, self.code, 0)
            monitoring.register_callback(self.tool, monitoring.events.PY_RETURN, None)
            monitoring.register_callback(self.tool, monitoring.events.PY_UNWIND, None)
        super().disarm()


def run_in_place(job):
    """Run the program, its calls (or iterations) the steps; conclude the job from inside the
    last active step (the worker ends). Returns only by raising a JobError."""
    from .entry import entry_label, files_now, in_script, run_program

    entry = job.req["entry"]
    req = job.req
    schedule = (int(req["wait"]), int(req["warmup"]), int(req["active"]))
    skip = int(entry.get("skip") or 5)
    loop = int(entry.get("loop_line") or 0)
    label = entry_label(entry)
    def_line = loop or int(entry.get("def_line") or 0)
    what = "iteration" if loop else "call"
    steps = Steps(job, skip, schedule, label, def_line, what, bool(entry.get("settle")))
    steps.files_before = files_now(job.entry_cwd)

    finish = bool(entry.get("finish"))

    def conclude_if_done():
        if steps.done and not finish:
            job.worker.conclude(job, steps.conclude)

    def fail_with(failure):
        """End the job with `failure` from inside the program (the worker ends)."""

        def fail():
            raise failure

        job.worker.conclude(job, fail)

    def safely(fn):
        """Run a step's bookkeeping; what it raises is the job's failure (the worker ends),
        never an exception in the program's code."""
        try:
            fn()
        except BaseException as e:
            fail_with(e)

    end_line = int(entry.get("end_line") or 0)
    forks = job.worker.forks

    def too_few():
        added = steps.extended
        profiled = steps.skip - skip - added + steps.wait + steps.warmup + steps.active  # fitted
        minimum = steps.minimum
        if minimum and steps.steady is None:  # it ended before settling could be judged
            minimum += steps.left_to_time()
        settled_more = added - steps.minimum  # timed while they still sped up
        need = skip + minimum + settled_more + profiled + (1 if loop and not end_line else 0)
        name = "the loop at line %d" % loop if loop else req["qualname"]
        # it ended while they sped up, or before the minimum (settling is judged after it)
        settling = (settled_more and not steps.steady) or (minimum and steps.steady is None)
        more = []
        if minimum:
            more.append(
                "%d more to time %d or %g s of them" % (minimum, TIMING_MIN_CALLS, TIMING_MAX_S)
            )
        if settled_more:
            more.append("%d more while its %ss still sped up" % (settled_more, steps.what))
        message = (
            "%s made %d %s%s of %s in %.1f s; in place needs %s%d (%s, then %d profiled%s)"
            % (
                label,
                steps.n,
                steps.what,
                "" if steps.n == 1 else "s",
                name,
                time.perf_counter() - steps.started,
                "at least " if settling else "",
                need,
                "--skip %d, %s" % (skip, " and ".join(more)) if more else "--skip %d" % skip,
                profiled,
                ", and one more to end the last" if loop and not end_line else "",
            )
        )
        hint = "run the program longer, or lower --skip, --wait, --warmup or --active"
        if added:
            hint = (
                "run the program longer, or give --skip %d to profile from %s %d on (%d timed)%s"
                % (skip, steps.what, skip + 1, skip - 1,
                   ", whether or not its %ss still speed up" % steps.what if settled_more else "")
            )  # fmt: skip
        children = not loop and not steps.n and watch.called_in_children()
        if children:
            message += (
                "; it ran in the program's forked children (DataLoader workers), and in "
                "place profiles the main process's calls"
            )
        if children or (not loop and not steps.n and job.worker.forks > forks):
            hint = (
                "%sprofile it without --in-place: the call is taken in the DataLoader worker "
                "and replayed in the main process, as the worker runs it"
                % (
                    ""
                    if children
                    else "if it runs in the %d processes the program forked "
                    "(DataLoader workers), " % (job.worker.forks - forks)
                )
            )
        compiled = compiled_around(job.path, int(entry["body_line"])) if loop else None
        if compiled:
            message += (
                "; the loop is in %s, which torch.compile compiled: its iterations run in "
                "the compiled graph, not as Python" % compiled
            )
            hint = (
                "profile the compiled function's calls instead (%s::%s --in-place), or a "
                "loop of the program around them" % (os.path.basename(job.path), compiled)
            )
        return JobError("too_few_calls", message, job.path, def_line or None, hint=hint)

    mark = importer = None
    if loop:
        watch = LoopWatch(job.path, int(entry["body_line"]), job.is_user_file, loop, end_line)

        def boundary():
            steps.end()
            conclude_if_done()
            steps.begin()

        def left(once):
            """The loop ended: so did its iteration. A loop of a module's code (a script's
            loop at its top level) never runs again: short of steps, the job fails now,
            before the profiler records the rest of the program."""
            steps.end()
            conclude_if_done()
            if once and not steps.done:
                fail_with(too_few())

        def exited():
            code = watch.loop_code
            sys.call_tracing(
                safely, (lambda: left(code is not None and code.co_name == "<module>"),)
            )

        watch.on_line = lambda: sys.call_tracing(safely, (boundary,))
        watch.on_exit = exited
        if getattr(sys, "monitoring", None) is None:
            compiler = getattr(job.torch, "compiler", None)
            marker = LoopMark(loop, int(entry["body_line"]), lambda: safely(boundary),
                              lambda once: safely(lambda: left(once)),
                              getattr(compiler, "is_compiling", None))  # fmt: skip
            if in_script(job):  # compiled with the mark by run_program
                mark = marker if marker.prepare(job.path) else None
            else:  # a module's loop: marked as the program imports it
                importer = MarkingImport(job.path, marker, watch.hand_off)
                if importer.imported() or not marker.prepare(job.path):
                    importer = None
    else:
        caller = None
        if entry.get("caller"):
            path, _, line = entry["caller"].rpartition(":")
            caller = (os.path.realpath(job.here(path)), int(line))
        watch = CallSteps(job.path, req["qualname"], int(entry.get("first_line") or 0),
                          job.is_user_file, caller)  # fmt: skip
        watch.on_begin = lambda: sys.call_tracing(safely, (steps.begin,))

        def ended():
            steps.end()
            conclude_if_done()

        watch.on_end = lambda: sys.call_tracing(safely, (ended,))
    steps.watch = watch
    job.worker.fork_hooks += [watch.forked, steps.loader.remove]
    job.progress("entry")
    try:
        if mark is None:  # else the loop calls the step machine itself: no tracer
            untraced = reference_us()
            watch.arm()
            steps.settrace = watch.tool is None
            if steps.settrace:  # the whole interpreter runs its slow path while a tracer is set
                steps.traced_factor = reference_us() / untraced
        if importer is not None:
            importer.install()
        try:
            run_program(job, entry, mark)
        except JobError as e:
            if not steps.done:
                raise
            steps.after = "then the program failed: %s" % e.message
        else:
            if steps.done:
                steps.after = "then the program ran to its end"
        finally:
            if importer is not None:
                importer.remove()
            watch.disarm()
            steps.loader.remove()
            if steps.prof is not None and not steps.done:
                steps.prof.__exit__(None, None, None)
            if steps.counting is not None:
                steps.counting.__exit__(None, None, None)
    finally:
        job.worker.fork_hooks.remove(watch.forked)
        job.worker.fork_hooks.remove(steps.loader.remove)
    if steps.done:  # --no-stop-after: the program has finished; the result goes now
        steps.after += " (%.1f s after the profiled steps)" % (
            time.perf_counter() - steps.marks["active1"]
        )
        job.worker.conclude(job, steps.conclude)

    raise too_few()
