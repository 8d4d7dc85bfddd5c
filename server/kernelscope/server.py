"""`kernelscope serve`: the language server (pygls 2, LSP over stdio). Never imports torch.

Handlers are thin: find the document and the function, ask ProfileService or the store,
and turn results into lsprotocol types with editor_views.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import logging
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlparse

import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from kernelscope import __version__, editor_views, perfetto
from kernelscope.protocol import JobProgress, ProfileFailed
from kernelscope.pyfunctions import FunctionDef, find, function_at, functions, provider_stub
from kernelscope.settings import Settings, parse_settings
from kernelscope.targets import Schedule, TargetError
from kernelscope.units import fmt_bytes

if TYPE_CHECKING:
    from kernelscope.profiling import ProfileService
    from kernelscope.store import RunRecord

log = logging.getLogger(__name__)

PROFILE = "kernelscope.profile"
OPEN_TRACE = "kernelscope.openTrace"
LAST_REPORT = "kernelscope.lastReport"
IMPORT_TRACE = "kernelscope.importTrace"
MISSING_INPUTS = "KS001"
JOB_FAILED = "KS002"
STAGES = {
    "import": (5, "importing"),
    "inputs": (10, "building inputs"),
    "cold": (15, "cold call"),
    "timing": (20, "unprofiled timing"),
    "wait": (25, "wait"),
    "warmup": (35, "warmup"),
    "active": (50, "active"),
    "export": (75, "exporting the trace"),
    "lines": (85, "line attribution"),
    "clean_timing": (90, "timing in a worker that never profiled"),
    "analysis": (95, "analysis"),
}


class KernelscopeServer(LanguageServer):
    """The server and its state: settings, jobs, failures to show, the Perfetto one-shot."""

    def __init__(self) -> None:
        super().__init__("kernelscope", __version__)  # pyright: ignore[reportUnknownMemberType]
        self.settings = Settings()
        self._service: ProfileService | None = None
        self.failures: dict[tuple[str, str], tuple[ProfileFailed, str]] = {}
        self.trace_server: perfetto.OneShot | None = None

    @property
    def service(self) -> ProfileService:
        """Jobs, launchers and stores; imported on first use, after `initialize` was answered
        (the analysis modules are not needed to start, and start-up time counts)."""
        if self._service is None:
            from kernelscope.profiling import ProfileService

            self._service = ProfileService()
        return self._service

    # client capabilities --------------------------------------------------------------
    def _caps(self) -> lsp.ClientCapabilities:
        return self.client_capabilities

    def supports_progress(self) -> bool:
        """window.workDoneProgress."""
        window = self._caps().window
        return bool(window and window.work_done_progress)

    def supports_show_document(self) -> bool:
        """window.showDocument.support."""
        window = self._caps().window
        return bool(window and window.show_document and window.show_document.support)

    def supports_configuration(self) -> bool:
        """workspace.configuration."""
        ws = self._caps().workspace
        return bool(ws and ws.configuration)

    def refresh_views(self) -> None:
        """Ask the client to re-request lenses and inlay hints, where it can."""
        ws = self._caps().workspace
        if ws and ws.code_lens and ws.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)
        if ws and ws.inlay_hint and ws.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)

    # documents ----------------------------------------------------------------------------
    def source_of(self, uri: str) -> tuple[Path, str]:
        """The file's path and text as the editor has it (else as on disk)."""
        path = uri_to_path(uri)
        doc = self.workspace.text_documents.get(uri)
        if doc is not None:
            return path, doc.source
        try:
            return path, path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise JsonRpcInvalidParams(f"cannot read {path}: {e}") from None

    def publish(self, path: Path) -> None:
        """(Re)publish every kernelscope diagnostic of one file."""
        uri = path.as_uri()
        try:
            _, source = self.source_of(uri)
        except JsonRpcInvalidParams:
            return
        lines = source.splitlines()
        current = {f.qualname: f for f in functions(source)}
        diags: list[lsp.Diagnostic] = []
        store = self.service.store_for(path)
        options = editor_views.ViewOptions(top_lines=self.settings.top_lines)
        for record in _records_touching(store.runs(), str(path)):
            fn = current.get(record.qualname) if record.path == str(path) else None
            if record.path == str(path) and (fn is None or fn.text_hash != record.text_hash):
                continue  # the function changed since the run: its numbers are stale
            diags += editor_views.run_diagnostics(record, str(path), lines, options)
        for (fpath, qualname), (failure, text_hash) in self.failures.items():
            fn = current.get(qualname)
            if fpath == str(path) and fn is not None and fn.text_hash == text_hash:
                diags.append(failure_diagnostic(failure, fn, lines))
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags)
        )


