"""The workspace/executeCommand commands: profile, open the trace in Perfetto, import a
trace, the last report. Each returns its reply Struct (lsp/replies.py) as plain JSON."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.uris import to_fs_path

from kernelscope.app import perfetto
from kernelscope.engine.kernel_choice import KernelChoiceError, checked_pattern
from kernelscope.engine.targets import Schedule, TargetError
from kernelscope.lsp.progress import ProgressReporter, cancel_if
from kernelscope.lsp.replies import (
    CompareReply,
    ImportTraceReply,
    LastReportReply,
    OpenTraceReply,
    ProfileError,
    ProfileReply,
    TryReply,
)
from kernelscope.lsp.server import (
    COMPARE,
    IMPORT_TRACE,
    LAST_REPORT,
    OPEN_TRACE,
    PROFILE,
    TRY,
    KernelscopeServer,
)
from kernelscope.protocol import VARIANTS
from kernelscope.pyfunctions import find, function_at
from kernelscope.units import fmt_bytes

if TYPE_CHECKING:
    from kernelscope.app.jobs import ProfileSpec
    from kernelscope.app.store import RunRecord


async def profile(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """Profile (uri, qualname[, options]): progress while it runs, then diagnostics and views.
    options.remote names a remote to run on."""
    uri, qualname, options = profile_args(args)
    path, source = runnable(ls, uri)
    fn = find(source, qualname)
    if fn is None:
        raise JsonRpcInvalidParams(f"{path.name} has no function {qualname!r}")
    spec = _spec(ls, path, qualname, source, options)
    remote = spec.remote
    from kernelscope.engine.runner import JobFailed

    request_future = _request_future(ls)
    reporter = ProgressReporter(ls, f"{qualname} on {remote}" if remote else qualname)
    await reporter.begin()
    task = asyncio.ensure_future(ls.service.profile(spec, reporter.on_progress))
    reporter.link(task)
    if request_future is not None:
        request_future.add_done_callback(lambda f: cancel_if(f, task))  # pyright: ignore[reportUnknownLambdaType]
    key = (str(path), qualname)
    try:
        record = await task
    except asyncio.CancelledError:
        ls.run_finished(uri, qualname, "cancelled")
        reporter.end("cancelled")
        return msgspec.to_builtins(ProfileReply(ok=False, cancelled=True))
    except JobFailed as e:
        ls.failures[key] = (e.failure, fn)
        ls.publish(path)
        ls.run_finished(uri, qualname, "failed")
        reporter.end(f"failed: {e.failure.message}")
        ls.window_show_message(
            lsp.ShowMessageParams(
                lsp.MessageType.Error, f"kernelscope: {qualname}: {e.failure.message}"
            )
        )
        f = e.failure
        error = ProfileError(kind=f.kind, message=f.message, path=f.path, line=f.line)
        return msgspec.to_builtins(ProfileReply(ok=False, error=error))
    except TargetError as e:
        ls.run_finished(uri, qualname, "failed")
        reporter.end(f"failed: {e}")
        raise JsonRpcInvalidParams(str(e)) from None
    ls.failures.pop(key, None)
    ls.publish(path)
    for other in {Path(r.path) for r in record.report.lines} - {path}:
        ls.publish(other)
    ls.run_finished(uri, qualname, "ok", record.run_id)
    verdict = record.report.verdict
    reporter.end(verdict.summary if verdict else "done")
    return msgspec.to_builtins(
        ProfileReply(
            ok=True,
            run_id=record.run_id,
            bound=verdict.bound if verdict else None,
            summary=verdict.summary if verdict else "",
            trace=record.report.trace.path,
        )
    )


def _spec(
    ls: KernelscopeServer, path: Path, qualname: str, source: str, options: dict[str, Any]
) -> ProfileSpec:
    """A job's spec from the settings and the command's options (which win)."""
    s = ls.settings
    try:
        schedule = Schedule(
            int(options.get("wait", s.wait)),
            int(options.get("warmup", s.warmup)),
            int(options.get("active", s.active)),
        )
        schedule.check()
    except (TypeError, ValueError, TargetError) as e:
        raise JsonRpcInvalidParams(f"bad schedule in options: {e}") from None
    remote = options.get("remote")
    if remote is not None and not isinstance(remote, str):
        raise JsonRpcInvalidParams(f"options.remote must be a remote's name, got {remote!r}")
    nproc: object = options.get("nproc")
    if nproc is not None and (not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1):
        raise JsonRpcInvalidParams(f"options.nproc must be an integer >= 1, got {nproc!r}")
    via: object = options.get("via")
    if via is not None and (not isinstance(via, str) or not via.strip()):
        raise JsonRpcInvalidParams(f"options.via must name a program, got {via!r}")
    call: object = options.get("call", 1)
    if not isinstance(call, int) or isinstance(call, bool) or call < 1:
        raise JsonRpcInvalidParams(f"options.call must be an integer >= 1, got {call!r}")
    skip: object = options.get("skip")
    if skip is not None and (not isinstance(skip, int) or isinstance(skip, bool) or skip < 1):
        raise JsonRpcInvalidParams(f"options.skip must be an integer >= 1, got {skip!r}")
    stop_after: object = options.get("stopAfter", True)
    if not isinstance(stop_after, bool):
        raise JsonRpcInvalidParams(f"options.stopAfter must be true or false, got {stop_after!r}")
    counters: object = options.get("counters")
    if counters is not None and not isinstance(counters, bool):
        raise JsonRpcInvalidParams(f"options.counters must be true or false, got {counters!r}")
    counters_match: object = options.get("countersMatch")
    if counters_match is not None:
        try:
            checked_pattern(counters_match, "options.countersMatch")
        except KernelChoiceError as e:
            raise JsonRpcInvalidParams(str(e)) from None
    caller: object = options.get("from")
    if caller is not None and not isinstance(caller, str):
        raise JsonRpcInvalidParams(f"options.from must be FILE:LINE, got {caller!r}")
    from kernelscope.app.jobs import ProfileSpec

    return ProfileSpec(
        path=path,
        qualname=qualname,
        source=source,
        device=str(options.get("device", s.device)),
        schedule=schedule,
        timeout=float(options.get("timeout", s.timeout)),
        python=s.worker_python,
        remote=remote,
        nproc=nproc,
        via=via,
        call=call,
        caller=caller,
        cwd=workspace_folder(ls, path),
        no_compile=bool(options.get("noCompile", False)),
        in_place=bool(options.get("inPlace", False)),
        skip=skip,
        finish=not stop_after,
        fresh=bool(options.get("fresh", False)),
        counters=counters,
        counters_match=cast("str | None", counters_match),
    )


async def try_variants(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """Try (uri, qualname[, {variants: [...], ...}]): time the function and the variants (by
    default those its last run suggests) in turns; KS801 diagnostics and hover lines after."""
    uri, qualname, options = profile_args(args, TRY)
    path, source = runnable(ls, uri)
    fn = find(source, qualname)
    if fn is None:
        raise JsonRpcInvalidParams(f"{path.name} has no function {qualname!r}")
    variants: object = options.get("variants")
    if variants is not None and (
        not isinstance(variants, list)
        or not all(v in VARIANTS for v in cast(list[object], variants))
    ):
        raise JsonRpcInvalidParams(
            f"options.variants must be a list of {', '.join(VARIANTS)}, got {variants!r}"
        )
    spec = _spec(ls, path, qualname, source, options)
    from kernelscope.engine.runner import JobFailed

    reporter = ProgressReporter(ls, qualname, title=f"Trying variants of {qualname}")
    await reporter.begin()
    chosen = [str(v) for v in cast(list[object], variants)] if variants is not None else None
    task = asyncio.ensure_future(ls.service.try_variants(spec, chosen, reporter.on_progress))
    reporter.link(task)
    request_future = _request_future(ls)
    if request_future is not None:
        request_future.add_done_callback(lambda f: cancel_if(f, task))  # pyright: ignore[reportUnknownLambdaType]
    try:
        exp = await task
    except asyncio.CancelledError:
        ls.run_finished(uri, qualname, "cancelled")
        reporter.end("cancelled")
        return msgspec.to_builtins(TryReply(ok=False, cancelled=True))
    except JobFailed as e:
        ls.run_finished(uri, qualname, "failed")
        reporter.end(f"failed: {e.failure.message}")
        f = e.failure
        error = ProfileError(kind=f.kind, message=f.message, path=f.path, line=f.line)
        return msgspec.to_builtins(TryReply(ok=False, error=error))
    except TargetError as e:
        ls.run_finished(uri, qualname, "failed")
        reporter.end(f"failed: {e}")
        raise JsonRpcInvalidParams(str(e)) from None
    ls.experiments[(str(path), qualname)] = (exp, fn)
    ls.publish(path)
    ls.run_finished(uri, qualname, "ok")
    best = next((v for v in exp.variants if v.name == exp.best), None)
    reporter.end(best.summary if best else "none is faster beyond the noise")
    return msgspec.to_builtins(
        TryReply(ok=True, best=exp.best, summaries=[v.summary for v in exp.variants])
    )


def profile_args(args: tuple[Any, ...], command: str = PROFILE) -> tuple[str, str, dict[str, Any]]:
    if len(args) < 2 or len(args) > 3:
        raise JsonRpcInvalidParams(
            f"{command} takes (uri, qualname[, options]), got {len(args)} argument(s)"
        )
    uri, qualname = args[0], args[1]
    options: object = args[2] if len(args) == 3 else {}
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"expected a document URI, got {uri!r}")
    if not isinstance(qualname, str) or not all(p.isidentifier() for p in qualname.split(".")):
        raise JsonRpcInvalidParams(f"qualname must be like fn or Class.method, got {qualname!r}")
    if not isinstance(options, dict):
        raise JsonRpcInvalidParams(f"options must be an object, got {type(options).__name__}")
    return uri, qualname, dict(options)  # pyright: ignore[reportUnknownArgumentType]


def workspace_folder(ls: KernelscopeServer, path: Path) -> Path | None:
    """The innermost workspace folder holding `path`: where a program runs, as a user at the
    editor's terminal would run it (None: outside every folder)."""
    paths = (to_fs_path(f.uri) for f in ls.workspace.folders.values())
    folders = [Path(p) for p in paths if p]
    inside = [f for f in folders if path.is_relative_to(f)]
    return max(inside, key=lambda f: len(f.parts)) if inside else None


