# pyright: basic
"""kernelscope worker: profiles one function per request. Standard library + torch only.

Started as ``<launcher argv> python3 -u -c <bootstrap>``; the bootstrap reads this source
from stdin (4-byte length, then the text) and runs it. From then on stdin and the original
stdout carry length-prefixed JSON frames on private fds; fd 0 reads /dev/null and fds 1/2
write into a pipe whose last 64 KiB are returned with each job, so user output never
corrupts the protocol. Runs on Python >= 3.9 and torch >= 2.2.
"""

from __future__ import annotations

import base64
import contextlib
import faulthandler
import gc
import gzip
import hashlib
import inspect
import json
import os
import platform
import queue
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import traceback
import types
from typing import Any

HEADER = struct.Struct(">I")
OUTPUT_KEEP = 64 * 1024
SYNC_MARK = b"\x00kernelscope-sync\x00"
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero")
STAGES_PROFILED = ("wait", "warmup", "active")
SHIP_KEEP = 16  # shipped project folders kept on this host, newest first
MAX_RETURN_BYTES = 150 * 1024 * 1024  # gzip'd traces sent back in one frame
# Generated code (Inductor's and Triton's caches) is never the user's, even under the project
GENERATED_CODE = ("/torchinductor_", "/.triton/", "/triton/cache", "<eval_with_key>")
# Twins of server-side names this program cannot import (tests/unit/test_worker_twins.py):
CALL_RANGE = "ks:call"  # kernelscope.analysis.calls.CALL_RANGE
COLD_RANGE = "ks:cold"  # what kernelscope.analysis.checks looks up in the cold trace
# A rank of a distributed job: torchrun's variables (kernelscope.protocol.DIST_*).
DIST_RANK, DIST_WORLD_SIZE, DIST_LOCAL_RANK = "RANK", "WORLD_SIZE", "LOCAL_RANK"
DIST_TIMEOUT_ENV = "KERNELSCOPE_DIST_TIMEOUT"
TIMING_WORKER_ENV = "KERNELSCOPE_TIMING_WORKER"  # kernelscope.engine.launcher
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")  # kernelscope.analysis.trace_model
# Runtime calls the line pass counts as syncs: a name containing one of these, not "Async"
# (the server's facts.is_sync).
SYNC_CALLS = ("Synchronize", "cudaMemcpy", "cuMemcpyDtoH", "hipMemcpy")


