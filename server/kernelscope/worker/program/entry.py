# pyright: basic
"""A user's program run as the user runs it: a script as a real ``__main__`` (its folder on
``sys.path``, its own ``sys.argv``, the user's working directory), ``-m module``, or a pytest
node id; the function's chosen call taken from it.

The program is never stopped by an exception it could catch: the job runs from inside the
chosen call, its result is sent, and the worker ends (the launcher starts a fresh one).
"""

import builtins
import contextlib
import json
import os
import socket
import sys
import time
import types

from .capture import (
    CallState,
    arguments,
    function_of,
    replay,
    save_capture,
    without_compiler,
)
from .child_call import HANDOFF_MB, ChildCall, as_worker, handed_call
from .digest import MAX_FILES, capture_name, digest_of, program_files
from .dynamo import dynamo_frames
from .errors import JobError
from .loop_mark import MARK
from .names import DIST_RANK
from .ranks import torchrun_env
from .rebatch import resized_call
from .watch import CallWatch

#: A kept capture's record lists the program's files (to say which changed) up to this many.
KEEP_NAMES = 5000
#: Files the report names as written by the program (a scan of its working folder, bounded).
SCAN_FILES = 5000
SKIP_DIRS = {".git", ".kernelscope", "__pycache__", ".venv", "node_modules", ".pytest_cache"}