def runnable(ls: KernelscopeServer, uri: str) -> tuple[Path, str]:
    """What a job runs for a document: the file as the editor has it; for a notebook cell,
    the notebook's code cells up to it as one module (the whole module is written to its
    path, so the report's lines and the trace can show its code)."""
    doc = ls.document(uri)
    if doc.notebook is None:
        return doc.path, doc.source
    try:
        doc.path.parent.mkdir(parents=True, exist_ok=True)
        doc.path.write_text(doc.source, encoding="utf-8")
    except OSError as e:
        raise JsonRpcInternalError(f"cannot write the notebook's module {doc.path}: {e}") from None
    return doc.path, doc.notebook.module(upto=uri).source


def _request_future(ls: KernelscopeServer) -> Any:
    """The future pygls cancels on $/cancelRequest for this executeCommand (it does not cancel
    the command's own coroutine, which runs under another id)."""
    msg_id = ls.protocol.msg_id
    futures: dict[Any, Any] = getattr(ls.protocol, "_request_futures", {})
    return futures.get(msg_id) if msg_id is not None else None


async def open_trace(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """Serve a run's trace once and ask the client to open Perfetto on it: on 127.0.0.1:9001
    for ui.perfetto.dev, or, where a UI build is configured, with that UI on 127.0.0.1:9002."""
    record = _record_from_args(ls, args)
    trace = Path(record.report.trace.path)
    if not trace.is_file():
        raise JsonRpcInvalidParams(f"the trace of run {record.run_id} is gone: {trace}")
    build, problems = perfetto.configured_ui(Path(record.path), ls.settings.perfetto_ui)
    for problem in problems:
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, problem))
    if build is not None:
        return await _open_in_local_ui(ls, build, trace)
    if ls.trace_server is not None:
        await ls.trace_server.close()
    try:
        ls.trace_server = await perfetto.serve_once(trace)
    except perfetto.PortInUse as e:
        ls.window_show_message(
            lsp.ShowMessageParams(
                lsp.MessageType.Warning,
                f"kernelscope: cannot serve the trace ({e}). Open https://ui.perfetto.dev and load "
                f"{trace}",
            )
        )
        return msgspec.to_builtins(OpenTraceReply(ok=False, url=None, path=str(trace)))
    return await _show_trace(ls, ls.trace_server.url, trace)