class JobError(Exception):
    """A job failure with a cause the user can act on."""

    def __init__(self, kind, message, path=None, line=None, hint=None, tb=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.path = path
        self.line = line
        self.hint = hint
        self.tb = tb or []


class Cancelled(Exception):
    """Raised in the main thread when the server cancels the running job."""


# --- transport ------------------------------------------------------------------------


class Channel:
    """Frames over the two private fds."""

    def __init__(self, fd_in, fd_out):
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.lock = threading.Lock()

    def send(self, message):
        body = json.dumps(message, allow_nan=False, default=str).encode()
        data = HEADER.pack(len(body)) + body
        with self.lock:
            view = memoryview(data)
            while view:
                written = os.write(self.fd_out, view)
                view = view[written:]

    def _read_exact(self, n):
        chunks = []
        while n:
            chunk = os.read(self.fd_in, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self):
        header = self._read_exact(HEADER.size)
        if header is None:
            return None
        body = self._read_exact(HEADER.unpack(header)[0])
        return None if body is None else json.loads(body)


class OutputCapture:
    """Drains the pipe behind fds 1 and 2 and keeps the last 64 KiB of each job."""

    def __init__(self, fd):
        self.fd = fd
        self.data = bytearray()
        self.total = 0
        self.lock = threading.Lock()
        self.synced = threading.Event()
        threading.Thread(target=self._drain, name="ks-output", daemon=True).start()

    def _drain(self):
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.data += chunk
                self.total += len(chunk)
                mark = self.data.find(
                    SYNC_MARK, max(0, len(self.data) - len(chunk) - len(SYNC_MARK))
                )
                if mark >= 0:
                    self.total -= len(self.data) - mark
                    del self.data[mark:]
                    self.synced.set()
                if len(self.data) > 2 * OUTPUT_KEEP:
                    del self.data[: len(self.data) - OUTPUT_KEEP]

    def begin(self):
        self.collect()
        with self.lock:
            self.data.clear()
            self.total = 0

    def collect(self):
        """Wait until everything written so far has been drained; return (text, truncated)."""
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass
        self.synced.clear()
        try:
            os.write(1, SYNC_MARK)
            self.synced.wait(2.0)
        except OSError:
            pass
        with self.lock:
            kept = bytes(self.data[-OUTPUT_KEEP:])
            truncated = self.total > OUTPUT_KEEP
        return kept.decode("utf-8", "replace"), truncated


# --- the job -----------------------------------------------------------------------------


class Job:
    """One RunProfile request, run to a ProfileFinished or ProfileFailed message."""

    def __init__(self, worker, req):
        self.worker = worker
        self.req = req
        self.id = req["job_id"]
        self.local_root = os.path.abspath(req["project_root"])
        self.root = self.local_root
        self.path = os.path.abspath(req["path"])
        self.trace_dir = req["trace_dir"]
        self.own_trace_dir = None
        self.dist = None  # torch.distributed, in a job of several ranks (init_ranks)
        self.dist_device = None
        self._set_user_dirs()
        self._user_cache = {}
        self.torch = worker.torch
        self.stages = {}  # seconds per stage, in the order they ran
        self._stage = None
        self._stage_t = 0.0

    def _set_user_dirs(self):
        self.user_dirs = tuple(
            d if d.endswith(os.sep) else d + os.sep for d in {self.root, os.path.dirname(self.path)}
        )

    # where the project is on this host ----------------------------------------------
    def place(self):
        """Run from shipped files or a remote workdir; keep traces in a folder of our own
        when they go back inline."""
        req = self.req
        if req.get("files") or req.get("remote_root"):
            rel = os.path.relpath(self.path, self.local_root)
            if req.get("files"):
                self.root = materialize(req["files"])
            else:
                self.root = os.path.abspath(os.path.expanduser(req["remote_root"]))
                if not os.path.isdir(self.root):
                    raise JobError(
                        "file_not_found",
                        "workdir %s does not exist on %s; copy the project there or drop "
                        "workdir to ship its files" % (self.root, socket.gethostname()),
                    )
            self.path = os.path.normpath(os.path.join(self.root, rel))
            self._set_user_dirs()
        if req.get("return_traces"):
            self.own_trace_dir = tempfile.mkdtemp(prefix="traces-", dir=private_dir())
            self.trace_dir = self.own_trace_dir

    def local_text(self, text):
        """`text` with this host's project root replaced by the user's local one."""
        if not text or self.root == self.local_root:
            return text
        if text == self.root:
            return self.local_root
        return text.replace(self.root + os.sep, self.local_root + os.sep)

    def localize(self, result):
        """Point every path in a result at the user's local files."""
        for key in ("path", "message"):
            if result.get(key):
                result[key] = self.local_text(result[key])
        if result.get("traceback"):
            result["traceback"] = [self.local_text(t) for t in result["traceback"]]
        side = result.get("sidecar")
        if side:
            side["path"] = self.local_text(side["path"])
            for line in side["lines"]:
                line["path"] = self.local_text(line["path"])
        return result

    def attach_traces(self, result):
        """Put the gzip'd traces into a finished result (base64), then drop our copies."""
        try:
            if result.get("type") != "profile_finished" or self.own_trace_dir is None:
                return result
            paths = [result["trace_path"], result["sidecar"]["cold"]["trace_path"]]
            paths = [p for p in paths if p]
            size = sum(os.path.getsize(p) for p in paths)
            if size > MAX_RETURN_BYTES:
                return {
                    "type": "profile_failed",
                    "job_id": self.id,
                    "kind": "trace_too_large",
                    "message": "the traces are %.0f MB gzip'd, over the %d MB a job sends back; "
                    "profile fewer --active steps or use --no-stack"
                    % (size / 2**20, MAX_RETURN_BYTES >> 20),
                }
            traces = {}
            for p in paths:
                with open(p, "rb") as f:
                    traces[os.path.basename(p)] = base64.b64encode(f.read()).decode("ascii")
            result["traces"] = traces
            return result
        finally:
            if self.own_trace_dir is not None:
                shutil.rmtree(self.own_trace_dir, ignore_errors=True)

    # user code location ------------------------------------------------------------
    def is_user_file(self, filename):
        hit = self._user_cache.get(filename)
        if hit is None:
            hit = filename == self.path or (
                filename.startswith(self.user_dirs)
                and "site-packages" not in filename
                and "/.venv/" not in filename
                and not any(g in filename for g in GENERATED_CODE)
            )
            self._user_cache[filename] = hit
        return hit

    def user_frames(self, tb):
        frames = [f for f in traceback.extract_tb(tb) if self.is_user_file(f.filename)]
        lines = [
            "%s:%s in %s: %s" % (f.filename, f.lineno, f.name, (f.line or "").strip())
            for f in frames
        ]
        return frames, lines

    def progress(self, stage, step=0, total=0):
        now = time.perf_counter()
        name = "schedule" if stage in STAGES_PROFILED else stage
        if self._stage is not None:
            self.stages[self._stage] = self.stages.get(self._stage, 0.0) + now - self._stage_t
        self._stage, self._stage_t = (None if name == "done" else name), now
        if name == "done":
            return
        self.worker.channel.send(
            {
                "type": "job_progress",
                "job_id": self.id,
                "stage": stage,
                "step": step,
                "total": total,
            }
        )

    # import and resolve ------------------------------------------------------------
    def load_module(self):
        source = self.req.get("source")
        if source is None:
            try:
                with open(self.path, "rb") as f:
                    source = f.read()
            except FileNotFoundError:
                raise JobError(
                    "file_not_found", "no such file: %s" % self.path, self.path
                ) from None
            except OSError as e:
                raise JobError(
                    "file_not_found", "cannot read %s: %s" % (self.path, e.strerror), self.path
                ) from None
        try:
            code = compile(source, self.path, "exec", dont_inherit=True)
        except SyntaxError as e:
            raise JobError(
                "syntax_error",
                "SyntaxError: %s" % e.msg,
                self.path,
                e.lineno,
            ) from None
        name = self.req["module_name"]
        module = types.ModuleType(name)
        module.__file__ = self.path
        if "." in name:
            module.__package__ = name.rpartition(".")[0]
        sys.modules[name] = module
        try:
            exec(code, module.__dict__)
        except BaseException as e:
            raise self.user_error(
                "import_error", e, "while importing %s: " % os.path.basename(self.path)
            ) from None
        return module

    def resolve(self, module):
        obj: Any = module
        owner = None
        parts = self.req["qualname"].split(".")
        for i, part in enumerate(parts):
            if not hasattr(obj, part):
                where = ".".join(parts[:i]) or os.path.basename(self.path)
                raise JobError(
                    "unknown_qualname",
                    "%s has no %r%s" % (where, part, self._known_names(obj)),
                    self.path,
                    None,
                )
            owner = obj if inspect.isclass(obj) else None
            obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else getattr(obj, part)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = getattr(owner, parts[-1])
            owner = None
        if not callable(obj):
            raise JobError(
                "not_callable",
                "%s is a %s, not a function" % (self.req["qualname"], type(obj).__name__),
                self.path,
                None,
            )
        return obj, owner

    def _known_names(self, obj):
        names = sorted(
            n
            for n, v in vars(obj).items()
            if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v))
            and (getattr(v, "__module__", None) == self.req["module_name"] or inspect.isclass(obj))
        )
        return " (defined: %s)" % ", ".join(names[:20]) if names else ""

    def def_line(self, fn):
        code = getattr(inspect.unwrap(fn), "__code__", None)
        return code.co_firstlineno if code is not None else 0

    # inputs ---------------------------------------------------------------------------
    def find_inputs(self, module, fn, owner, device):
        provider = self._provider(module)
        if provider is not None:
            args, kwargs, takes_device = self._call_provider(provider, device)
            if takes_device:  # the provider placed its values itself: keep them as returned
                return args, kwargs
        else:
            args, kwargs = [], {}
            sig = inspect.signature(fn)
            params = list(sig.parameters.values())
            if owner is not None:
                args = [self._default_instance(owner, fn, params)]
                params = params[1:]
            required = [
                p
                for p in params
                if p.default is inspect.Parameter.empty
                and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            ]
            if required:
                raise self.missing_inputs(fn, params)
        return self.to_device(args, device), self.to_device(kwargs, device)

    def _provider(self, module):
        spec = self.req.get("provider")
        if not spec:
            return getattr(module, self.req["qualname"].replace(".", "_") + "_inputs", None)
        mod_name, _, attr = spec.partition(":")
        try:
            if mod_name == self.req["module_name"]:
                target = module
            else:
                import importlib

                target = importlib.import_module(mod_name)
            for part in attr.split("."):
                target = getattr(target, part)
        except BaseException as e:
            raise self.user_error(
                "missing_inputs", e, "input provider %s from pyproject.toml: " % spec
            ) from None
        return target

    def _call_provider(self, provider, device):
        name = getattr(provider, "__name__", "provider")
        try:
            params = inspect.signature(provider).parameters
        except (TypeError, ValueError):
            params = {}
        kw = {}
        if "batch_size" in params and self.req.get("batch_size") is not None:
            kw["batch_size"] = self.req["batch_size"]
        elif self.req.get("batch_size") is not None:
            raise JobError(
                "missing_inputs",
                "%s() takes no batch_size; add a `batch_size: int = 1` parameter to scale inputs"
                % name,
                self.path,
                self.def_line(provider),
            )
        if "device" in params:
            kw["device"] = device
        for key, env in (("rank", DIST_RANK), ("world_size", DIST_WORLD_SIZE)):
            if key in params and env in os.environ:
                kw[key] = int(os.environ[env])
        # A provider that does not place its values itself builds them on the job's device:
        # they would be moved there anyway, and a model built on the CPU and copied takes
        # much longer (ResNet-50: 0.73 s against 0.03 s on an H200). One that fails so (a CPU
        # generator, .numpy(), pin_memory) is called again as before, on the CPU.
        result = None
        if "device" not in params and device.type != "cpu":
            try:
                with device:
                    result = provider(**kw)
            except Cancelled:
                raise
            except Exception:
                result = None
        try:
            if result is None:
                result = provider(**kw)
        except BaseException as e:
            raise self.user_error("user_exception", e, "in input provider %s(): " % name) from None
        takes_device = "device" in params
        if isinstance(result, dict) and set(result) <= {"args", "kwargs"}:
            return list(result.get("args", ())), dict(result.get("kwargs", {})), takes_device
        if isinstance(result, (tuple, list)):
            return list(result), {}, takes_device
        raise JobError(
            "bad_inputs",
            "%s() returned %s; return a tuple of positional arguments or "
            '{"args": [...], "kwargs": {...}}' % (name, type(result).__name__),
            self.path,
            self.def_line(provider),
        )

    def _default_instance(self, owner, fn, params):
        try:
            sig = inspect.signature(owner)
            if all(
                p.default is not inspect.Parameter.empty
                or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                for p in sig.parameters.values()
            ):
                return owner()
        except BaseException as e:
            if isinstance(e, (TypeError, ValueError)):
                pass
            else:
                raise self.user_error(
                    "user_exception", e, "constructing %s(): " % owner.__name__
                ) from None
        raise self.missing_inputs(fn, params, owner=owner)

    def missing_inputs(self, fn, params, owner=None):
        """The error for a function with no inputs; the server adds a provider stub to it."""
        qual = self.req["qualname"]
        provider = qual.replace(".", "_") + "_inputs"
        names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        values = (["instance"] if owner is not None else []) + names
        return JobError(
            "missing_inputs",
            "%s(%s) needs inputs: define %s(batch_size=1, device=...) in %s returning a tuple of "
            'arguments (or {"args": [...], "kwargs": {...}}), or map it in pyproject.toml '
            "under [tool.kernelscope.inputs]"
            % (qual, ", ".join(values), provider, os.path.basename(self.path)),
            self.path,
            self.def_line(fn),
        )

    def to_device(self, value, device):
        torch = self.torch
        if isinstance(value, (torch.Tensor, torch.nn.Module)):
            return value.to(device)
        if isinstance(value, list):
            return [self.to_device(v, device) for v in value]
        if isinstance(value, tuple):
            return tuple(self.to_device(v, device) for v in value)
        if isinstance(value, dict):
            return {k: self.to_device(v, device) for k, v in value.items()}
        return value

    # errors -----------------------------------------------------------------------------
    def user_error(self, kind, exc, prefix=""):
        frames, lines = self.user_frames(exc.__traceback__)
        torch = self.torch
        oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
        hint = None
        if oom is not None and isinstance(exc, oom):
            kind = "cuda_oom"
            hint = "lower batch_size or the input sizes; the worker freed its cache"
        elif isinstance(exc, KeyboardInterrupt):
            kind = "keyboard_interrupt"
        elif isinstance(exc, SystemExit):
            kind = "exit"
        text = str(exc).strip().splitlines()[0][:400] if str(exc).strip() else ""
        message = prefix + type(exc).__name__ + (": " + text if text else "")
        where = frames[-1] if frames else None
        exc.__traceback__ = None
        return JobError(
            kind,
            message,
            where.filename if where else self.path,
            where.lineno if where else None,
            hint=hint,
            tb=lines[-20:],
        )

    # running ------------------------------------------------------------------------------
    def select_device(self):
        want = self.req.get("device") or "auto"
        local = os.environ.get(DIST_LOCAL_RANK)
        if local is not None and want in ("auto", "cuda") and self.torch.cuda.is_available():
            count = self.torch.cuda.device_count()
            if int(local) >= count:  # one GPU per rank, as torchrun
                raise JobError(
                    "bad_device",
                    "rank %s needs cuda:%s, but %s has %d CUDA device(s): profile on %d "
                    "ranks or fewer (nproc), or on the CPU (gloo)"
                    % (local, local, socket.gethostname(), count, count),
                )
            want = "cuda:%s" % local
        return select_device(self.torch, want)

    def init_ranks(self, device):
        """Join this job's process group when the launcher started the worker as one of N
        ranks (torchrun's variables): NCCL on a GPU, gloo on the CPU; collectives time out
        after KERNELSCOPE_DIST_TIMEOUT seconds, so a hang fails on its line."""
        if int(os.environ.get(DIST_WORLD_SIZE, "1")) <= 1:
            return
        import datetime

        dist = self.torch.distributed
        if device.type == "cuda":
            self.torch.cuda.set_device(device)
        if not dist.is_initialized():
            timeout = float(os.environ.get(DIST_TIMEOUT_ENV, "60"))
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                timeout=datetime.timedelta(seconds=timeout),
            )
        self.dist = dist
        self.dist_device = device if device.type == "cuda" else self.torch.device("cpu")

    def agree(self, value, op="max"):
        """The same number on every rank (the largest or smallest of theirs), so all ranks
        make as many calls of the function, and so as many collectives; the value itself
        in a job of one process."""
        dist = self.dist
        if dist is None:
            return value
        t = self.torch.tensor([float(value)], device=self.dist_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.MIN)
        return type(value)(t.item())

    def barrier(self):
        """Wait for every rank (the active window opens and closes in lockstep)."""
        if self.dist is not None:
            self.dist.barrier()

    def prepare(self):
        """Import the module, find the function and its inputs: (fn, call, device, sync)."""
        torch = self.torch
        self.progress("import")
        module = self.load_module()
        fn, owner = self.resolve(module)
        device = self.select_device()
        self.init_ranks(device)
        cuda = device.type == "cuda"
        sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
        self.progress("inputs")
        args, kwargs = self.find_inputs(module, fn, owner, device)
        self.loaded = (module, owner, args, kwargs)  # what run_try builds its variants from
        return fn, self._guarded(fn, args, kwargs), device, sync

    def run_timing(self):
        """Only the unprofiled timing, in a worker that never ran the profiler: a profiling
        session leaves host-bound code slower in its process. Warmed up like a script would
        be (up to 10 calls, stopping after the one that passes 50 ms): this worker may have
        just started."""
        _fn, call, device, sync = self.prepare()
        self.warm_up(call, sync)
        timing = self.unprofiled_timing(call, sync, device)
        self.progress("done")
        timing["process"] = "clean worker"
        return {"type": "timing_finished", "job_id": self.id, "timing": timing}

    def warm_up(self, call, sync):
        """Call up to WARMUP_CALLS times, stopping after the call that passes WARMUP_S."""
        self.progress("cold")
        t0 = time.perf_counter()
        for _ in range(WARMUP_CALLS):
            call()
            sync()
            if time.perf_counter() - t0 > WARMUP_S:
                break

    def run_try(self):
        """Time the function and variants of it (torch.compile, CUDA Graphs, TF32, ...) on the
        same inputs, in turns, unprofiled; compare each variant's results with the function's."""
        torch = self.torch
        fn, base, device, sync = self.prepare()
        module, owner, args, kwargs = self.loaded
        cuda = device.type == "cuda"
        self.progress("cold")
        self.warm_up(base, sync)
        reference = detach_outputs(torch, base())
        sync()
        again = detach_outputs(torch, base())
        sync()
        steady = compare_outputs(torch, reference, again)["equal"]
        candidates = [("baseline", base, 1)]
        variants = []
        names = list(self.req.get("variants") or [])
        for i, name in enumerate(names):
            self.progress("variants", i + 1, len(names))
            built = self.build_variant(name, module, fn, owner, args, kwargs, device, sync)
            if "call" not in built:
                variants.append(built)
                continue
            entry = built.pop("call"), built.pop("items")
            if built.get("outputs") is not None and built.pop("comparable", True):
                if steady:
                    built.update(compare_outputs(torch, reference, built.pop("outputs")))
                else:
                    built.pop("outputs")
                    built["results"] = (
                        "not compared: the function's results change from call to call"
                    )
            else:
                built.pop("outputs", None)
                built.setdefault("results", "not compared: other inputs")
            candidates.append((name, entry[0], entry[1]))
            variants.append(built)
        self.progress("timing")
        rounds = self.timed_rounds(candidates, sync, cuda, device)
        by_name = {v["name"]: v for v in variants}
        grew = self.recompiles
        for name, _call, items in candidates[1:]:
            v = by_name[name]
            v["rounds_us"] = rounds[name]
            v["items"] = items
            if grew.get(name):
                v["status"] = "failed"
                v["why"] = (
                    "torch.compile compiled it again %d times while it was timed: it "
                    "recompiles (guards fail) on calls like these" % grew[name]
                )
        self.progress("done")
        return {
            "type": "try_finished",
            "job_id": self.id,
            "device_type": device.type,
            "device_name": torch.cuda.get_device_name(device)
            if cuda
            else platform.processor() or "cpu",
            "method": "cuda_events" if cuda else "perf_counter",
            "baseline_rounds_us": rounds["baseline"],
            "variants": variants,
        }

    def build_variant(self, name, module, fn, owner, args, kwargs, device, sync):
        """One variant, built and called once (its one-time cost), or why it cannot run."""
        torch = self.torch
        cuda = device.type == "cuda"
        out = {"name": name, "status": "ok", "why": ""}
        if name in ("graphs", "tf32") and not cuda:
            out.update(
                status="skipped", why="needs a CUDA device (this job runs on %s)" % device.type
            )
            return out
        items = 1
        comparable = True
        try:
            if name == "compile":
                compiled = torch.compile(fn)
                call = self._guarded(compiled, args, kwargs)
            elif name == "graphs":
                compiled = torch.compile(fn, mode="reduce-overhead")
                call = self._guarded(compiled, args, kwargs)
            elif name == "tf32":
                if torch.backends.cuda.matmul.allow_tf32:
                    out.update(status="skipped", why="TF32 matmuls are already on")
                    return out
                call = self._with_tf32(self._guarded(fn, args, kwargs))
            elif name == "bf16":
                inner = self._guarded(fn, args, kwargs)

                def call():
                    with torch.autocast(device.type, dtype=torch.bfloat16):
                        return inner()
            elif name == "channels_last":
                cl_args, cl_kwargs, changed = channels_last(torch, args, kwargs)
                if not changed:
                    out.update(
                        status="skipped", why="no 4-d tensor or convolution among the inputs"
                    )
                    return out
                call = self._guarded(fn, cl_args, cl_kwargs)
            elif name == "batch2":
                base = int(self.req.get("batch_size") or 1)
                if self._provider(module) is None:
                    out.update(status="skipped", why="no input provider to pass batch_size to")
                    return out
                self.req["batch_size"] = base * 2
                try:
                    b_args, b_kwargs = self.find_inputs(module, fn, owner, device)
                finally:
                    self.req["batch_size"] = base
                call = self._guarded(fn, b_args, b_kwargs)
                items, comparable = 2, False
            else:
                out.update(status="failed", why="unknown variant %r" % name)
                return out
            compiled_before = compile_seconds()
            t0 = time.perf_counter()
            first = call()
            sync()
            one_time = time.perf_counter() - t0
            for _ in range(2):  # graphs record on the first calls after compiling
                call()
            sync()
            outputs = detach_outputs(torch, call())
            sync()
        except Cancelled:
            raise
        except JobError as e:
            out.update(status="failed", why=e.message, path=e.path, line=e.line)
            return out
        except Exception as e:  # a variant that breaks is reported; the others still run
            err = self.user_error("variant", e)
            out.update(status="failed", why=err.message, path=err.path, line=err.line)
            return out
        del first
        compile_s = compile_seconds() - compiled_before
        out.update(
            call=call,
            items=items,
            outputs=outputs,
            comparable=comparable,
            one_time_s=compile_s if compile_s > 0 else one_time,
            one_time_what="compile" if compile_s > 0 else "first call",
        )
        return out

    def _with_tf32(self, inner):
        torch = self.torch

        def call():
            matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
            try:
                return inner()
            finally:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = (
                    matmul,
                    cudnn,
                )

        return call

    def timed_rounds(self, candidates, sync, cuda, device):
        """Each candidate's time per call in rounds, in turns (A B C, then C B A, ...), so
        drift (clocks, caches, other jobs) falls on all of them alike: {name: [us, ...]}."""
        torch = self.torch
        budget = float(self.req.get("budget_s") or TRY_BUDGET_S)
        min_rounds = int(self.req.get("rounds") or TRY_MIN_ROUNDS)
        probe = {}
        for name, call, _ in candidates:
            sync()
            t = time.perf_counter()
            call()
            sync()
            probe[name] = max((time.perf_counter() - t) * 1e6, 1.0)
        per_round = sum(probe.values())
        calls = {n: int(max(1, min(50, TRY_BLOCK_US / probe[n]))) for n in probe}
        rounds = int(
            max(
                min_rounds,
                min(TRY_MAX_ROUNDS, budget * 1e6 / max(per_round * max(calls.values()), 1.0)),
            )
        )
        out = {name: [] for name, _, _ in candidates}
        self.recompiles = {}  # name -> compiles seen during its timed blocks
        for r in range(rounds):
            order = candidates if r % 2 == 0 else candidates[::-1]
            for name, call, _ in order:
                n = calls[name]
                frames = dynamo_frames()
                sync()
                if cuda:
                    start, end = (
                        torch.cuda.Event(enable_timing=True),
                        torch.cuda.Event(enable_timing=True),
                    )
                    start.record()
                    for _ in range(n):
                        call()
                    end.record()
                    end.synchronize()
                    out[name].append(start.elapsed_time(end) * 1e3 / n)
                else:
                    t = time.perf_counter()
                    for _ in range(n):
                        call()
                    out[name].append((time.perf_counter() - t) * 1e6 / n)
                if dynamo_frames() > frames:
                    self.recompiles[name] = self.recompiles.get(name, 0) + dynamo_frames() - frames
            self.progress("timing", r + 1, rounds)
        return out

    def run(self):
        """Profile the function, phase by phase, to a profile_finished result."""
        fn, call, device, sync = self.prepare()
        activities = profiler_activities(device)
        stem = self.trace_stem()
        cold = self.cold_call(call, sync, activities, stem, device)
        timing = self.unprofiled_timing(call, sync, device)
        steps = self.schedule_steps()
        trace_tmp, marks = self.warmed_schedule(call, sync, activities, stem, device, steps)
        memory = self.peak_memory(device)
        trace_path, wall_us = self.export_schedule(trace_tmp, marks, steps)
        lines = self.line_pass(call, sync, activities, stem, steps, timing)
        self.progress("done")
        return self.finished(fn, device, steps, cold, timing, trace_path, wall_us, lines, memory)

    def trace_stem(self):
        """Create the trace folder; return the stem of this job's trace file names."""
        os.makedirs(self.trace_dir, exist_ok=True)
        return "%s-%s" % (self.req["qualname"].replace(".", "_"), self.id)

    def cold_call(self, call, sync, activities, stem, device):
        """The first call under a light profiler, so its trace shows entry -> first kernel."""
        from torch.profiler import profile, record_function

        self.progress("cold")
        cold_tmp = os.path.join(self.trace_dir, stem + ".cold.json")
        compiled_before = compile_seconds()
        with profile(activities=activities) as cold_prof:
            t0 = time.perf_counter()
            with record_function(COLD_RANGE):
                call()
            sync()
            first_call_us = (time.perf_counter() - t0) * 1e6
        compile_s = compile_seconds() - compiled_before
        cold_prof.export_chrome_trace(cold_tmp)
        entry_to_kernel = (
            first_kernel_after(load_json(cold_tmp), COLD_RANGE) if device.type == "cuda" else None
        )
        cold_path = gzip_file(cold_tmp)
        return {
            "first_call_us": first_call_us,
            "entry_to_first_kernel_us": entry_to_kernel,
            "process_fresh": self.worker.jobs_run == 0,
            "trace_path": cold_path,
            "compile_us": compile_s * 1e6 if compile_s > 0 else None,
        }

    def unprofiled_timing(self, call, sync, device):
        """The call timed without the profiler (before the schedule, which slows host code)."""
        self.progress("timing")
        return self.time_unprofiled(call, sync, device.type == "cuda", device)

    def schedule_steps(self):
        """The requested (wait, warmup, active) steps of the warmed schedule."""
        req = self.req
        return int(req["wait"]), int(req["warmup"]), int(req["active"])

    def warmed_schedule(self, call, sync, activities, stem, device, steps):
        """Profile wait + warmup + active calls; return the trace file and the active window."""
        from torch.profiler import profile, record_function, schedule

        torch = self.torch
        req = self.req
        cuda = device.type == "cuda"
        wait, warmup, active = steps
        total = wait + warmup + active
        trace_tmp = os.path.join(self.trace_dir, stem + ".pt.trace.json")
        marks = {}
        with profile(
            activities=activities,
            schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(trace_tmp),
            record_shapes=bool(req.get("record_shapes", True)),
            with_stack=bool(req.get("with_stack", True)),
            with_flops=bool(req.get("record_shapes", True)),
        ) as prof:

            def open_active_window():
                # Drain the warmup steps' GPU work before the window opens: with the CPU
                # running ahead, their kernels would otherwise land in the active steps.
                sync()
                self.barrier()
                if cuda:
                    torch.cuda.reset_peak_memory_stats(device)
                marks["active0"] = time.perf_counter()

            if wait + warmup == 0:
                open_active_window()
            for i in range(total):
                stage = STAGES_PROFILED[0 if i < wait else 1 if i < wait + warmup else 2]
                self.progress(stage, i + 1, total)
                with record_function(CALL_RANGE):
                    call()
                if i == wait + warmup - 1:
                    open_active_window()
                if i == total - 1:
                    sync()  # the last steps' kernels must finish before the profiler collects
                    marks["active1"] = time.perf_counter()
                    self.barrier()
                prof.step()
        return trace_tmp, marks

    def peak_memory(self, device):
        """The GPU memory peaks of the active steps (None on the CPU)."""
        if device.type != "cuda":
            return None
        torch = self.torch
        return {
            "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
        }

    def export_schedule(self, trace_tmp, marks, steps):
        """Gzip the schedule's trace; return its path and the wall time per active step."""
        self.progress("export")
        trace_path = gzip_file(trace_tmp)
        active = steps[2]
        return trace_path, (marks["active1"] - marks["active0"]) * 1e6 / max(active, 1)

    def line_pass(self, call, sync, activities, stem, steps, timing):
        """Per-line attribution in a pass of its own, so the timed steps stay clean."""
        if not self.req.get("line_pass", True):
            return []
        self.progress("lines")
        calls = self.agree(line_pass_calls(steps[2], timing), "min")
        return self.attribute_lines(call, sync, activities, self.trace_dir, stem, calls)

    def finished(self, fn, device, steps, cold, timing, trace_path, wall_us, lines, memory):
        """The profile_finished message: the trace's path and the sidecar of what was measured."""
        torch = self.torch
        cuda = device.type == "cuda"
        wait, warmup, active = steps
        props = device_properties(torch, device)
        return {
            "type": "profile_finished",
            "job_id": self.id,
            "trace_path": trace_path,
            "sidecar": {
                "function_line": self.def_line(fn),
                "device_type": device.type,
                "device_name": props.get("name", "cpu"),
                "device_index": device.index if cuda else None,
                "device_properties": props,
                "wait": wait,
                "warmup": warmup,
                "active": active,
                "cold": cold,
                "stages_s": self.stages,
                "timing": timing,
                "wall_us_per_step": wall_us,
                "lines": lines,
                "memory": memory,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "python": platform.python_version(),
                "hostname": socket.gethostname(),
                "path": self.path,
                "qualname": self.req["qualname"],
            },
        }

    def _guarded(self, fn, args, kwargs):
        """The call, with user exceptions turned into JobErrors naming the user's line."""

        def call():
            try:
                return fn(*args, **kwargs)
            except Cancelled:
                raise
            except BaseException as e:
                if self.worker.cancel_requested.is_set():
                    raise Cancelled() from None
                raise self.user_error("user_exception", e) from None

        return call

    def time_unprofiled(self, call, sync, cuda, device):
        """Median of up to 100 calls within ~0.1 s (CUDA events on a GPU), their spread,
        and NVML's view of the GPU meanwhile."""
        sync()
        t = time.perf_counter()
        call()
        sync()
        probe_us = (time.perf_counter() - t) * 1e6
        reps = int(self.req.get("timing_reps") or 0)
        if reps <= 0:
            # ~0.1 s of calls: long sustained runs drift as the GPU's clocks settle lower
            reps = int(min(100, max(5, 0.1e6 / max(probe_us, 1.0))))
            reps = self.agree(reps)
        samples = []
        sampler = GpuSampler(self.torch, device) if cuda else None
        if sampler is not None:
            sampler.start()
        sync()
        t0 = time.perf_counter()
        if cuda:
            torch = self.torch
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(reps)
            ]
            for start, end in events:
                start.record()
                call()
                end.record()
            host_us = (time.perf_counter() - t0) * 1e6 / reps
            sync()
            samples = [s.elapsed_time(e) * 1e3 for s, e in events]
            method = "cuda_events"
        else:
            for _ in range(reps):
                t = time.perf_counter()
                call()
                samples.append((time.perf_counter() - t) * 1e6)
            host_us = (time.perf_counter() - t0) * 1e6 / reps
            method = "perf_counter"
        gpu = sampler.stop() if sampler is not None else None
        deciles = statistics.quantiles(samples, n=10) if len(samples) >= 2 else samples * 9
        return {
            "us_per_call": statistics.median(samples),
            "method": method,
            "reps": reps,
            "samples_us": samples[:200],
            "host_us_per_call": host_us,
            "p10_us": deciles[0],
            "p90_us": deciles[-1],
            "gpu": gpu,
            "process": "profiling worker",
        }

    def attribute_lines(self, call, sync, activities, trace_dir, stem, calls):
        from torch.autograd.profiler import record_function
        from torch.profiler import ProfilerActivity, profile

        cuda = ProfilerActivity.CUDA in activities
        keys = []
        key_index = {}
        open_ranges = {}

        def enter(frame):
            key = (frame.f_code.co_filename, frame.f_lineno)
            idx = key_index.get(key)
            if idx is None:
                idx = key_index[key] = len(keys)
                keys.append(key)
            rf = record_function("ks:line:%d" % idx)
            rf.__enter__()
            open_ranges[frame] = rf

        def local(frame, event, arg):
            if event == "line":
                rf = open_ranges.pop(frame, None)
                if rf is not None:
                    rf.__exit__(None, None, None)
                enter(frame)
            elif event == "return":
                rf = open_ranges.pop(frame, None)
                if rf is not None:
                    rf.__exit__(None, None, None)
            return local

        def tracer(frame, event, arg):
            if event == "call" and self.is_user_file(frame.f_code.co_filename):
                return local
            return None

        tmp = os.path.join(trace_dir, stem + ".lines.json")
        with profile(activities=activities) as prof:
            sync()
            sys.settrace(tracer)
            try:
                for _ in range(calls):
                    call()
            finally:
                sys.settrace(None)
                for rf in open_ranges.values():
                    rf.__exit__(None, None, None)
                open_ranges.clear()
            sync()
        prof.export_chrome_trace(tmp)
        try:
            return line_stats(load_json(tmp), keys, calls, cuda)
        finally:
            os.unlink(tmp)