def run_to_call(job, then):
    """Run the program until the function's chosen call; there, run ``then(fn, call,
    device, sync)`` and conclude the job (the worker ends). Returns only by raising a
    JobError: the program failed, ended, or called the function too few times."""
    entry = job.req["entry"]
    torch = job.torch
    label = entry_label(entry)
    name = job.req["qualname"]
    caller = None
    if entry.get("caller"):
        path, _, line = entry["caller"].rpartition(":")
        caller = (os.path.realpath(job.here(path)), int(line))
    want = int(entry.get("call") or 1)
    watch = CallWatch(
        job.path, name, int(entry.get("first_line") or 0), want, caller, job.is_user_file
    )
    started = time.perf_counter()
    before = files_now(job.entry_cwd)
    # what the program is before it runs (it may write into its folder before the call)
    keep_mb = int(entry.get("keep_mb") or 0) if job.root == job.local_root else 0
    argv = [entry["target"], *entry.get("args", [])]

    def begin(args, kwargs, code, fn, state, site, compiled, entry_s, child=None):
        """The job on the call's arguments (the worker ends after it); `child`: (how the
        report says it was made in a forked child, its DataLoader WorkerInfo)."""
        made_in, info = child or (None, None)
        prepared, resized = prepared_call(job, fn, code, args, kwargs, state, compiled)
        job.ranks.adopt(prepared[2], "call %d of %s" % (want, job.req["qualname"]))
        modes = state.modes() + (["torch.compile off"] if entry.get("no_compile") else [])
        modes += [made_in] if made_in else []
        modes += [resized] if resized else []
        job.call_site = {
            "via": label,
            "call": want,
            "caller_path": job.local_text(site[0]) if site else None,
            "caller_line": site[1] if site else None,
            "modes": modes,
            "captured": True,
            "entry_s": entry_s,
            "wrote": [],
            "settled_s": settle_children(),
            "saved": None,
            "save_error": None,
            "reused": False,
            "kept": not entry.get("save"),
            "step": "call",
            "rerun_why": entry.get("rerun_why") or "",
        }
        if entry.get("save") or keep_mb:
            # the program's files as its run left them at the call (what it wrote into its
            # folder before it included): the next profile finds them so while none changed
            kept = program_files(job.entry_cwd, argv)
            limit = None if entry.get("save") else keep_mb
            _save(job, args, kwargs, state, want, (digest_of(kept, argv), kept), limit, info)
        result = then(*prepared)
        job.call_site["wrote"] = written_since(job.entry_cwd, before)  # the replays' too
        return result

    def on_call(frame, site):
        if not handoff.claim():
            # a child took it first: its signal is on its way, unless its call cannot be
            # saved; then the program's next call here is the one
            watch.want += 1
            watch.arm()
            return
        handoff.remove()
        # A compiled caller's frame evaluation (torch.compile) must not compile our code;
        # the replays get it back, so they run as the program's calls do.
        compiled = without_compiler(torch)
        entry_s = time.perf_counter() - started

        def body():  # whatever it raises is the job's failure, never the program's exception
            job.progress("inputs")
            args, kwargs = arguments(frame)
            code = frame.f_code
            fn = function_of(code, args)
            return begin(args, kwargs, code, fn, CallState(torch, args), site, compiled, entry_s)

        job.worker.conclude(job, body)

    def on_child_record(record):
        """The main process, signalled by the child that took the call: the job on it."""
        watch.disarm()
        # cleared, not kept: the signal may come while the program runs compiled code, and
        # the child's call ran uncompiled
        without_compiler(torch)
        entry_s = time.perf_counter() - started

        def body():
            job.progress("inputs")
            args, kwargs, state, fn, code, info = handed_call(job, watch, handoff, record)
            as_worker(torch, state, info, args, kwargs)
            caller = record.get("caller")
            threads = record.get("threads") or torch.get_num_threads()
            how = "made in %s, replayed in the main process with its %d thread%s" % (
                record.get("made_in") or "a child process",
                threads,
                "" if threads == 1 else "s",
            )
            site = (caller[0], caller[1]) if caller else None
            return begin(args, kwargs, code, fn, state, site, None, entry_s, (how, info))

        job.worker.conclude(job, body)

    watch.on_call = on_call
    folder = job.worker.children_tempdir
    handoff = ChildCall(torch, folder or "", None if entry.get("save") else HANDOFF_MB)
    if folder and hasattr(os, "fork") and handoff.install(on_child_record):
        watch.on_child_call = handoff.take
        watch.noted_path = handoff.noted_path
        handoff.watch_spawned(watch, job.root)
    job.worker.fork_hooks.append(watch.forked)
    job.ranks.host_store()
    compiled_before = dynamo_frames()
    saved_disable = _set_dynamo_disabled(torch, True) if entry.get("no_compile") else None
    job.progress("entry")
    try:
        watch.arm()
        try:
            ended = run_program(job, entry)
        finally:
            watch.disarm()
            handoff.remove()
    finally:
        job.worker.fork_hooks.remove(watch.forked)
        if saved_disable is not None:
            _set_dynamo_disabled(torch, saved_disable)
    record = handoff.taken()  # None where no handoff was set up
    if record is not None:  # the program ended before the child's signal came
        on_child_record(record)
    seconds = time.perf_counter() - started
    wrote = written_since(job.entry_cwd, before)
    raise _not_called(job, entry, watch, ended, seconds, compiled_before, wrote)


def prepared_call(job, fn, code, args, kwargs, state, compiled=None):
    """The captured call, replayed in the state it had: ((fn, call, device, sync), how its
    arguments were resized or None)."""
    torch = job.torch
    state.restore_rng()
    device = device_of(torch, args, kwargs)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    run_args, run_kwargs, resized = resized_call(job, args, kwargs)
    call = job.guarded(replay(torch, fn, code, run_args, run_kwargs, state, compiled), [], {})
    job.loaded = (None, None, run_args, run_kwargs)  # what try builds its variants from
    job.captured = (fn, code, state, compiled)
    return (fn, call, device, sync), resized


