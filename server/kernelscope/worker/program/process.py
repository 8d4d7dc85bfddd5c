# pyright: basic
"""The worker process: its fds, the request loop, one job at a time, and what a forked
child of user code must drop at once."""

import contextlib
import faulthandler
import gc
import os
import platform
import queue
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any

from . import counters, experiments, phases, timing
from .calibration import calibrate
from .channel import Channel
from .entry import children_of_program, children_tempdir
from .errors import Cancelled, JobError
from .job import Job
from .names import (
    BENCHMARK_KERNEL_ENV,
    BENCHMARK_KERNEL_LINE,
    CLEAN_WORKER,
    PROFILER_STACK_WARNING,
    TIMING_WORKER_ENV,
)
from .output import OutputCapture
from .profiler_start import skip_inductor_import

#: Jobs between full garbage collections (the others walk only what is not frozen).
THAW_EVERY = 20


class Worker:
    """Owns the channel, the captured output and the job loop."""

    def __init__(self):
        # The clean worker stands in for the user's own process: nothing of ours it need not
        # have (Inductor's benchmark harness in its compiled code, a frozen garbage collector).
        self.clean = os.environ.get(TIMING_WORKER_ENV) == CLEAN_WORKER
        self.reference_us = None  # timing.reference_us() once started
        proto_in, proto_out = os.dup(0), os.dup(1)
        self.real_err = os.fdopen(os.dup(2), "w", buffering=1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        self.capture = OutputCapture()
        os.dup2(self.capture.fd, 1)
        os.dup2(self.capture.fd, 2)
        self.channel = Channel(proto_in, proto_out)
        self.requests: queue.Queue[Any] = queue.Queue()
        self.cancel_requested = threading.Event()
        self.current_job = None
        self.jobs_run = 0
        faulthandler.enable(file=self.real_err, all_threads=False)
        if hasattr(signal, "SIGUSR1"):
            faulthandler.register(signal.SIGUSR1, file=self.real_err, all_threads=False)
        self._real_exit = os._exit
        os._exit = self._exit_hook
        self.pid = os.getpid()
        self.fork_hooks = []  # more to drop in a forked child (a job's call counters)
        self.forks = 0  # processes the programs forked (DataLoader workers)
        os.register_at_fork(after_in_child=self._forked, after_in_parent=self._forked_one)
        self.torch: Any = None
        self.children_tempdir = None  # children_tempdir(), where a program runs in place

    def log(self, text):
        self.real_err.write("kernelscope-worker: %s\n" % text)

    def _forked(self):
        """A forked child of user code (a DataLoader worker, say) is not the worker: it
        drops every hook at once, so its exit is its own and it cannot write frames."""
        os._exit = self._real_exit
        self.current_job = None
        for fd in (self.channel.fd_in, self.channel.fd_out):
            with contextlib.suppress(OSError):
                os.close(fd)
        sys.settrace(None)
        threading.settrace(None)
        for hook in self.fork_hooks:
            with contextlib.suppress(Exception):
                hook()

    def _forked_one(self):
        self.forks += 1

    def _exit_hook(self, code=0):
        job = self.current_job
        if os.getpid() != self.pid:  # a forked child that kept the hook somehow
            self._real_exit(code)
        if job is not None:
            frame = sys._getframe(1)
            output, _ = self.capture.collect()
            self.channel.send(
                {
                    "type": "profile_failed",
                    "job_id": job.id,
                    "kind": "exit",
                    "message": "user code called os._exit(%s); the worker was replaced" % code,
                    "path": job.local_text(frame.f_code.co_filename),
                    "line": frame.f_lineno,
                    "output": output,
                }
            )
        self._real_exit(code)

    def _read_requests(self):
        while True:
            try:
                msg = self.channel.receive()
            except Exception as e:
                self.log("bad frame: %r" % e)
                msg = None
            if msg is None:  # the server went away: stop at once, even mid-job
                self._real_exit(0)
            if msg.get("type") == "cancel":
                job = self.current_job
                if job is not None and job.id == msg.get("job_id"):
                    self.cancel_requested.set()
                    import _thread

                    _thread.interrupt_main()
                continue
            self.requests.put(msg)

    def start(self):
        t0 = time.perf_counter()
        os.environ.setdefault("KINETO_LOG_LEVEL", "99")  # remote hosts get no env from us
        if BENCHMARK_KERNEL_ENV not in os.environ and not self.clean:  # read at Inductor's import
            os.environ[BENCHMARK_KERNEL_ENV] = "1"
            self.capture.drop_lines(BENCHMARK_KERNEL_LINE)
        self.capture.drop_lines_with(PROFILER_STACK_WARNING)
        # TEARDOWN_CUPTI=1 is left to the user: on torch 2.11 + CUDA 13.0 it lost the GPU
        # activity of every other profiling session and hung the process at exit
        # (docs/h200-run/cupti_probe2.py). DESIGN-NOTES.md has the measurements.
        import torch

        self.torch = torch
        cuda_init_us = None
        devices = []
        if torch.cuda.is_available():
            t = time.perf_counter()
            torch.cuda.init()
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
            cuda_init_us = (time.perf_counter() - t) * 1e6
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                devices.append(
                    {
                        "index": i,
                        "name": p.name,
                        "total_memory": int(p.total_memory),
                        "multi_processor_count": int(p.multi_processor_count),
                        "capability": "%d.%d" % (p.major, p.minor),
                    }
                )
        if not os.environ.get(TIMING_WORKER_ENV):  # that one never profiles
            skip_inductor_import(torch)
            self._warm_profiler()
        self.settle()
        # the host's CPU speed now: a reading of its best for this worker's try rounds too
        self.reference_us = timing.reference_us()
        self.log("ready in %.2fs" % (time.perf_counter() - t0))
        self.channel.send(
            {
                "type": "worker_ready",
                "pid": os.getpid(),
                "hostname": socket.gethostname(),
                "python": platform.python_version(),
                "executable": sys.executable,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "devices": devices,
                "cuda_init_us": cuda_init_us,
                "platform": platform.platform(),
                "reference_us": self.reference_us,
            }
        )
        threading.Thread(target=self._read_requests, name="ks-requests", daemon=True).start()

    def _warm_profiler(self):
        """Pay the first profile()'s own start before the first job (without Inductor's
        import, profiler_start.py)."""
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + (
            [ProfilerActivity.CUDA] if torch.cuda.is_available() else []
        )
        x = torch.ones(8, device="cuda" if torch.cuda.is_available() else "cpu")
        with profile(activities=acts, record_shapes=True, with_stack=True):
            (x + x).sum()

    def serve(self):
        while True:
            msg = self.requests.get()
            kind = msg.get("type")
            if kind == "shutdown":
                return
            if kind in ("run_profile", "run_timing", "run_counters", "run_try"):
                self.run_job(msg)
            elif kind == "run_calibration":
                self.run_calibration(msg)

    def run_calibration(self, req):
        try:
            result = calibrate(self.torch, req)
        except JobError as e:
            result = {
                "type": "profile_failed",
                "job_id": req["job_id"],
                "kind": e.kind,
                "message": e.message,
            }
        except Exception as e:
            result = {
                "type": "profile_failed",
                "job_id": req["job_id"],
                "kind": "internal",
                "message": "calibration failed: %s: %s" % (type(e).__name__, e),
            }
        self.channel.send(result)

    def run_job(self, req):
        job = Job(self, req)
        saved_path = list(sys.path)
        saved_modules = set(sys.modules)
        saved_cwd = None
        self.cancel_requested.clear()
        self.capture.begin()
        self.current_job = job
        try:
            job.place()
            folders = [job.root]
            if job.in_project(job.path):  # an installed package's folder would shadow the
                folders.append(os.path.dirname(job.path))  # program's `utils`, `loss`, ...
            for d in folders:
                if d not in sys.path:
                    sys.path.insert(0, d)
            if job.entry:
                self.children_tempdir = children_tempdir()
            cwd = job.entry_cwd if job.entry else job.root if job.root != job.local_root else None
            if cwd is not None:  # a program runs where the user runs it; a remote job in its folder
                with contextlib.suppress(OSError):
                    saved_cwd = os.getcwd()
                os.chdir(cwd)
            result = self.outcome(job, lambda: self._body(job, req["type"]))
        finally:
            job.ranks.leave()
            self.current_job = None
            sys.settrace(None)
            sys.path[:] = saved_path
            if saved_cwd is not None:
                with contextlib.suppress(OSError):
                    os.chdir(saved_cwd)
            for name in set(sys.modules) - saved_modules:
                file = getattr(sys.modules.get(name), "__file__", None)
                if (file and job.is_user_file(file)) or name == req["module_name"]:
                    del sys.modules[name]
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            self.jobs_run += 1
        self.send_result(job, result)

    @staticmethod
    def _body(job, kind):
        if kind == "run_timing":
            return timing.run_timing(job)
        if kind == "run_try":
            return experiments.run_try(job)
        if kind == "run_counters":
            return counters.run_counters(job)
        return phases.run(job)

    def outcome(self, job, body):
        """`body()`'s result message, or the failure message of what it raised."""
        try:
            return body()
        except JobError as e:
            failed = {
                "type": "profile_failed",
                "job_id": job.id,
                "kind": e.kind,
                "message": e.message,
                "path": e.path,
                "line": e.line,
                "traceback": e.tb,
                "hint": e.hint,
            }
            if e.memory is not None:
                failed["memory_at_failure"] = e.memory
            return failed
        except (Cancelled, KeyboardInterrupt) as e:
            if self.cancel_requested.is_set():
                return {
                    "type": "profile_failed",
                    "job_id": job.id,
                    "kind": "cancelled",
                    "message": "cancelled",
                }
            err = job.user_error("keyboard_interrupt", e)
            return {
                "type": "profile_failed",
                "job_id": job.id,
                "kind": err.kind,
                "message": err.message,
                "path": err.path,
                "line": err.line,
                "traceback": err.tb,
            }
        except BaseException as e:
            return {
                "type": "profile_failed",
                "job_id": job.id,
                "kind": "internal",
                "message": "kernelscope worker error: %s: %s" % (type(e).__name__, e),
                "traceback": traceback.format_exc().splitlines()[-12:],
            }

    def send_result(self, job, result):
        """Send a job's result with its output; a job that ran a program ends the worker."""
        # Before the result goes: the launcher may time the call next in its clean worker,
        # and this process freeing GPU memory meanwhile would slow that one's launches.
        if not job.entry:
            self.settle()
        output, truncated = self.capture.collect()
        setup = job.setup_output
        if setup is None and not job.entry:  # it stopped in the import or the provider
            setup, output, truncated = (output, truncated), "", False
        result = job.attach_traces(job.localize(result))
        result["output"] = output
        if result["type"] in ("profile_finished", "profile_failed"):
            result["setup_output"] = setup[0] if setup else ""
        if result["type"] == "profile_finished":
            result["output_truncated"] = truncated
            result["setup_output_truncated"] = bool(setup and setup[1])
            result.setdefault("traces", {})
        result["worker_ends"] = bool(job.entry)
        self.cancel_requested.clear()
        self.channel.send(result)
        if job.entry:
            self.end()

    def conclude(self, job, body):
        """Run the rest of a job from inside the program's call, send its result and end the
        worker: the program is never resumed (nothing it could catch stops it)."""
        self.current_job = None  # the program's own os._exit from here on is not the job's
        self.send_result(job, self.outcome(job, body))

    def end(self):
        """End the process now (its program's threads and children with it)."""
        try:
            with contextlib.suppress(Exception):
                self.real_err.flush()
            if hasattr(signal, "SIGCHLD"):  # DataLoader's handler raises as its workers end
                with contextlib.suppress(Exception):
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            children = children_of_program()
            for child in children:
                with contextlib.suppress(Exception):
                    child.terminate()
            if self.children_tempdir:
                # their sockets live in it until they are gone; the launcher's retire waits
                # 2 s in all before it kills this process
                deadline = time.monotonic() + 0.5
                for child in children:
                    with contextlib.suppress(Exception):
                        child.join(max(0.0, deadline - time.monotonic()))
                shutil.rmtree(self.children_tempdir, ignore_errors=True)
        finally:
            self._real_exit(0)

    def settle(self):
        """Free what the job left in reference cycles (its GPU memory too), then freeze what
        survives: later collections walk only newer objects. With torch loaded, a collection
        of everything takes 0.1-0.2 s; of what one job made, milliseconds. Every
        THAW_EVERY jobs all is collected, so what froze and died since is freed too."""
        if self.jobs_run % THAW_EVERY == 0:
            gc.unfreeze()
        gc.collect()
        if not self.clean:
            gc.freeze()
        torch = self.torch
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()


def main():
    signal.signal(signal.SIGINT, signal.default_int_handler)
    worker = Worker()
    try:
        worker.start()
    except ImportError as e:
        worker.channel.send(
            {
                "type": "profile_failed",
                "job_id": "",
                "kind": "no_torch",
                "message": "torch is not importable by %s on %s (%s); install it there: "
                "%s -m pip install torch"
                % (sys.executable, socket.gethostname(), e, sys.executable),
            }
        )
        sys.exit(3)
    except BaseException as e:
        worker.channel.send(
            {
                "type": "profile_failed",
                "job_id": "",
                "kind": "worker_start",
                "message": "worker could not start: %s: %s" % (type(e).__name__, e),
            }
        )
        worker.log(traceback.format_exc())
        sys.exit(3)
    worker.serve()
