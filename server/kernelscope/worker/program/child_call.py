# pyright: basic
"""A call the program makes only in a child process (a Dataset's ``__getitem__`` or a
``collate_fn`` in a DataLoader worker): taken there, saved to a file, and handed to the main
process, which profiles its replay as it would a call of its own.

The first child to make the chosen call claims it (a file made with O_EXCL), saves the
call's arguments and state beside the children's temporary files, and signals the main
process; the main process's handler runs the job from wherever the program was (as the
job of a call of its own runs from inside that call) and the worker ends.

A forked child has the main process's watch already. A spawned or forkserver child gets
one as it unpickles its process object: multiprocessing pickles the ``_config`` of the
process that made it, and an entry of ours there unpickles by running `_STAGE`, which
imports this package from its sources (the main process's, sent along) and arms a watch.
"""

import contextlib
import inspect
import json
import os
import signal
import sys
import time

from .capture import CallState, arguments, function_of, load_capture, save_capture
from .errors import JobError
from .target import modules_of

#: Past this size (MB of tensors: the dataset's own, an in-memory one) a child's call is not
#: handed over without --save: it is written to the temporary folder, then read back.
HANDOFF_MB = 2048


def handoff_signal():
    """The signal a child raises in the main process: a real-time one, which programs
    leave alone (SIGUSR1 is Lightning's on SLURM), where the platform has them."""
    rt = getattr(signal, "SIGRTMIN", None)
    return rt + 6 if rt is not None else signal.SIGUSR2


#: Key of ours in multiprocessing's process ``_config`` (the children's temporary folder
#: travels the same way, as ``tempdir``).
CONFIG_KEY = "kernelscope_child_call"

#: Run in a spawned child as its process object is unpickled (SOURCES, PACKAGE, PARAMS are
#: its globals): this package from its sources, then arm_spawned(PARAMS).
_STAGE = """
import importlib.abc, importlib.util, sys


class _Sources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        head, _, rest = fullname.partition(".")
        name = rest + ".py" if rest else "__init__.py"
        if head != PACKAGE or name not in SOURCES:
            return None
        origin = "<%s>/%s" % (PACKAGE, name)
        return importlib.util.spec_from_loader(fullname, self, origin=origin, is_package=not rest)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        origin = module.__spec__.origin
        source = SOURCES[origin.rpartition("/")[2]]
        exec(compile(source, origin, "exec", dont_inherit=True), module.__dict__)


try:  # whatever fails here must not keep the process from starting
    if PACKAGE not in sys.modules:
        sys.meta_path.insert(0, _Sources())
    __import__(PACKAGE + ".child_call", fromlist=["arm_spawned"]).arm_spawned(PARAMS)
except Exception:
    pass
"""


class _Spawned:
    """Our entry in the process ``_config``: pickled as a call of `_STAGE`."""

    def __init__(self, params, sources):
        self.params, self.sources = params, sources

    def __reduce__(self):
        package = __name__.rpartition(".")[0]
        names = {"SOURCES": self.sources, "PACKAGE": package, "PARAMS": self.params}
        return exec, (_STAGE, names)


