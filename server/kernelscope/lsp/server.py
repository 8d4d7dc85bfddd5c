"""The language server's state: settings, the job service (loaded after `initialize`),
failures to show, the Perfetto one-shot; what the client can do; a file's diagnostics."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import attrs
import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from kernelscope import __version__
from kernelscope.app import perfetto
from kernelscope.app.anchors import relocated
from kernelscope.app.settings import Settings
from kernelscope.findings import Code
from kernelscope.lsp import views as editor_views
from kernelscope.lsp.documents import (
    NOTEBOOK_SYNC,
    Document,
    Notebook,
    cell_document,
    file_path,
    notebook_of,
)
from kernelscope.lsp.rpc import KernelscopeProtocol
from kernelscope.notebooks import MODULES_DIR
from kernelscope.protocol import ProfileFailed
from kernelscope.pyfunctions import FunctionDef, functions

if TYPE_CHECKING:
    from kernelscope.analysis.experiments import Experiments
    from kernelscope.app.jobs import ProfileService
    from kernelscope.app.store import RunRecord


log = logging.getLogger(__name__)


#: The workspace/executeCommand commands (commands.py).
PROFILE = "kernelscope.profile"
OPEN_TRACE = "kernelscope.openTrace"
LAST_REPORT = "kernelscope.lastReport"
IMPORT_TRACE = "kernelscope.importTrace"
TRY = "kernelscope.try"
COMPARE = "kernelscope.compare"
MEMORY_FIT = "kernelscope.memoryFit"

#: The notification sent when a run ends, however it was started (commands.py): a client that
#: cannot take `workspace/codeLens/refresh` (Neovim 0.11) refreshes its lenses on it.
RUN_FINISHED = "kernelscope/runFinished"


class KernelscopeServer(LanguageServer):
    """The server and its state: settings, jobs, failures to show, the Perfetto one-shot."""

    def __init__(self) -> None:
        super().__init__(  # pyright: ignore[reportUnknownMemberType]
            "kernelscope",
            __version__,
            notebook_document_sync=NOTEBOOK_SYNC,
            protocol_cls=KernelscopeProtocol,
        )
        self.settings = Settings()
        self._service: ProfileService | None = None
        #: The last failure of each (path, qualname), with the function as it was then.
        self.failures: dict[tuple[str, str], tuple[ProfileFailed, FunctionDef]] = {}
        self.trace_server: perfetto.OneShot | None = None
        #: The local Perfetto UI (kernelscope.perfettoUi / [tool.kernelscope] perfetto_ui).
        self.ui_server: perfetto.UiServer | None = None
        #: The last experiment of each (path, qualname), with the function as it was then.
        self.experiments: dict[tuple[str, str], tuple[Experiments, FunctionDef]] = {}
        #: The notebook each notebook module (its path) was built from, by URI.
        self.notebooks: dict[str, str] = {}
        #: Polls the run folders for runs saved by other processes (lsp/watch.py), where the
        #: client cannot watch files.
        self.run_poll: asyncio.Task[None] | None = None

    @property
    def service(self) -> ProfileService:
        """Jobs, launchers and stores; imported on first use, after `initialize` was answered
        (the analysis modules are not needed to start, and start-up time counts)."""
        if self._service is None:
            from kernelscope.app.jobs import ProfileService

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

    def run_finished(
        self, uri: str, qualname: str, outcome: str, run_id: str | None = None
    ) -> None:
        """After a run's diagnostics were published: ask for fresh lenses and hints where the
        client can, and tell every client the run ended (`kernelscope/runFinished` with uri,
        qualname, outcome "ok" | "failed" | "cancelled" and the run's id)."""
        self.refresh_views()
        params = {"uri": uri, "qualname": qualname, "outcome": outcome, "runId": run_id}
        self.protocol.notify(RUN_FINISHED, params)

    # documents ----------------------------------------------------------------------------
    def source_of(self, uri: str) -> tuple[Path, str]:
        """The file's path and text as the editor has it (else as on disk)."""
        path = uri_to_path(uri)
        doc = self.workspace.text_documents.get(unquote(uri))
        if doc is not None:
            return path, doc.source
        try:
            return path, path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise JsonRpcInvalidParams(f"cannot read {path}: {e}") from None

    def document(self, uri: object) -> Document:
        """A Python file, or a code cell of a synced notebook; JsonRpcInvalidParams else."""
        if isinstance(uri, str) and not uri.startswith("file:"):
            notebook = self.notebook(uri)
            if notebook is not None:
                return cell_document(notebook, uri)
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams(f"expected a document URI, got {uri!r}")
        path, source = self.source_of(uri)
        return Document(uri, path, source)

    def notebook(self, uri: str) -> Notebook | None:
        """The synced notebook with URI `uri` or holding the cell `uri`, remembered by its
        module's path (so a run of that module is published to its cells)."""
        notebook = notebook_of(self.workspace, uri)
        if notebook is not None:
            self.notebooks[str(notebook.module_path)] = notebook.uri
        return notebook

    def publish(self, path: Path) -> None:
        """(Re)publish every kernelscope diagnostic of one file, or of a notebook's cells
        when `path` is a notebook's module."""
        notebook_uri = self.notebooks.get(str(path))
        if notebook_uri is not None:
            self._publish_notebook(path, notebook_uri)
            return
        if path.parent.name == MODULES_DIR and path.parent.parent.name == ".kernelscope":
            return  # a closed notebook's module: not a file the user edits
        uri = path.as_uri()
        try:
            _, source = self.source_of(uri)
        except JsonRpcInvalidParams:
            return
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=self._diagnostics(path, source))
        )

    def shown_runs(self, path: Path, source: str) -> list[RunRecord]:
        """The runs whose numbers the editor shows in one module: the latest of each function
        whose report touches it, unless that function was edited since (older runs are in
        history and `diff`), each with its lines where they are in `source` now."""
        current = {f.qualname: f for f in functions(source)}
        shown: list[RunRecord] = []
        for record in _records_touching(self.service.store_for(path).runs(), str(path)):
            fn = current.get(record.qualname) if record.path == str(path) else None
            if record.path == str(path) and (fn is None or fn.text_hash != record.text_hash):
                continue  # the function changed since the run: its numbers are stale
            shown.append(relocated(record, str(path), source))
        return shown

    def _publish_notebook(self, path: Path, notebook_uri: str) -> None:
        notebook = notebook_of(self.workspace, notebook_uri)
        if notebook is None:  # closed
            del self.notebooks[str(path)]
            return
        module = notebook.module()
        diags = self._diagnostics(path, module.source, notebook=True)
        if diags:
            diags += editor_views.note_diagnostics(module)
        for span in module.spans:
            doc = Document(span.uri, path, module.source, notebook, span)
            mine: list[lsp.Diagnostic] = []
            for d in diags:
                at = doc.to_editor(d.range)
                if at is not None:
                    mine.append(attrs.evolve(d, range=at))
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=span.uri, diagnostics=mine)
            )

    def _diagnostics(self, path: Path, source: str, notebook: bool = False) -> list[lsp.Diagnostic]:
        """The diagnostics of one module's runs, failures and experiments, at their lines in
        `source` now (a function moved since carries its findings along); for a `notebook`'s
        module, a failure may sit in any cell."""
        lines = source.splitlines()
        current = {f.qualname: f for f in functions(source)}
        options = editor_views.ViewOptions(top_lines=self.settings.top_lines)
        runs = [
            (
                record,
                editor_views.run_diagnostics(
                    record, str(path), lines, options, self.service.delta(record)
                ),
            )
            for record in self.shown_runs(path, source)
        ]
        diags = editor_views.one_per_line(runs, str(path))
        for (fpath, qualname), (failure, then) in self.failures.items():
            fn = current.get(qualname)
            if fpath == str(path) and fn is not None and fn.text_hash == then.text_hash:
                moved = _moved_failure(failure, path, then, fn)
                diags.append(failure_diagnostic(moved, fn, lines, notebook, path))
        for (fpath, qualname), (exp, then) in self.experiments.items():
            fn = current.get(qualname)
            if fpath == str(path) and fn is not None and fn.text_hash == then.text_hash:
                exp_now = _moved_experiments(exp, then, fn)
                diags += editor_views.experiment_diagnostics(exp_now, str(path), lines)
        return diags