def _save(job, args, kwargs, state, call, program, keep_mb, worker=None):
    """Save the captured call under the project's .kernelscope/captures/ (local runs): with
    --save whatever its size, else (`keep_mb`) only up to that size; a call of a DataLoader
    worker's with its WorkerInfo (`worker`: worker_spec's pair). `program`: the program's
    (digest, files) as its run left them at the call (None, None where it has too many files
    to tell)."""
    site = job.call_site
    if job.root != job.local_root:
        site["save_error"] = "a capture is saved on local runs only, not on a remote"
        return
    digest, files = program
    if digest is None and keep_mb is not None:
        site["save_error"] = (
            "the program's folder holds more than %d files, too many to tell when they "
            "change" % MAX_FILES
        )
        return
    entry = job.entry
    name = capture_name(
        job.req["qualname"], call, site["via"], entry.get("caller"), entry.get("env")
    )
    path = os.path.join(job.local_root, ".kernelscope", "captures", name)
    meta = {
        "label": site["via"],
        "call": call,
        "caller": entry.get("caller"),
        "qualname": job.req["qualname"],
        "digest": digest,
        "files": files if files is not None and len(files) <= KEEP_NAMES else None,
        "site": dict(site),
        "worker_info": worker[0] if worker else None,
        "worker_dataset": worker[1] if worker else None,
    }
    if keep_mb is not None and in_script(job):  # kept for a replay: none can be made
        site["save_error"] = (
            "the function is defined in the program's script: a replay would import it, "
            "which runs the program, so the next profile runs the program again"
        )
        return
    try:
        limit = None if keep_mb is None else keep_mb * 2**20
        site["save_error"] = save_capture(job.torch, path, args, kwargs, state, meta, limit)
    except Exception as e:
        site["save_error"] = "cannot save the capture: %s: %s" % (type(e).__name__, e)
    if site["save_error"] is None:
        site["saved"] = path
        with open(os.path.splitext(path)[0] + ".json", "w", encoding="utf-8") as f:
            plain = ("site", "worker_info", "worker_dataset")
            json.dump({k: v for k, v in meta.items() if k not in plain}, f)
        # Captures kept before the name carried a key (X-call1.pt) are never read again.
        old = os.path.join(os.path.dirname(path), name.rsplit("-", 1)[0])
        for suffix in (".pt", ".json"):
            with contextlib.suppress(OSError):
                os.remove(old + suffix)


def in_script(job):
    """Whether the function is defined in the script the program runs (its ``__main__``)."""
    entry = job.entry
    script = os.path.abspath(os.path.join(job.entry_cwd, entry["target"].partition("::")[0]))
    return entry["kind"] == "script" and os.path.realpath(script) == os.path.realpath(job.path)


def entry_label(entry):
    head = {"module": ["-m", entry["target"]], "pytest": ["pytest", entry["target"]]}
    ranks = entry.get("ranks") or 0
    launcher = ["torchrun --nproc-per-node %d" % ranks] if ranks else []
    launcher = [entry["launcher"]] if entry.get("launcher") else launcher
    words = head.get(entry["kind"], [entry["target"]]) + list(entry.get("args") or [])
    return " ".join(launcher + words)


def as_torchrun_rank(entry):
    """A program named through torchrun with one rank runs in this worker alone: it gets
    torchrun's variables for its rank 0 (a job of N ranks has them from its launcher)."""
    if entry.get("ranks") != 1 or os.environ.get(DIST_RANK) is not None:
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(torchrun_env(0, 1, port))


def run_program(job, entry, mark=None):
    """Run the program to its end; how it ended ("ended", "exit N"), or a JobError when it
    failed. ``mark``: a LoopMark, for a loop of the script's that marks its own iterations
    (``loop_mark``)."""
    kind = entry["kind"]
    label = entry_label(entry)
    as_torchrun_rank(entry)
    try:
        if kind == "script":
            _run_script(job, entry, mark)
        elif kind == "module":
            import runpy

            sys.argv = [entry["target"], *entry.get("args", [])]
            runpy.run_module(entry["target"], run_name="__main__", alter_sys=True)
        elif kind == "pytest":
            return _run_pytest(job, entry)
        else:
            raise JobError("bad_entry", "unknown entry kind %r" % kind)
    except SystemExit as e:
        code = e.code
        if code in (None, 0):
            return "exited"
        raise JobError(
            "entry_failed",
            "%s exited with %s before calling %s"
            % (
                label,
                "status %s" % code if isinstance(code, int) else repr(code),
                job.req["qualname"],
            ),
            job.path,
            None,
        ) from None
    except JobError:
        raise
    except BaseException as e:
        raise job.user_error(
            "entry_failed", e, "%s failed before calling %s: " % (label, job.req["qualname"])
        ) from None
    return "ended"