def profiler_activities(device):
    """The profiler's activities for a job on `device`: the CPU, and CUDA on a GPU."""
    from torch.profiler import ProfilerActivity

    cuda = [ProfilerActivity.CUDA] if device.type == "cuda" else []
    return [ProfilerActivity.CPU, *cuda]


# --- experiments (RunTry) ----------------------------------------------------------------

TRY_BUDGET_S = 2.0  # of timed calls, all candidates together
TRY_MIN_ROUNDS = 7
TRY_MAX_ROUNDS = 40
TRY_BLOCK_US = 5000.0  # each timed block: this long, in up to 50 calls
#: Tolerances by the reference's dtype (rtol, atol): torch.testing's defaults for half types,
#: looser than its 1.3e-6 for float32 because a fused or reordered reduction (torch.compile)
#: legitimately differs there in the last digits.
TOLERANCES = {
    "torch.float64": (1e-7, 1e-7),
    "torch.float32": (1e-4, 1e-5),
    "torch.float16": (1e-3, 1e-5),
    "torch.bfloat16": (1.6e-2, 1e-5),
}


def detach_outputs(torch, value):
    """The tensors in a result (nested tuples, lists, dicts, dataclass-like objects), detached
    copies in call order, so later calls cannot change them."""
    found = []

    def walk(v, depth=0):
        if depth > 6:
            return
        if isinstance(v, torch.Tensor):
            found.append(v.detach().clone())
        elif isinstance(v, dict):
            for x in v.values():
                walk(x, depth + 1)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, depth + 1)
        elif hasattr(v, "__dict__") and not isinstance(v, type) and not callable(v):
            for x in vars(v).values():
                walk(x, depth + 1)

    walk(value)
    return found


