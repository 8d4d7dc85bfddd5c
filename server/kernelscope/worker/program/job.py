# pyright: basic
"""One request's job: where the project is on this host, the user's files and lines, the
progress it reports, and the call it prepares (module, function, device, inputs)."""

import base64
import os
import shutil
import socket
import tempfile
import time
import traceback

from .devices import select_device
from .errors import Cancelled, JobError
from .inputs import find_inputs
from .launcher_env import apply_launcher_env
from .names import GENERATED_CODE, STAGES_PROFILED
from .ranks import Ranks, rank_device
from .shipped import materialize, private_dir
from .target import load_module, resolve

MAX_RETURN_BYTES = 150 * 1024 * 1024  # gzip'd traces sent back in one frame
PROGRESS_EVERY_S = 0.2  # a stage's step messages, at most this often (the last always)


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
        self.entry = req.get("entry")  # the program that calls the function, if any
        self.entry_cwd = self.entry and os.path.abspath(self.entry.get("cwd") or self.root)
        self.call_site = None  # which call of the program was measured
        self.replayed = ("", "")  # a program's call: from a saved capture, or run again (why)
        self.own_trace_dir = None
        self._set_user_dirs()
        self._user_cache = {}
        self.torch = worker.torch
        self.ranks = Ranks(worker.torch)
        self.loaded = None  # (module, owner, args, kwargs) once prepared
        self.captured = None  # (fn, code, state, compiled): a program's call, captured
        self.recomputes = False  # the cold call ran a non-reentrant checkpoint (memory pass)
        self.launches = {}  # user Triton kernel name -> its launches in the cold call
        self.block_masks = []  # flex_attention block masks alive after the cold call
        self.optimizer_lists = []  # the lists of the optimizers that step in the cold call
        self.warmup_calls = 0  # the calls of the last warm-up (timing.warm_up)
        self.schedule_note = ""  # why the schedule has fewer steps than asked, for long calls
        self.recording_note = ""  # why the schedule was recorded otherwise than asked
        self.setup_output = None  # (text, truncated) the import and the provider printed
        self.inputs_from = ""  # "defaults", or the provider's file::name
        self.stages = {}  # seconds per stage, in the order they ran
        self._stage = None
        self._stage_t = 0.0
        self._sent = (None, 0.0)  # the last progress message's stage, and when it went

    def _set_user_dirs(self):
        dirs = {self.root, os.path.dirname(self.path)}
        if self.entry:
            dirs.add(self.entry_cwd)
            if self.entry["kind"] == "script":
                script = os.path.join(self.entry_cwd, self.entry["target"])
                dirs.add(os.path.dirname(os.path.abspath(script)))
        self.user_dirs = tuple(d if d.endswith(os.sep) else d + os.sep for d in dirs)

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
                # relative to the home directory, where ssh starts; a Ray job or a
                # scheduler's prefix starts elsewhere (Ray: in a temporary folder of its own)
                root = os.path.expanduser(req["remote_root"])
                self.root = os.path.abspath(os.path.join(os.path.expanduser("~"), root))
                if not os.path.isdir(self.root):
                    raise JobError(
                        "file_not_found",
                        "workdir %s does not exist on %s; copy the project there or drop "
                        "workdir to ship its files" % (self.root, socket.gethostname()),
                    )
            self.path = os.path.normpath(os.path.join(self.root, rel))
            if self.entry:
                self.entry_cwd = self.here(self.entry_cwd)
            self._set_user_dirs()
        if req.get("return_traces"):
            self.own_trace_dir = tempfile.mkdtemp(prefix="traces-", dir=private_dir())
            self.trace_dir = self.own_trace_dir

    def here(self, local_path):
        """A path of the user's local project as it is on this host."""
        if self.root == self.local_root or not local_path.startswith(self.local_root):
            return local_path
        return self.root + local_path[len(self.local_root) :]

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
            timing = side.get("timing") or {}
            if timing.get("loader_sources"):
                timing["loader_sources"] = [self.local_text(w) for w in timing["loader_sources"]]
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
    def in_project(self, path):
        """Whether `path` is under the project's root (an installed package's file, which
        the project profiles, is not)."""
        root = self.root if self.root.endswith(os.sep) else self.root + os.sep
        return os.path.abspath(path).startswith(root)

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
        # Within a stage, a step's message goes at most every PROGRESS_EVERY_S (the last
        # always): each one wakes the launcher, and a message an iteration made a 90 us
        # loop read 190-360 us in place on a busy 2-core host (pytorch/examples' regression).
        last_stage, last_t = self._sent
        if stage == last_stage and step != total and now - last_t < PROGRESS_EVERY_S:
            return
        self._sent = (stage, now)
        self.worker.channel.send(
            {
                "type": "job_progress",
                "job_id": self.id,
                "stage": stage,
                "step": step,
                "total": total,
            }
        )

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
        raised = None if text else _raised_outside(exc.__traceback__, frames)
        message = prefix + type(exc).__name__ + (": " + text if text else "")
        if raised is not None:  # a bare `assert` in a library: its line is the message
            message += " at %s:%s: %s" % raised
            lines.append("%s:%s: %s" % raised)
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
        return select_device(self.torch, rank_device(self.torch, self.req.get("device") or "auto"))

    def with_call(self, then):
        """``then(fn, call, device, sync)`` on the call: built from its inputs here, or
        taken from the program that calls it (that job ends the worker)."""
        if self.entry:
            apply_launcher_env(self.torch, self.entry)
        if self.entry and self.entry.get("in_place"):
            from .inplace import run_in_place

            return run_in_place(self)
        if self.entry:
            from .entry import run_to_call

            capture = self.entry.get("capture")
            if capture:
                from .replayed import saved_call

                prepared, meta, why = saved_call(self, capture)
                if prepared is not None:
                    self.replayed = ("saved capture", "")
                    site = dict((meta or {}).get("site") or {})
                    site.update({"reused": True, "saved": capture, "entry_s": 0.0})
                    site.update({"wrote": [], "settled_s": 0.0, "save_error": None})
                    self.call_site = site
                    return then(*prepared)
                self.replayed = ("program run again", why or "")
            else:
                self.replayed = ("program run again", "")
            return run_to_call(self, then)
        return then(*self.prepare())

    def prepare(self):
        """Import the module, find the function and its inputs: (fn, call, device, sync)."""
        torch = self.torch
        self.progress("import")
        module = load_module(self)
        fn, owner = resolve(self, module)
        device = self.select_device()
        self.ranks.join(device)
        cuda = device.type == "cuda"
        sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
        self.progress("inputs")
        args, kwargs = find_inputs(self, module, fn, owner, device)
        self.loaded = (module, owner, args, kwargs)  # what run_try builds its variants from
        self.setup_output = self.worker.capture.take()  # the function's output starts here
        return fn, self.guarded(fn, args, kwargs), device, sync

    def guarded(self, fn, args, kwargs):
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


def _raised_outside(tb, frames):
    """(file, line, code) where an exception was raised, when that is not in the user's
    frames (a library's bare ``assert``); the file from its package folder on."""
    raised = traceback.extract_tb(tb)[-1:] if tb is not None else []
    if not raised or (frames and raised[0] == frames[-1]):
        return None
    f = raised[0]
    path = f.filename.replace(os.sep, "/")
    short = path.rpartition("-packages/")[2] if "-packages/" in path else os.path.basename(path)
    return short, f.lineno, (f.line or "").strip()