async def _open_in_local_ui(ls: KernelscopeServer, build: Path, trace: Path) -> dict[str, Any]:
    """Offer the trace to the local UI's server, started on `build` where it is not running."""
    ui = ls.ui_server
    if ui is not None and (ui.closed.is_set() or ui.build.source != build):
        await ui.close()
        ui = ls.ui_server = None
    if ui is None:
        try:
            ui = await perfetto.serve_ui(perfetto.UiBuild(build))
        except (perfetto.UiBuildError, perfetto.PortInUse) as e:
            what = (
                "use the Perfetto UI build of kernelscope.perfettoUi / [tool.kernelscope] "
                "perfetto_ui"
                if isinstance(e, perfetto.UiBuildError)
                else "serve the Perfetto UI"
            )
            ls.window_show_message(
                lsp.ShowMessageParams(
                    lsp.MessageType.Error, f"kernelscope: cannot {what} ({e}); the trace is {trace}"
                )
            )
            return msgspec.to_builtins(OpenTraceReply(ok=False, url=None, path=str(trace)))
        ls.ui_server = ui
    return await _show_trace(ls, ui.offer(trace), trace)


async def _show_trace(ls: KernelscopeServer, url: str, trace: Path) -> dict[str, Any]:
    """Ask the client to open `url`; where it cannot, show the URL and the trace's path."""
    shown = False
    if ls.supports_show_document():
        with contextlib.suppress(Exception):
            result = await ls.window_show_document_async(
                lsp.ShowDocumentParams(uri=url, external=True)
            )
            shown = bool(result and result.success)
    if not shown:
        ls.window_show_message(
            lsp.ShowMessageParams(lsp.MessageType.Info, f"kernelscope: open {url} (trace: {trace})")
        )
    return msgspec.to_builtins(OpenTraceReply(ok=True, url=url, path=str(trace), shown=shown))