server = KernelscopeServer()


def uri_to_path(uri: object) -> Path:
    """A file: URI of a Python file as a path; JsonRpcInvalidParams otherwise."""
    if not isinstance(uri, str) or not uri.startswith("file:"):
        raise JsonRpcInvalidParams(f"expected a file: URI, got {uri!r}")
    path = Path(unquote(urlparse(uri).path))
    if path.suffix not in (".py", ".pyi"):
        raise JsonRpcInvalidParams(f"{path.name} is not a Python file")
    return path


def _records_touching(runs: list[RunRecord], path: str) -> list[RunRecord]:
    """The newest run of each function whose report mentions `path`."""
    newest: dict[tuple[str, str], RunRecord] = {}
    for r in runs:
        if r.path == path or any(x.path == path for x in r.report.lines):
            newest[(r.path, r.qualname)] = r
    return list(newest.values())


def failure_diagnostic(failure: ProfileFailed, fn: FunctionDef, lines: list[str]) -> lsp.Diagnostic:
    """A failed job at the user's line (the def line when the failure names none)."""
    line = failure.line if failure.line and fn.contains(failure.line) else fn.def_line
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    code = MISSING_INPUTS if failure.kind == "missing_inputs" else JOB_FAILED
    return lsp.Diagnostic(
        range=lsp.Range(
            lsp.Position(line - 1, len(text) - len(text.lstrip())),
            lsp.Position(line - 1, len(text)),
        ),
        message=f"profile failed: {failure.message}",
        severity=lsp.DiagnosticSeverity.Error,
        code=code,
        source=editor_views.SOURCE,
        data={"qualname": fn.qualname, "kind": failure.kind},
    )


# --- lifecycle and settings -------------------------------------------------------------


@server.feature(lsp.INITIALIZED)
async def initialized(ls: KernelscopeServer, params: lsp.InitializedParams) -> None:
    """Read the settings, then warm a worker so the first profile is fast."""
    del params
    await load_settings(ls)
    ls.service.launcher(ls.settings.worker_python)


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(
    ls: KernelscopeServer, params: lsp.DidChangeConfigurationParams
) -> None:
    """Settings changed: re-read them (pushed settings are used when the client cannot pull)."""
    raw: object = params.settings
    pushed = cast(dict[str, object], raw).get("kernelscope") if isinstance(raw, dict) else None
    await load_settings(ls, pushed)


async def load_settings(ls: KernelscopeServer, pushed: object = None) -> None:
    """Pull the `kernelscope` section (or take the pushed one); bad values fall back."""
    raw: object = pushed
    if raw is None and ls.supports_configuration():
        try:
            result = await ls.workspace_configuration_async(
                lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section="kernelscope")])
            )
            raw = result[0] if result else None
        except Exception as e:  # the client failed the request: keep the defaults
            log.warning("workspace/configuration failed: %s", e)
    settings, problems = parse_settings(raw)
    ls.settings = settings
    ls.service.settings = settings
    for problem in problems:
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, problem))


@server.feature(lsp.SHUTDOWN)
async def shutdown(ls: KernelscopeServer, params: None) -> None:
    """Stop workers and the trace server."""
    del params
    if ls.trace_server is not None:
        await ls.trace_server.close()
    await ls.service.close()


# --- documents -----------------------------------------------------------------------------


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: KernelscopeServer, params: lsp.DidOpenTextDocumentParams) -> None:
    """Show the last runs of the file's functions (they survive restarts)."""
    _republish(ls, params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: KernelscopeServer, params: lsp.DidChangeTextDocumentParams) -> None:
    """Drop the diagnostics of functions whose text changed since their run."""
    _republish(ls, params.text_document.uri)