def compare_outputs(torch, reference, outputs):
    """Whether `outputs` equal `reference` within the tolerances of each tensor's dtype, and
    the largest absolute and relative errors."""
    if len(reference) != len(outputs):
        return {
            "results": "changed",
            "equal": False,
            "why_changed": "%d tensors, not %d" % (len(outputs), len(reference)),
        }
    max_abs = max_rel = 0.0
    equal = True
    tolerance = ""
    for ref, out in zip(reference, outputs):
        if ref.shape != out.shape:
            return {
                "results": "changed",
                "equal": False,
                "why_changed": "shape %s, not %s" % (tuple(out.shape), tuple(ref.shape)),
            }
        if not (ref.is_floating_point() or ref.is_complex()):
            same = bool(torch.equal(ref.to(out.device), out.to(ref.dtype)))
            equal = equal and same
            continue
        rtol, atol = TOLERANCES.get(str(ref.dtype), (1e-4, 1e-5))
        tolerance = tolerance or "rtol %g, atol %g (%s)" % (
            rtol,
            atol,
            str(ref.dtype).replace("torch.", ""),
        )
        r = ref.float()
        o = out.to(ref.device).float()
        diff = (o - r).abs()
        if diff.numel():
            # Against the tensor's scale, not element by element: a reordered bf16 sum moves
            # values near zero by more than rtol of themselves, and that is not a change.
            worst = float(diff.nan_to_num(float("inf")).max())
            scale = float(r.abs().max())
            max_abs = max(max_abs, worst)
            max_rel = max(max_rel, worst / max(scale, atol))
            equal = equal and worst <= atol + rtol * scale
    return {
        "results": "equal" if equal else "changed",
        "equal": equal,
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "tolerance": tolerance,
    }