uri_to_path = file_path


def _moved_failure(
    failure: ProfileFailed, path: Path, then: FunctionDef, now: FunctionDef
) -> ProfileFailed:
    """A failure at a line of the function, moved with the function (unchanged since)."""
    if failure.line is None or failure.path is None or Path(failure.path) != path:
        return failure
    if not then.contains(failure.line):
        return failure
    return msgspec.structs.replace(failure, line=failure.line + now.def_line - then.def_line)


def _moved_experiments(exp: Experiments, then: FunctionDef, now: FunctionDef) -> Experiments:
    """An experiment's def line and failed variants' lines, moved with its function."""
    shift = now.def_line - then.def_line
    if not shift:
        return exp
    variants = [
        msgspec.structs.replace(v, line=v.line + shift)
        if v.line is not None and v.path == exp.path and then.contains(v.line)
        else v
        for v in exp.variants
    ]
    line = exp.line + shift if exp.line is not None else None
    return msgspec.structs.replace(exp, line=line, variants=variants)


def _records_touching(runs: list[RunRecord], path: str) -> list[RunRecord]:
    """The newest run of each function whose report mentions `path`."""
    newest: dict[tuple[str, str], RunRecord] = {}
    for r in runs:
        if r.path == path or any(x.path == path for x in r.report.lines):
            newest[(r.path, r.qualname)] = r
    return list(newest.values())


def failure_diagnostic(
    failure: ProfileFailed,
    fn: FunctionDef,
    lines: list[str],
    anywhere: bool = False,
    path: Path | None = None,
) -> lsp.Diagnostic:
    """A failed job at the user's line in the function (the def line when the failure names
    none or a line outside it); with `anywhere`, at its line anywhere in the module `path`
    (a notebook's earlier cell that failed while the module was built)."""
    here = anywhere and failure.path is not None and Path(failure.path) == path
    inside = failure.line is not None and (here or fn.contains(failure.line))
    line = failure.line if failure.line and inside else fn.def_line
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    code = Code.MISSING_INPUTS if failure.kind == "missing_inputs" else Code.JOB_FAILED
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