def _republish(ls: KernelscopeServer, uri: str) -> None:
    with contextlib.suppress(JsonRpcInvalidParams):
        ls.publish(uri_to_path(uri))


# --- code actions ----------------------------------------------------------------------------


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.Source, lsp.CodeActionKind.QuickFix],
        resolve_provider=False,
    ),
)
def code_actions(
    ls: KernelscopeServer, params: lsp.CodeActionParams
) -> list[lsp.CodeAction] | None:
    """ "Profile `fn`" (and "Profile `fn` on NAME" per remote) inside any function;
    "Create `fn_inputs()`" on missing inputs."""
    uri = params.text_document.uri
    try:
        _, source = ls.source_of(uri)
        path = uri_to_path(uri)
    except JsonRpcInvalidParams:
        return None
    fn = function_at(source, params.range.start.line + 1)
    actions: list[lsp.CodeAction] = []
    only = params.context.only
    if fn is not None:
        targets: list[tuple[str, list[Any]]] = [(f"Profile `{fn.qualname}`", [uri, fn.qualname])]
        targets += [
            (f"Profile `{fn.qualname}` on {name}", [uri, fn.qualname, {"remote": name}])
            for name in ls.service.remote_names(path)
        ]
        for kind in (lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Source):
            if only and not any(kind.value.startswith(_kind_value(o)) for o in only):
                continue
            actions += [
                lsp.CodeAction(
                    title, kind=kind, command=lsp.Command(title, PROFILE, arguments=arguments)
                )
                for title, arguments in targets
            ]
    for diag in params.context.diagnostics:
        data: object = diag.data
        if diag.code == MISSING_INPUTS and isinstance(data, dict):
            target = find(source, str(cast(dict[str, object], data).get("qualname")))
            if target is not None:
                actions.append(_create_inputs_action(uri, source, target, diag))
    return actions or None


def _kind_value(kind: object) -> str:
    """A code action kind as its wire string ("source"), whether it arrived as str or enum."""
    return str(kind.value) if isinstance(kind, lsp.CodeActionKind) else str(kind)


def _create_inputs_action(
    uri: str, source: str, fn: FunctionDef, diag: lsp.Diagnostic
) -> lsp.CodeAction:
    """Insert a provider stub after the function (after its class, for a method)."""
    lines = source.splitlines()
    end = _class_end(source, fn) if fn.is_method else fn.end_line
    stub = provider_stub(fn)
    if end < len(lines) or source.endswith("\n"):
        at = lsp.Position(end, 0)
    else:  # the function ends the file, with no final newline
        at = lsp.Position(end - 1, len(lines[-1]))
        stub = "\n" + stub
    edits = [lsp.TextEdit(lsp.Range(at, at), stub)]
    if "torch." in stub and not re.search(r"^\s*(import torch|from torch)", source, re.M):
        top = lsp.Position(0, 0)
        edits.insert(0, lsp.TextEdit(lsp.Range(top, top), "import torch\n"))
    name = fn.qualname.replace(".", "_") + "_inputs"
    return lsp.CodeAction(
        f"Create `{name}()`",
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag],
        edit=lsp.WorkspaceEdit(changes={uri: edits}),
        is_preferred=True,
    )


def _class_end(source: str, fn: FunctionDef) -> int:
    """The last line of the top-level class that holds method `fn`."""
    owner = fn.qualname.split(".")[0]
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return fn.end_line
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == owner:
            return node.end_lineno or fn.end_line
    return fn.end_line


# --- the profile command ---------------------------------------------------------------------