def channels_last(torch, args, kwargs):
    """Copies of the inputs with 4-d tensors and modules with 4-d weights in channels_last
    (the originals untouched, so the baseline keeps its layout); whether any changed."""
    import copy

    changed = [False]

    def conv(v):
        if isinstance(v, torch.Tensor) and v.dim() == 4:
            changed[0] = True
            return v.contiguous(memory_format=torch.channels_last)
        if isinstance(v, torch.nn.Module) and any(p.dim() == 4 for p in v.parameters()):
            changed[0] = True
            return copy.deepcopy(v).to(memory_format=torch.channels_last)
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x) for x in v)
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    new_args = [conv(a) for a in args]
    new_kwargs = {k: conv(v) for k, v in kwargs.items()}
    return new_args, new_kwargs, changed[0]


def dynamo_frames():
    """Frames torch.compile has compiled in this process so far (0 before dynamo loads)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return int(counters["stats"]["unique_graphs"]) if counters else 0
    except (KeyError, TypeError, ValueError):  # a torch without the counter: no detection
        return 0


def compile_seconds():
    """Seconds torch.compile has spent compiling in this process (0 when dynamo is not
    loaded): the outermost compile frames of dynamo's own timing table."""
    utils = sys.modules.get("torch._dynamo.utils")
    metrics = getattr(utils, "compilation_time_metrics", None)
    if not isinstance(metrics, dict) or not metrics:
        return 0.0
    totals = {k: float(sum(v)) for k, v in metrics.items() if isinstance(v, list)}
    outer = [v for k, v in totals.items() if k.endswith("compile_inner")]
    return sum(outer) if outer else max(totals.values(), default=0.0)