class ChildCall:
    """The handoff of one call from a child process to the main process."""

    def __init__(self, torch, folder, limit_mb):
        self.torch = torch  # None: imported at the call (a spawned child that never makes it)
        self.path = os.path.join(folder, "kernelscope-child-call.pt")
        self.record_path = os.path.join(folder, "kernelscope-child-call.json")
        self.claim_path = os.path.join(folder, "kernelscope-child-call.claim")
        # a child's call that could not be saved (its claim released: another may be taken)
        self.failed_path = os.path.join(folder, "kernelscope-child-call.failed.json")
        self.noted_path = os.path.join(folder, "kernelscope-child-call.noted")
        self.dataloader_only = False  # a spawned child's: not DDP ranks, pools, managers
        self.limit = None if limit_mb is None else int(limit_mb) * 2**20
        self.main_pid = os.getpid()
        self.signum = handoff_signal()
        self.previous = None
        self.installed = False
        self.on_record = None  # (record) -> None, in the main process
        self.active = False  # set up: installed here, or armed in a spawned child

    # in the child --------------------------------------------------------------------------
    def take(self, frame, caller, call):
        """In the child, on its chosen call: claim the handoff (the first child to get here),
        save the call, and signal the main process. A call that cannot be saved releases
        the claim (the main process's own call, or another child's, may still be taken)
        and leaves why. Never raises into the program."""
        if self.dataloader_only and worker_info() is None:
            return
        where = made_in()
        if not self.claim({"pid": os.getpid(), "call": call, "made_in": where}):
            return  # another child has it, or the main process's own call
        record = {"pid": os.getpid(), "call": call, "caller": list(caller) if caller else None}
        record["made_in"] = where
        try:
            torch = self.torch or __import__("torch")
            record["threads"] = torch.get_num_threads()
            args, kwargs = arguments(frame)
            state = CallState(torch, args)
            spec, dataset = worker_spec(args, kwargs)
            meta = {"worker_info": spec, "worker_dataset": dataset}
            record["error"] = save_capture(
                torch, self.path, args, kwargs, state, meta, self.limit, portable=False
            )
            if record["error"] and dataset is not None:  # too large, or not saveable: the
                # call itself may save without it (its get_worker_info().dataset is then None)
                meta["worker_dataset"] = None
                record["error"] = save_capture(
                    torch, self.path, args, kwargs, state, meta, self.limit, portable=False
                )
        except Exception as e:
            text = str(e).splitlines()[0][:300] if str(e) else ""
            record["error"] = "%s: %s" % (type(e).__name__, text)
        try:
            if record["error"]:
                _write_json(self.failed_path, record)
                os.remove(self.claim_path)
                return
            _write_json(self.record_path, record)
            os.kill(self.main_pid, self.signum)
        except OSError:
            pass

    # in the main process -----------------------------------------------------------------
    def install(self, on_record):
        """Take the child's signal in this (the main) thread; False where it cannot be."""
        try:
            self.previous = signal.signal(self.signum, self._received)
        except (ValueError, OSError):  # not the main thread
            return False
        with contextlib.suppress(Exception):  # the program's blocking calls resume, not EINTR
            signal.siginterrupt(self.signum, False)
        self.on_record = on_record
        self.installed = self.active = True
        return True

    def watch_spawned(self, watch, root):
        """Have children started by spawn or forkserver from here on watch for the call:
        False where this package's sources cannot be had (not run from its bundle)."""
        import multiprocessing.process

        finder = next((f for f in sys.meta_path if type(f).__name__ == "BundleFinder"), None)
        sources = getattr(finder, "sources", None)
        if not sources:
            return False
        params = {
            "folder": os.path.dirname(self.path),
            "limit": self.limit,
            "main_pid": self.main_pid,
            "signum": int(self.signum),
            "path": watch.path,
            "qualname": watch.qualname,
            "first_line": watch.first_line,
            "want": watch.want,
            "caller": list(watch.caller) if watch.caller else None,
            "root": root,
        }
        config = getattr(multiprocessing.process.current_process(), "_config", None)
        if config is None:
            return False
        config[CONFIG_KEY] = _Spawned(params, sources)
        return True

    def claim(self, who=None):
        """Take the call for this process (a file made with O_EXCL, holding `who`): False
        where a child or the main process took it first (the main process's own call claims
        it too, so no child signals the process while its job runs). True where no handoff
        was set up."""
        if not self.active:
            return True
        try:
            fd = os.open(self.claim_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError:
            return False
        with contextlib.suppress(OSError):
            os.write(fd, json.dumps(who or {}).encode("utf-8"))
        os.close(fd)
        return True

    def remove(self):
        """Children started from now on do not watch; the signal is ignored from now on (a
        real-time signal's default ends the process), or handled as it was before."""
        with contextlib.suppress(Exception):
            import multiprocessing.process

            getattr(multiprocessing.process.current_process(), "_config", {}).pop(CONFIG_KEY, None)
        if self.installed:
            self.installed = False
            keep = self.previous not in (None, signal.SIG_DFL)
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(self.signum, self.previous if keep else signal.SIG_IGN)

    def taken(self, wait_s=5.0):
        """After the program ended: the record of a child that took the call (waited for
        while it saves), or of one whose call could not be saved; None if no child made it."""
        if not self.active:
            return None
        deadline = time.monotonic() + wait_s
        while os.path.exists(self.claim_path):
            record = _read_json(self.record_path)
            if record is not None:
                return record
            if time.monotonic() > deadline:
                who = _read_json(self.claim_path) or {}
                who["error"] = (
                    "the process (pid %s) ended before it had saved it: the program stopped "
                    "its DataLoader workers meanwhile, or it was killed (out of memory?)"
                    % who.get("pid", "?")
                )
                return who
            time.sleep(0.02)
        return _read_json(self.failed_path)

    def _received(self, signum, frame):
        if os.getpid() != self.main_pid:
            return
        record = _read_json(self.record_path)
        if record is None or self.on_record is None:
            return
        self.remove()
        # the handler may run inside our call watch's tracer callback, where no tracing
        # happens; the job's line pass needs it (as the program's own call gets it)
        sys.call_tracing(self.on_record, (record,))


def arm_spawned(params):
    """In a spawned or forkserver child, as its process object is unpickled: watch for the
    call, and hand it over as a forked child would. Never raises into multiprocessing."""
    try:
        from .watch import CallWatch

        handoff = ChildCall(None, params["folder"], None)
        handoff.limit = params["limit"]
        handoff.main_pid, handoff.signum = params["main_pid"], params["signum"]
        handoff.active = handoff.dataloader_only = True
        root = params["root"]
        watch = CallWatch(
            params["path"],
            params["qualname"],
            params["first_line"],
            params["want"],
            tuple(params["caller"]) if params.get("caller") else None,
            lambda f: (
                not f.startswith("<")
                and os.path.realpath(f).startswith(root + os.sep)
                and "-packages" not in f
            ),
        )
        watch.pid = params["main_pid"]  # its calls are a child's
        watch.on_child_call = handoff.take
        # its first call is noted in a file the main process reads, not a pipe it lacks
        watch._child_w = os.open(handoff.noted_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        watch.arm()
    except Exception:
        pass


def worker_info():
    """The DataLoader worker's WorkerInfo (its id, seed, dataset copy), None elsewhere."""
    try:
        from torch.utils.data import get_worker_info

        return get_worker_info()
    except Exception:
        return None


def worker_spec(args, kwargs):
    """What replays the call as the worker had it: (its WorkerInfo's id, num_workers, seed
    and which argument is its dataset; the dataset, where no argument is it: a
    worker_init_fn's or a collate_fn's call), or (None, None) outside a DataLoader worker."""
    info = worker_info()
    if info is None:
        return None, None
    values = list(args) + list(kwargs.values())
    at = next((i for i, v in enumerate(values) if v is info.dataset), None)
    spec = {"id": info.id, "num_workers": info.num_workers, "seed": info.seed, "dataset_at": at}
    return spec, info.dataset if at is None else None


def as_worker(torch, state, worker, args, kwargs):
    """Replay as the call ran: its intra-op threads (a DataLoader worker's 1), and where it
    was a worker's (`worker`: worker_spec's pair), get_worker_info() returning that worker's
    info in this process (a worker_init_fn or an IterableDataset reads it)."""
    state.apply_threads()
    spec, dataset = worker
    try:
        from torch.utils.data._utils import worker
    except ImportError:
        return
    if not isinstance(spec, dict) or not hasattr(worker, "_worker_info"):
        return
    values = list(args) + list(kwargs.values())
    at = spec.get("dataset_at")
    if at is not None and at < len(values):
        dataset = values[at]
    fields = {"id": spec["id"], "num_workers": spec["num_workers"], "seed": spec["seed"]}
    fields["dataset"] = dataset  # None where it was too large or could not be saved
    info = worker.WorkerInfo(**fields)
    setattr(worker, "_worker_info", info)  # noqa: B010


def made_in():
    """Where a child's call was made: ``DataLoader worker 1 of 2``, or another child
    process."""
    info = worker_info()
    if info is not None:
        return "DataLoader worker %d of %d" % (info.id, info.num_workers)
    return "a child process (pid %d)" % os.getpid()


def _write_json(path, value):
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(tmp, path)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def handed_call(job, watch, handoff, record):
    """In the main process: the child's call from its record, as (args, kwargs, state, fn,
    code, the DataLoader worker's info); a JobError naming what kept it from being handed
    over."""
    name = job.req["qualname"]
    where = record.get("made_in") or "a child process"
    line = watch.first_line or None
    if record.get("error"):
        raise JobError(
            "child_call",
            "%s's call %s in %s could not be handed to the main process: %s"
            % (name, record.get("call"), where, record["error"]),
            job.path,
            line,
            hint="--save hands over a call of any size"
            if "handed over without --save" in record["error"]
            else "with the DataLoader's num_workers at 0 its calls are the main process's, "
            "and are profiled where they are made",
        )
    if "__main__" in sys.modules:  # a spawned child's classes of the program's main module
        sys.modules["__mp_main__"] = sys.modules["__main__"]
    try:
        args, kwargs, state, meta = load_capture(job.torch, handoff.path)
        os.remove(handoff.path)  # in memory now; the file may be gigabytes
    except Exception as e:
        raise JobError(
            "child_call",
            "%s's call in %s was saved but could not be read back: %s: %s"
            % (name, where, type(e).__name__, e),
            job.path,
            line,
        ) from None
    for fn, code in _functions(job, name):
        if watch.matches(code):
            info = ((meta or {}).get("worker_info"), (meta or {}).get("worker_dataset"))
            return args, kwargs, state, function_of(code, args) or fn, code, info
    raise JobError(
        "child_call",
        "%s, called in %s, is not in the main process's modules of %s"
        % (name, where, os.path.basename(job.path)),
        job.path,
        line,
    )


def _functions(job, qualname):
    """(function, code) for `qualname` in each loaded module of the job's file."""
    for module in modules_of(job.path):
        obj = module
        for part in qualname.split("."):
            get = inspect.getattr_static if inspect.isclass(obj) else getattr
            obj = get(obj, part, None)
            if obj is None:
                break
        obj = getattr(obj, "__func__", obj)  # a staticmethod's or classmethod's
        code = getattr(inspect.unwrap(obj), "__code__", None) if callable(obj) else None
        if code is not None:
            yield obj, code