@server.command(PROFILE)
async def profile(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """Profile (uri, qualname[, options]): progress while it runs, then diagnostics and views.
    options.remote names a remote to run on."""
    uri, qualname, options = _profile_args(args)
    path, source = ls.source_of(uri)
    fn = find(source, qualname)
    if fn is None:
        raise JsonRpcInvalidParams(f"{path.name} has no function {qualname!r}")
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
    from kernelscope.launcher import JobFailed
    from kernelscope.profiling import ProfileSpec

    spec = ProfileSpec(
        path=path,
        qualname=qualname,
        source=source,
        device=str(options.get("device", s.device)),
        schedule=schedule,
        timeout=float(options.get("timeout", s.timeout)),
        python=s.worker_python,
        remote=remote,
    )
    request_future = _request_future(ls)
    reporter = ProgressReporter(ls, f"{qualname} on {remote}" if remote else qualname)
    await reporter.begin()
    task = asyncio.ensure_future(ls.service.profile(spec, reporter.on_progress))
    reporter.link(task)
    if request_future is not None:
        request_future.add_done_callback(lambda f: _cancel_if(f, task))  # pyright: ignore[reportUnknownLambdaType]
    key = (str(path), qualname)
    try:
        record = await task
    except asyncio.CancelledError:
        reporter.end("cancelled")
        return {"ok": False, "cancelled": True}
    except JobFailed as e:
        ls.failures[key] = (e.failure, fn.text_hash)
        ls.publish(path)
        reporter.end(f"failed: {e.failure.message}")
        ls.window_show_message(
            lsp.ShowMessageParams(
                lsp.MessageType.Error, f"kernelscope: {qualname}: {e.failure.message}"
            )
        )
        return {
            "ok": False,
            "error": {
                "kind": e.failure.kind,
                "message": e.failure.message,
                "path": e.failure.path,
                "line": e.failure.line,
            },
        }
    except TargetError as e:
        reporter.end(f"failed: {e}")
        raise JsonRpcInvalidParams(str(e)) from None
    ls.failures.pop(key, None)
    ls.publish(path)
    for other in {Path(r.path) for r in record.report.lines} - {path}:
        ls.publish(other)
    ls.refresh_views()
    verdict = record.report.verdict
    reporter.end(verdict.summary if verdict else "done")
    return {
        "ok": True,
        "run_id": record.run_id,
        "bound": verdict.bound if verdict else None,
        "summary": verdict.summary if verdict else "",
        "trace": record.report.trace.path,
    }


def _profile_args(args: tuple[Any, ...]) -> tuple[str, str, dict[str, Any]]:
    if len(args) < 2 or len(args) > 3:
        raise JsonRpcInvalidParams(
            f"{PROFILE} takes (uri, qualname[, options]), got {len(args)} argument(s)"
        )
    uri, qualname = args[0], args[1]
    options: object = args[2] if len(args) == 3 else {}
    uri_to_path(uri)
    if not isinstance(qualname, str) or not all(p.isidentifier() for p in qualname.split(".")):
        raise JsonRpcInvalidParams(f"qualname must be like fn or Class.method, got {qualname!r}")
    if not isinstance(options, dict):
        raise JsonRpcInvalidParams(f"options must be an object, got {type(options).__name__}")
    return uri, qualname, dict(options)  # pyright: ignore[reportUnknownArgumentType]


def _cancel_if(done: Any, task: asyncio.Future[Any]) -> None:
    """A done-callback: cancel `task` when `done` (a request or progress future) was cancelled."""
    if done.cancelled():
        task.cancel()


def _request_future(ls: KernelscopeServer) -> Any:
    """The future pygls cancels on $/cancelRequest for this executeCommand (it does not cancel
    the command's own coroutine, which runs under another id)."""
    msg_id = ls.protocol.msg_id
    futures: dict[Any, Any] = getattr(ls.protocol, "_request_futures", {})
    return futures.get(msg_id) if msg_id is not None else None


class ProgressReporter:
    """Work-done progress for one job, cancellable from the client."""

    def __init__(self, ls: KernelscopeServer, qualname: str, title: str = "") -> None:
        self.ls = ls
        self.qualname = qualname
        self.title = title or f"Profiling {qualname}"
        self.token: str | None = None

    async def begin(self, message: str = "starting the worker", cancellable: bool = True) -> None:
        """Create the token and send `begin`; no-op for clients without progress."""
        if not self.ls.supports_progress():
            return
        token = f"kernelscope-{uuid.uuid4().hex[:8]}"
        try:
            await self.ls.work_done_progress.create_async(token)  # pyright: ignore[reportUnknownMemberType]
        except Exception as e:
            log.warning("progress create failed: %s", e)
            return
        self.token = token
        self.ls.work_done_progress.begin(
            token,
            lsp.WorkDoneProgressBegin(
                title=self.title,
                message=message,
                percentage=0,
                cancellable=cancellable,
            ),
        )

    def link(self, task: asyncio.Future[Any]) -> None:
        """Cancel `task` when the client cancels the progress."""
        if self.token is None:
            return
        tokens: dict[Any, Any] = self.ls.work_done_progress.tokens  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        future = tokens.get(self.token)
        if future is not None:
            future.add_done_callback(lambda f: _cancel_if(f, task))  # pyright: ignore[reportUnknownLambdaType]

    def on_progress(self, msg: JobProgress) -> None:
        """Launcher callback: a stage as a percentage and a message."""
        if self.token is None:
            return
        base, label = STAGES.get(msg.stage, (50, msg.stage))
        if msg.total:
            label = f"{label} {msg.step}/{msg.total}"
        self.ls.work_done_progress.report(
            self.token, lsp.WorkDoneProgressReport(message=label, percentage=base, cancellable=True)
        )

    def read(self, share: float, size: str) -> None:
        """A trace being read: the share of its file, as a percentage."""
        if self.token is None:
            return
        percent = round(share * 100)
        self.ls.work_done_progress.report(
            self.token,
            lsp.WorkDoneProgressReport(
                message=f"reading the trace: {percent}% of {size}" if share < 1 else "analyzing",
                percentage=percent,
            ),
        )

    def end(self, message: str) -> None:
        """Send `end`."""
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.token = None


# --- views: hover, lenses, inlay hints -----------------------------------------------------


def _fresh_record(ls: KernelscopeServer, path: Path, fn: FunctionDef) -> RunRecord | None:
    record = ls.service.store_for(path).latest(str(path), fn.qualname)
    return record if record is not None and record.text_hash == fn.text_hash else None


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: KernelscopeServer, params: lsp.HoverParams) -> lsp.Hover | None:
    """The last run of the function under the cursor, on its def line or attributed lines."""
    try:
        path = uri_to_path(params.text_document.uri)
        _, source = ls.source_of(params.text_document.uri)
    except JsonRpcInvalidParams:
        return None
    line = params.position.line + 1
    fn = function_at(source, line)
    if fn is None:
        return None
    record = _fresh_record(ls, path, fn)
    if record is None:
        return None
    attributed = any(r.line == line and r.path == str(path) for r in record.report.lines)
    if line != fn.def_line and not attributed:
        return None
    return lsp.Hover(
        contents=lsp.MarkupContent(
            lsp.MarkupKind.Markdown, editor_views.hover_markdown(record, line)
        )
    )


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: KernelscopeServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens] | None:
    """ "▶ Profile" on every def; the last run's headline beside it."""
    try:
        path = uri_to_path(params.text_document.uri)
        _, source = ls.source_of(params.text_document.uri)
    except JsonRpcInvalidParams:
        return None
    uri = params.text_document.uri
    store = ls.service.store_for(path)
    lenses: list[lsp.CodeLens] = []
    for fn in functions(source):
        at = lsp.Range(lsp.Position(fn.def_line - 1, 0), lsp.Position(fn.def_line - 1, 0))
        lenses.append(
            lsp.CodeLens(at, lsp.Command("▶ Profile", PROFILE, arguments=[uri, fn.qualname]))
        )
        record = store.latest(str(path), fn.qualname)
        if record is None:
            continue
        title = editor_views.lens_title(record)
        if record.text_hash != fn.text_hash:
            title = f"{title} (stale: edited since)"
        lenses.append(lsp.CodeLens(at, lsp.Command(title, OPEN_TRACE, arguments=[record.run_id])))
    return lenses


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
def inlay_hint(ls: KernelscopeServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint] | None:
    """Each attributed line's share of the function's CUDA and CPU time, at its end."""
    try:
        path = uri_to_path(params.text_document.uri)
        _, source = ls.source_of(params.text_document.uri)
    except JsonRpcInvalidParams:
        return None
    lines = source.splitlines()
    hints: list[lsp.InlayHint] = []
    first, last = params.range.start.line + 1, params.range.end.line + 1
    for fn in functions(source):
        if fn.end_line < first or fn.def_line > last:
            continue
        record = _fresh_record(ls, path, fn)
        if record is not None:
            hints += editor_views.inlay_hints(record, fn, str(path), lines)
    return hints