class GpuSampler:
    """NVML readings of one GPU every 20 ms while a block runs: SM and memory clocks, power,
    utilization, clock-limit reasons. Nothing when nvidia-ml-py is not installed."""

    PERIOD_S = 0.02

    def __init__(self, torch, device):
        self.nvml: Any = None
        self.handle = None
        self.rows = []
        self.reasons = 0
        self.stopping = threading.Event()
        self.thread = None
        try:
            import pynvml  # pyright: ignore[reportMissingImports]  (nvidia-ml-py, optional)

            pynvml.nvmlInit()
            handle = None
            uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
            if uuid is not None:
                with contextlib.suppress(Exception):
                    handle = pynvml.nvmlDeviceGetHandleByUUID("GPU-%s" % uuid)
            if handle is None:
                handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            self.max_sm = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
            self.max_mem = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
            self.nvml, self.handle = pynvml, handle
        except Exception:
            self.nvml = None

    def _read(self):
        n, h = self.nvml, self.handle
        util = n.nvmlDeviceGetUtilizationRates(h)
        row = (
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            util.gpu,
            util.memory,
        )
        self.rows.append(row)
        reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        if reasons is not None:
            with contextlib.suppress(Exception):
                self.reasons |= int(reasons(h))

    def _loop(self):
        while True:
            with contextlib.suppress(Exception):
                self._read()
            if self.stopping.wait(self.PERIOD_S):
                return

    def start(self):
        if self.nvml is not None:
            self.thread = threading.Thread(target=self._loop, name="ks-nvml", daemon=True)
            self.thread.start()

    def stop(self):
        """Medians of the readings, or None without NVML."""
        if self.thread is None:
            return None
        self.stopping.set()
        self.thread.join()
        with contextlib.suppress(Exception):
            self._read()  # utilization is NVML's average over its last period: the window
        if not self.rows:
            return None
        cols = list(zip(*self.rows))
        return {
            "samples": len(self.rows),
            "sm_clock_mhz": statistics.median(cols[0]),
            "sm_clock_max_mhz": self.max_sm,
            "mem_clock_mhz": statistics.median(cols[1]),
            "mem_clock_max_mhz": self.max_mem,
            "power_w": statistics.median(cols[2]),
            "utilization_pct": statistics.median(cols[3]),
            "memory_utilization_pct": statistics.median(cols[4]),
            "clock_event_reasons": self.reasons,
        }