async def import_trace(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """(uri, qualname, trace_path[, sidecar_path]): show a trace recorded elsewhere (another
    machine, CI, a fixture) as the function's last run; its sidecar is found beside it."""
    if len(args) not in (3, 4) or not all(isinstance(a, str) for a in args):
        raise JsonRpcInvalidParams(
            f"{IMPORT_TRACE} takes (uri, qualname, trace_path[, sidecar_path]) as strings"
        )
    from kernelscope.analysis.diagnose import SidecarError
    from kernelscope.analysis.trace_model import TraceError
    from kernelscope.engine.runner import JobFailed

    uri, qualname, trace = args[0], args[1], Path(args[2])
    sidecar = Path(args[3]) if len(args) == 4 else None
    path, source = runnable(ls, uri)
    for file in (trace, sidecar):
        if file is not None and not file.is_file():
            raise JsonRpcInvalidParams(f"no such file: {file}")
    reporter = ProgressReporter(ls, qualname, title=f"Importing {trace.name}")
    await reporter.begin("reading the trace", cancellable=False)
    outcome = "failed"
    try:
        size = fmt_bytes(trace.stat().st_size)
        record = await ls.service.import_trace(
            path, qualname, source, trace, sidecar, lambda share: reporter.read(share, size)
        )
        outcome = "imported"
    except (TargetError, TraceError, SidecarError) as e:
        raise JsonRpcInvalidParams(f"cannot import {trace.name}: {e}") from None
    except JobFailed as e:
        raise JsonRpcInternalError(f"cannot import {trace.name}: {e.failure.message}") from None
    finally:
        if outcome == "failed":
            ls.run_finished(uri, qualname, "failed")
        reporter.end(outcome)
    ls.publish(path)
    ls.run_finished(uri, qualname, "ok", record.run_id)
    verdict = record.report.verdict
    return msgspec.to_builtins(
        ImportTraceReply(
            ok=True,
            run_id=record.run_id,
            bound=verdict.bound if verdict else None,
            summary=verdict.summary if verdict else "",
        )
    )


def last_report(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """The last run's report as text and JSON: (run_id) or (uri[, qualname])."""
    from kernelscope.render.text import render_report

    record = _record_from_args(ls, args)
    reply = LastReportReply(
        run_id=record.run_id,
        text=render_report(record.report),
        report=msgspec.to_builtins(record.report),
    )
    return msgspec.to_builtins(reply)


def compare_runs(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """Compare with the previous run: (run_id) or (uri[, qualname]) → the per-op diff."""
    record = _record_from_args(ls, args)
    delta = ls.service.delta(record)
    previous = ls.service.store_for(Path(record.path)).previous(record)
    if delta is None or previous is None:
        raise JsonRpcInvalidParams(
            f"{record.qualname} has one run kept: profile it again to compare"
        )
    return msgspec.to_builtins(
        CompareReply(
            run_id=record.run_id,
            previous_run_id=previous.run_id,
            summary=delta.text,
            text=delta.table,
            comparison=msgspec.to_builtins(delta.comparison),
        )
    )


def _record_from_args(ls: KernelscopeServer, args: tuple[Any, ...]) -> RunRecord:
    """A run from (run_id), (uri, qualname) or (uri): the last of the function, else the file."""
    if not args:
        raise JsonRpcInvalidParams("expected a run id, or a document URI [and qualname]")
    first = args[0]
    if isinstance(first, str) and ":" not in first:
        record = ls.service.find_run(first)
        if record is None:
            raise JsonRpcInvalidParams(f"no run {first!r} (runs are kept under .kernelscope/)")
        return record
    doc = ls.document(first)
    path = doc.path
    store = ls.service.store_for(path)
    if len(args) > 1 and isinstance(args[1], str):
        record = store.latest(str(path), args[1])
    elif len(args) > 1 and isinstance(args[1], dict):  # a position: the function at the cursor
        pos: dict[str, Any] = args[1]  # pyright: ignore[reportUnknownVariableType]
        line = doc.module_line(lsp.Position(int(pos.get("line", 0)), 0))
        fn = function_at(doc.source, line)
        record = store.latest(str(path), fn.qualname) if fn else None
    else:
        record = None
    if record is None:
        runs = store.latest_in_file(str(path))
        record = max(runs, key=lambda r: r.created) if runs else None
    if record is None:
        raise JsonRpcInvalidParams(f"no profile of {path.name} yet: run Profile first")
    return record


def register(server: KernelscopeServer) -> None:
    """Register this module's handlers on `server`."""
    server.command(PROFILE)(profile)
    server.command(TRY)(try_variants)
    server.command(COMPARE)(compare_runs)
    server.command(OPEN_TRACE)(open_trace)
    server.command(IMPORT_TRACE)(import_trace)
    server.command(LAST_REPORT)(last_report)