def _run_script(job, entry, mark=None):
    """Run the script as ``__main__``; with ``mark`` (a LoopMark prepared from this script:
    in_script), its code compiled with the loop's mark in."""
    path = os.path.abspath(os.path.join(job.entry_cwd, entry["target"]))
    if mark is not None:
        code = mark.code
    else:
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as e:
            raise JobError(
                "file_not_found",
                "cannot run %s: %s" % (entry["target"], e.strerror or e),
                path,
            ) from None
        try:
            code = compile(source, path, "exec", dont_inherit=True)
        except SyntaxError as e:
            raise JobError("syntax_error", "SyntaxError: %s" % e.msg, path, e.lineno) from None
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__dict__["__builtins__"] = builtins
    main.__spec__ = None
    main.__loader__ = None
    sys.modules["__main__"] = main
    # as multiprocessing's import does when the script runs it: a spawned child's classes
    # of the script are __mp_main__'s, and unpickle here so
    sys.modules["__mp_main__"] = main
    sys.argv = [path, *entry.get("args", [])]
    sys.path.insert(0, os.path.dirname(path))
    if mark is not None:
        main.__dict__[MARK] = mark
    exec(code, main.__dict__)


def _run_pytest(job, entry):
    try:
        import pytest
    except ImportError:
        raise JobError(
            "entry_failed",
            "pytest is not installed for %s; install it there or use a script" % sys.executable,
        ) from None
    sys.argv = ["pytest", entry["target"], *entry.get("args", [])]
    code = pytest.main(
        [
            entry["target"],
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-s",
            "-q",
            *entry.get("args", []),
        ]
    )
    if int(code) == 5:
        raise JobError("entry_failed", "pytest collected no test for %s" % entry["target"])
    if int(code) in (2, 3, 4):
        raise JobError(
            "entry_failed",
            "pytest stopped (exit code %d) before %s called %s; its output says why"
            % (int(code), entry["target"], job.req["qualname"]),
        )
    return "ended"


def _where(job, path_line):
    """``train.py:154`` for an absolute ``path:line``, relative to the program's folder."""
    path, _, line = path_line.rpartition(":")
    return "%s:%s" % (os.path.relpath(job.local_text(path), job.local_text(job.entry_cwd)), line)


def _not_called(job, entry, watch, ended, seconds, compiled_before, wrote):
    label = entry_label(entry)
    line = int(entry.get("def_line") or entry.get("first_line") or 0) or None
    name = job.req["qualname"]
    want = watch.want
    if watch.calls:
        message = "%s called %s %d time%s%s, in %.1f s; the call asked for is number %d" % (
            label,
            name,
            watch.calls,
            "" if watch.calls == 1 else "s",
            " from %s" % _where(job, entry["caller"]) if entry.get("caller") else "",
            seconds,
            want,
        )
        hint = "profile an earlier call (--call %d), or run the program longer" % watch.calls
        return JobError("too_few_calls", message, job.path, line, hint=hint)
    message = "%s ran to the end in %.1f s without calling %s" % (label, seconds, name)
    hints = []
    if watch.seen and entry.get("caller"):
        where = ", ".join(
            "%s (%d)" % (_where(job, "%s:%s" % (p, at)), n)
            for (p, at), n in sorted(
                ((k, v) for k, v in watch.callers.items() if k), key=lambda kv: -kv[1]
            )[:5]
        )
        message = "%s called %s %d times, none from %s" % (
            label,
            name,
            watch.seen,
            _where(job, entry["caller"]),
        )
        hints.append("it was called from %s" % where)
    if watch.called_in_children():
        hints.append(
            "%s ran in the program's forked children (DataLoader workers?), none of which "
            "made call %d of its own: a lower --call takes one of theirs" % (name, want)
            if watch.on_child_call is not None
            else "%s ran in the program's forked children (DataLoader workers?), not in the "
            "main process: kernelscope profiles calls the main process makes" % name
        )
    if dynamo_frames() > compiled_before and not entry.get("no_compile"):
        hints.append(
            "torch.compile compiled code while it ran: if %s runs inside a compiled caller, "
            "compiled code does not call it; try --no-compile" % name
        )
    if ended == "exited":
        message += " (it called sys.exit)"
    if wrote:
        message += "; it ran for real and wrote %s" % ", ".join(wrote)
    return JobError("not_called", message, job.path, line, hint="; ".join(hints) if hints else None)