def select_device(torch, want):
    """The torch.device for auto | cpu | cuda | cuda:N, or a JobError saying why not."""
    has_cuda = torch.cuda.is_available()
    if want == "auto":
        want = "cuda" if has_cuda else "cpu"
    if want == "cpu":
        return torch.device("cpu")
    if not want.startswith("cuda"):
        raise JobError("bad_device", "unknown device %r; use auto, cpu, cuda or cuda:N" % want)
    if not has_cuda:
        raise JobError(
            "no_cuda",
            "no CUDA device on %s (torch %s)" % (socket.gethostname(), torch.__version__),
        )
    try:
        dev = torch.device(want)
    except RuntimeError:
        raise JobError("bad_device", "unknown device %r; use cuda or cuda:N" % want) from None
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise JobError(
            "bad_device",
            "cuda:%d requested but %s has %d CUDA device(s)" % (index, socket.gethostname(), count),
        )
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def calibrate(torch, req):
    """Measured ceilings: n×n matmuls per dtype and a large device-to-device copy."""
    device = select_device(torch, req.get("device") or "cuda")
    if device.type != "cuda":
        raise JobError("no_cuda", "calibrate measures GPU ceilings; this job's device is the CPU")
    n, reps = int(req.get("size", 8192)), int(req.get("reps", 20))

    def timed(fn):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / reps

    rates = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for key, dtype, tf32 in (
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
            ("tf32", torch.float32, True),
            ("fp32", torch.float32, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            rates[key] = 2.0 * n**3 / timed(lambda a=a, b=b: torch.mm(a, b)) / 1e12
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    size = int(req.get("copy_bytes", 2**30))
    src = torch.empty(size, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    copy_s = timed(lambda dst=dst, src=src: dst.copy_(src))
    del src, dst
    torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(device)
    return {
        "type": "calibration_finished",
        "job_id": req["job_id"],
        "device_name": props.name,
        "total_memory": int(props.total_memory),
        "bf16_tflops": rates["bf16"],
        "fp16_tflops": rates["fp16"],
        "tf32_tflops": rates["tf32"],
        "fp32_tflops": rates["fp32"],
        "copy_gbps": 2.0 * size / copy_s / 1e9,
        "method": "CUDA events over %d reps after 3 warm-ups: %dx%d matmuls (random data), "
        "a %d MiB device-to-device copy counting bytes read + written" % (reps, n, n, size >> 20),
    }


# --- shipped projects ----------------------------------------------------------------------


def private_dir():
    """This user's kernelscope folder in the host's temp dir (0700, refused if not ours)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = os.path.join(tempfile.gettempdir(), "kernelscope-%d" % uid)
    os.makedirs(path, mode=0o700, exist_ok=True)
    if hasattr(os, "getuid") and os.stat(path).st_uid != uid:
        raise JobError("internal", "%s belongs to another user; set TMPDIR on this host" % path)
    return path


def materialize(files):
    """Write shipped files (relative path -> text) into a content-addressed folder; return it.

    The same files give the same folder, so a warm worker writes them once; the newest
    SHIP_KEEP folders are kept."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode("utf-8") + b"\0" + files[rel].encode("utf-8") + b"\0")
    base = os.path.join(private_dir(), "ship")
    final = os.path.join(base, digest.hexdigest()[:24])
    if not os.path.isdir(final):
        tmp = "%s.tmp-%d" % (final, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, text in files.items():
            parts = rel.split("/")
            if not rel or rel.startswith("/") or ".." in parts:
                raise JobError("internal", "refusing to write shipped file %r" % rel)
            dest = os.path.join(tmp, *parts)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w", encoding="utf-8", newline="") as f:
                f.write(text)
        try:
            os.rename(tmp, final)
        except OSError:  # another worker wrote the same files first
            shutil.rmtree(tmp, ignore_errors=True)
    os.utime(final)
    prune(base, SHIP_KEEP)
    return final


def prune(base, keep):
    """Remove all but the `keep` most recently used folders in `base`."""
    try:
        entries = [os.path.join(base, n) for n in os.listdir(base) if ".tmp-" not in n]
        entries.sort(key=os.path.getmtime, reverse=True)
    except OSError:
        return
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


# --- trace reading for the worker's own passes -----------------------------------------


def load_json(path):
    with open(path, "rb") as f:
        return json.load(f).get("traceEvents", [])


#: Jobs between full garbage collections (the others walk only what is not frozen).
THAW_EVERY = 20

#: Warm-up before a clean worker's timing: this many calls, or until this many seconds.
WARMUP_CALLS = 10
WARMUP_S = 0.05

#: A call this long (µs) gets one call of the line pass: that one call has every line.
LONG_CALL_US = 5000.0


def line_pass_calls(active, timing):
    """Calls in the line pass: up to 3 of the active steps, 1 when a call is long."""
    if (timing.get("us_per_call") or 0.0) >= LONG_CALL_US:
        return 1
    return max(1, min(active, 3))


def gzip_file(path):
    out = path + ".gz"
    with open(path, "rb") as src, gzip.GzipFile(out, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.unlink(path)
    return out


def first_kernel_after(events, name):
    """Microseconds from the start of annotation `name` to the first GPU activity after it."""
    region = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") == name]
    if not region:
        return None
    start = region[0]["ts"]
    gpu = [e["ts"] for e in events if e.get("cat") in GPU_CATS and e["ts"] >= start]
    return (min(gpu) - start) if gpu else None


class LineTally:
    """Per-line sums over the line pass; ranges are closed innermost first."""

    def __init__(self, n):
        self.self_cpu = [0.0] * n
        self.total_cpu = [0.0] * n
        self.cuda_self = [0.0] * n
        self.cuda_total = [0.0] * n
        self.hits = [0] * n
        self.syncs = [0] * n
        self.sync_wait = [0.0] * n
        self.op_time = [{} for _ in range(n)]

    def close(self, node, stack):
        """Book one finished range; recursion into the same line counts its total once."""
        idx, _end, child, csf, csub, dur = node
        self.self_cpu[idx] += dur - child
        self.cuda_self[idx] += csf
        if not any(s[0] == idx for s in stack):
            self.total_cpu[idx] += dur
            self.cuda_total[idx] += csf + csub
        if stack:
            stack[-1][4] += csf + csub


def line_stats(events, keys, calls, cuda):
    """Per-line self/total CPU and CUDA time from the line pass's annotations.

    Work on a thread with no line ranges (autograd's engine runs ``backward()`` there, and
    torch.compile and user threads launch from others) belongs to the line that was
    running on the traced thread at the time: ``loss.backward()`` gets the backward."""
    gpu_by_corr = {}
    for e in events:
        if e.get("cat") in GPU_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                gpu_by_corr[corr] = gpu_by_corr.get(corr, 0.0) + float(e.get("dur", 0.0))
    per_tid = {}
    line_tids = set()
    for e in events:
        cat = e.get("cat")
        name = e.get("name", "")
        if cat == "user_annotation" and name.startswith("ks:line:"):
            per_tid.setdefault(e.get("tid"), []).append((e["ts"], 0, -e["dur"], int(name[8:]), e))
            line_tids.add(e.get("tid"))
        elif cat in ("cuda_runtime", "cuda_driver", "cpu_op"):
            per_tid.setdefault(e.get("tid"), []).append((e["ts"], 1, 0.0, -1, e))
    tally = LineTally(len(keys))
    extra_cuda = attribute_other_threads(tally, per_tid, line_tids, gpu_by_corr, cuda)
    for tid in line_tids:
        items = per_tid[tid]
        items.sort(key=lambda t: (t[0], t[1], t[2]))
        stack = []  # open ranges: [line index, end, child time, own CUDA, callees' CUDA, dur]
        for ts, kind, neg_dur, idx, e in items:
            while stack and ts >= stack[-1][1]:
                tally.close(stack.pop(), stack)
            if kind == 0:
                dur = -neg_dur
                if stack:
                    stack[-1][2] += dur
                tally.hits[idx] += 1
                stack.append([idx, ts + dur, 0.0, extra_cuda.get(id(e), 0.0), 0.0, dur])
            elif stack:
                attribute_event(tally, stack[-1], e, gpu_by_corr, cuda)
        while stack:
            tally.close(stack.pop(), stack)
    out = []
    for idx, (path, line) in enumerate(keys):
        if not tally.hits[idx]:
            continue
        ops = sorted(tally.op_time[idx].items(), key=lambda kv: -kv[1])[:3]
        out.append(
            {
                "path": path,
                "line": line,
                "self_cpu_us": tally.self_cpu[idx] / calls,
                "cpu_total_us": tally.total_cpu[idx] / calls,
                "cuda_us": tally.cuda_self[idx] / calls,
                "cuda_total_us": tally.cuda_total[idx] / calls,
                "hits": tally.hits[idx] / calls,
                "syncs": round(tally.syncs[idx] / float(calls)),
                "sync_wait_us": tally.sync_wait[idx] / calls,
                "top_ops": [name for name, _ in ops],
            }
        )
    return out


def attribute_other_threads(tally, per_tid, line_tids, gpu_by_corr, cuda):
    """Charge the ops and launches of threads without line ranges to the innermost line
    range open at their start on a traced thread; returns the CUDA time each range (by the
    id of its event) gets that way."""
    ranges = sorted(
        (item for tid in line_tids for item in per_tid[tid] if item[1] == 0),
        key=lambda t: (t[0], t[2]),
    )
    others = sorted(
        (item for tid, items in per_tid.items() if tid not in line_tids for item in items),
        key=lambda t: t[0],
    )
    extra = {}
    stack = []  # open ranges: (end, line index, event)
    k = 0
    for ts, _kind, _neg, _idx, e in others:
        while k < len(ranges) and ranges[k][0] <= ts:
            r = ranges[k]
            while stack and stack[-1][0] < r[0]:
                stack.pop()
            stack.append((r[0] - r[2], r[3], r[4]))
            k += 1
        while stack and stack[-1][0] < ts:
            stack.pop()
        if not stack:
            continue
        _end, idx, owner = stack[-1]
        node = [idx, 0.0, 0.0, 0.0, 0.0, 0.0]
        attribute_event(tally, node, e, gpu_by_corr, cuda)
        if node[3]:
            extra[id(owner)] = extra.get(id(owner), 0.0) + node[3]
    return extra


def attribute_event(tally, top, e, gpu_by_corr, cuda):
    """Charge an op or a runtime call to the innermost open line range."""
    idx = top[0]
    name = e.get("name", "")
    if e.get("cat") == "cpu_op":
        tally.op_time[idx][name] = tally.op_time[idx].get(name, 0.0) + float(e.get("dur", 0.0))
        if name in SYNC_OPS and not cuda:
            tally.syncs[idx] += 1  # on a GPU the runtime's synchronize calls count instead
        return
    top[3] += gpu_by_corr.get((e.get("args") or {}).get("correlation"), 0.0)
    if any(key in name for key in SYNC_CALLS) and "Async" not in name:
        tally.syncs[idx] += 1
        tally.sync_wait[idx] += float(e.get("dur", 0.0))


def device_properties(torch, device):
    if device.type != "cuda":
        return {
            "name": platform.processor() or platform.machine() or "cpu",
            "threads": torch.get_num_threads(),
        }
    p = torch.cuda.get_device_properties(device)
    props = {
        "name": p.name,
        "capability": "%d.%d" % (p.major, p.minor),
        "total_memory": int(p.total_memory),
        "multi_processor_count": int(p.multi_processor_count),
    }
    for attr in ("L2_cache_size", "clock_rate", "memory_clock_rate", "memory_bus_width", "uuid"):
        value = getattr(p, attr, None)
        if value is not None:
            props[attr] = value if isinstance(value, (int, float)) else str(value)
    return props


# --- the worker process -------------------------------------------------------------------


class Worker:
    """Owns the channel, the captured output and the job loop."""

    def __init__(self):
        proto_in, proto_out = os.dup(0), os.dup(1)
        self.real_err = os.fdopen(os.dup(2), "w", buffering=1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)
        self.channel = Channel(proto_in, proto_out)
        self.capture = OutputCapture(read_end)
        self.requests: queue.Queue[Any] = queue.Queue()
        self.cancel_requested = threading.Event()
        self.current_job = None
        self.jobs_run = 0
        faulthandler.enable(file=self.real_err, all_threads=False)
        if hasattr(signal, "SIGUSR1"):
            faulthandler.register(signal.SIGUSR1, file=self.real_err, all_threads=False)
        self._real_exit = os._exit
        os._exit = self._exit_hook
        self.torch: Any = None

    def log(self, text):
        self.real_err.write("kernelscope-worker: %s\n" % text)

    def _exit_hook(self, code=0):
        job = self.current_job
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
            self._warm_profiler()
        self.settle()
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
            }
        )
        threading.Thread(target=self._read_requests, name="ks-requests", daemon=True).start()

    def _warm_profiler(self):
        """The first profile() in a process costs ~1.4 s; pay it before the first job."""
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
            if kind in ("run_profile", "run_timing", "run_try"):
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
        result: dict = {}
        try:
            job.place()
            for d in (job.root, os.path.dirname(job.path)):
                if d not in sys.path:
                    sys.path.insert(0, d)
            if job.root != job.local_root:  # a remote job runs in its project's folder
                with contextlib.suppress(OSError):
                    saved_cwd = os.getcwd()
                os.chdir(job.root)
            if req["type"] == "run_timing":
                result = job.run_timing()
            elif req["type"] == "run_try":
                result = job.run_try()
            else:
                result = job.run()
        except JobError as e:
            result = {
                "type": "profile_failed",
                "job_id": job.id,
                "kind": e.kind,
                "message": e.message,
                "path": e.path,
                "line": e.line,
                "traceback": e.tb,
                "hint": e.hint,
            }
        except (Cancelled, KeyboardInterrupt) as e:
            if self.cancel_requested.is_set():
                result = {
                    "type": "profile_failed",
                    "job_id": job.id,
                    "kind": "cancelled",
                    "message": "cancelled",
                }
            else:
                err = job.user_error("keyboard_interrupt", e)
                result = {
                    "type": "profile_failed",
                    "job_id": job.id,
                    "kind": err.kind,
                    "message": err.message,
                    "path": err.path,
                    "line": err.line,
                    "traceback": err.tb,
                }
        except BaseException as e:
            result = {
                "type": "profile_failed",
                "job_id": job.id,
                "kind": "internal",
                "message": "kernelscope worker error: %s: %s" % (type(e).__name__, e),
                "traceback": traceback.format_exc().splitlines()[-12:],
            }
        finally:
            dist = job.dist
            if dist is not None and dist.is_initialized():
                with contextlib.suppress(Exception):
                    dist.destroy_process_group()
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
        # Before the result goes: the launcher may time the call next in its clean worker,
        # and this process freeing GPU memory meanwhile would slow that one's launches.
        self.settle()
        output, truncated = self.capture.collect()
        result = job.attach_traces(job.localize(result))
        result["output"] = output
        if result["type"] == "profile_finished":
            result["output_truncated"] = truncated
            result.setdefault("traces", {})
        self.cancel_requested.clear()
        self.channel.send(result)

    def settle(self):
        """Free what the job left in reference cycles (its GPU memory too), then freeze what
        survives: later collections walk only newer objects. With torch loaded, a collection
        of everything takes 0.1-0.2 s; of what one job made, milliseconds. Every
        THAW_EVERY jobs all is collected, so what froze and died since is freed too."""
        if self.jobs_run % THAW_EVERY == 0:
            gc.unfreeze()
        gc.collect()
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


if __name__ == "kernelscope_worker":  # the bootstrap's name; tests exec it under another
    main()
