"""What changes outside the editor: runs saved by another process (`kernelscope profile`, the
MCP server) and files edited on disk. Watched through the client
(workspace/didChangeWatchedFiles, registered where the client can), else the stores' run
folders are polled; either way new runs are published as the editor's own are."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from kernelscope.lsp.server import KernelscopeServer, uri_to_path

log = logging.getLogger(__name__)

#: How often the run folders are looked at when the client cannot watch files (seconds).
POLL_S = 1.0
RUNS_GLOB = "**/.kernelscope/runs/*.json"
SOURCES_GLOB = "**/*.py"


def can_watch(ls: KernelscopeServer) -> bool:
    """workspace.didChangeWatchedFiles.dynamicRegistration."""
    ws = ls.client_capabilities.workspace
    watched = ws.did_change_watched_files if ws else None
    return bool(watched and watched.dynamic_registration)


async def start(ls: KernelscopeServer) -> None:
    """Ask the client to watch the run records and Python files, else poll the run folders."""
    if can_watch(ls):
        watchers = [lsp.FileSystemWatcher(glob_pattern=g) for g in (RUNS_GLOB, SOURCES_GLOB)]
        registration = lsp.Registration(
            id="kernelscope-watch",
            method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        try:
            await ls.client_register_capability_async(lsp.RegistrationParams([registration]))
            return
        except Exception as e:  # the client refused: poll instead
            log.warning("client/registerCapability failed, polling the runs: %s", e)
    ls.run_poll = asyncio.ensure_future(_poll(ls))


async def stop(ls: KernelscopeServer) -> None:
    """Stop polling."""
    if ls.run_poll is not None:
        ls.run_poll.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ls.run_poll
        ls.run_poll = None


async def _poll(ls: KernelscopeServer) -> None:
    seen: dict[Path, int] = {}
    while True:
        await asyncio.sleep(POLL_S)
        changed = False
        for store in list(ls.service.stores.values()):
            try:
                mtime = store.runs_dir.stat().st_mtime_ns
            except OSError:
                mtime = 0
            if seen.get(store.runs_dir) != mtime:  # a store seen first: read since it loaded
                changed = True
            seen[store.runs_dir] = mtime
        if changed:
            take_new_runs(ls)


def take_new_runs(ls: KernelscopeServer) -> None:
    """Read the runs other processes saved; publish each as a run from the editor is, and
    tell the client it finished (lenses and hints refresh)."""
    for store in list(ls.service.stores.values()):
        for record in store.reload():
            files = {Path(record.path)} | {Path(r.path) for r in record.report.lines}
            for file in files:
                ls.publish(file)
            ls.run_finished(Path(record.path).as_uri(), record.qualname, "ok", record.run_id)


def did_change_watched_files(
    ls: KernelscopeServer, params: lsp.DidChangeWatchedFilesParams
) -> None:
    """Runs saved elsewhere: published; Python files changed on disk: their runs' lines found
    again (an open file's buffer stays what counts)."""
    runs = False
    for change in params.changes:
        if "/.kernelscope/runs/" in change.uri:
            runs = True
            continue
        with contextlib.suppress(JsonRpcInvalidParams):
            path = uri_to_path(change.uri)
            if _has_runs(ls, path):
                ls.publish(path)
    if runs:
        take_new_runs(ls)


def _has_runs(ls: KernelscopeServer, path: Path) -> bool:
    """Whether some kept run names `path` (others need no diagnostics)."""
    name = str(path)
    return any(
        r.path == name or any(x.path == name for x in r.report.lines)
        for store in ls.service.stores.values()
        for r in store.runs()
    )


def register(server: KernelscopeServer) -> None:
    """Register this module's handlers on `server`."""
    server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