# --- Perfetto and reports --------------------------------------------------------------------


@server.command(OPEN_TRACE)
async def open_trace(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """Serve a run's trace once on 127.0.0.1:9001 and ask the client to open Perfetto on it."""
    record = _record_from_args(ls, args)
    trace = Path(record.report.trace.path)
    if not trace.is_file():
        raise JsonRpcInvalidParams(f"the trace of run {record.run_id} is gone: {trace}")
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
        return {"ok": False, "url": None, "path": str(trace)}
    url = ls.trace_server.url
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
    return {"ok": True, "url": url, "path": str(trace), "shown": shown}


@server.command(IMPORT_TRACE)
async def import_trace(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """(uri, qualname, trace_path[, sidecar_path]): show a trace recorded elsewhere (another
    machine, CI, a fixture) as the function's last run; its sidecar is found beside it."""
    if len(args) not in (3, 4) or not all(isinstance(a, str) for a in args):
        raise JsonRpcInvalidParams(
            f"{IMPORT_TRACE} takes (uri, qualname, trace_path[, sidecar_path]) as strings"
        )
    from kernelscope.diagnose import SidecarError
    from kernelscope.launcher import JobFailed
    from kernelscope.trace_model import TraceError

    uri, qualname, trace = args[0], args[1], Path(args[2])
    sidecar = Path(args[3]) if len(args) == 4 else None
    path, source = ls.source_of(uri)
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
        reporter.end(outcome)
    ls.publish(path)
    ls.refresh_views()
    verdict = record.report.verdict
    return {
        "ok": True,
        "run_id": record.run_id,
        "bound": verdict.bound if verdict else None,
        "summary": verdict.summary if verdict else "",
    }


@server.command(LAST_REPORT)
def last_report(ls: KernelscopeServer, *args: Any) -> dict[str, Any]:
    """The last run's report as text and JSON: (run_id) or (uri[, qualname])."""
    from kernelscope.render_text import render_report

    record = _record_from_args(ls, args)
    return {
        "run_id": record.run_id,
        "text": render_report(record.report),
        "report": msgspec.to_builtins(record.report),
    }


def _record_from_args(ls: KernelscopeServer, args: tuple[Any, ...]) -> RunRecord:
    """A run from (run_id), (uri, qualname) or (uri): the last of the function, else the file."""
    if not args:
        raise JsonRpcInvalidParams("expected a run id, or a document URI [and qualname]")
    first = args[0]
    if isinstance(first, str) and not first.startswith("file:"):
        record = ls.service.find_run(first)
        if record is None:
            raise JsonRpcInvalidParams(f"no run {first!r} (runs are kept under .kernelscope/)")
        return record
    path = uri_to_path(first)
    store = ls.service.store_for(path)
    if len(args) > 1 and isinstance(args[1], str):
        record = store.latest(str(path), args[1])
    elif len(args) > 1 and isinstance(args[1], dict):  # a position: the function at the cursor
        pos: dict[str, Any] = args[1]  # pyright: ignore[reportUnknownVariableType]
        _, source = ls.source_of(first)
        fn = function_at(source, int(pos.get("line", 0)) + 1)
        record = store.latest(str(path), fn.qualname) if fn else None
    else:
        record = None
    if record is None:
        runs = store.latest_in_file(str(path))
        record = max(runs, key=lambda r: r.created) if runs else None
    if record is None:
        raise JsonRpcInvalidParams(f"no profile of {path.name} yet: run Profile first")
    return record


def main() -> None:
    """Serve LSP on stdio."""
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    # pygls logs every JSON-RPC message, bodies included, at INFO: too much for an output channel
    logging.getLogger("pygls").setLevel(logging.WARNING)
    server.start_io()