def settle_children(limit_s=3.0, period_s=0.05):
    """Wait (up to `limit_s`) until the program's child processes use no CPU: DataLoader
    workers filling their prefetch queues would otherwise share the CPUs with the timed
    calls. The seconds waited."""
    t0 = time.perf_counter()
    pids = [c.pid for c in children_of_program()]
    if not pids:
        return 0.0
    last = _cpu_ticks(pids)
    quiet = 0
    while time.perf_counter() - t0 < limit_s and quiet < 2:
        time.sleep(period_s)
        now = _cpu_ticks(pids)
        quiet = quiet + 1 if now == last else 0
        last = now
    return time.perf_counter() - t0


def children_tempdir():
    """multiprocessing's temporary folder for this process, made now (None if it cannot be):
    a child forked from here on uses it, not one of its own (a DataLoader worker sending a
    batch makes one for its socket), so the worker's end, which terminates the children
    before their exit could remove theirs, removes this one."""
    try:
        import multiprocessing.util

        return multiprocessing.util.get_temp_dir()
    except Exception:
        return None


def children_of_program():
    mp = sys.modules.get("multiprocessing")
    try:
        return list(mp.active_children()) if mp is not None else []
    except Exception:
        return []


def _cpu_ticks(pids):
    """user + system clock ticks of these processes (Linux /proc; 0 elsewhere)."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total


def device_of(torch, args, kwargs):
    """The device of the call's tensors (the first found, modules' parameters too)."""
    seen = set()

    def walk(v, depth):
        if depth > 4 or id(v) in seen:
            return None
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            return v.device
        if isinstance(v, torch.nn.Module):
            for p in v.parameters():
                return p.device
            return None
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, (list, tuple)):
            for x in v:
                d = walk(x, depth + 1)
                if d is not None:
                    return d
        return None

    for value in [*args, *kwargs.values()]:
        found = walk(value, 0)
        if found is not None and found.type in ("cuda", "cpu"):
            return (
                found
                if found.type == "cpu" or found.index is not None
                else torch.device("cuda", torch.cuda.current_device())
            )
    return torch.device("cpu")


def _set_dynamo_disabled(torch, disabled):
    """Set dynamo's global switch; the value it had."""
    import torch._dynamo

    config = torch._dynamo.config
    before = bool(getattr(config, "disable", False))
    config.disable = disabled
    return before


def files_now(root):
    out = {}
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            path = os.path.join(folder, name)
            try:
                out[path] = os.stat(path).st_mtime_ns
            except OSError:
                continue
            count += 1
            if count >= SCAN_FILES:
                return out
    return out


def written_since(root, before):
    """Files under `root` the program created or changed (relative paths, at most 10); not
    the files our own output goes to (`kernelscope ... > out.txt` in the program's folder)."""
    now = files_now(root)
    ours = our_outputs()
    changed = sorted(
        p for p, t in now.items() if before.get(p) != t and os.path.realpath(p) not in ours
    )
    return [os.path.relpath(p, root) for p in changed[:10]]


def our_outputs():
    """The files the stdout and stderr of this process's ancestors (the CLI, the shell that
    redirected it) lead to, as real paths (Linux /proc; empty elsewhere). Not this
    process's own: a program that points fd 1 at its log wrote that log."""
    out = set()
    pid = os.getppid()
    for _ in range(8):
        for fd in (1, 2):
            try:
                target = os.readlink("/proc/%d/fd/%d" % (pid, fd))
            except OSError:
                continue
            if target.startswith("/"):
                out.add(os.path.realpath(target))
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return out
