"""Serve a trace to Perfetto: to ui.perfetto.dev from http://127.0.0.1:9001, once; or, where a
UI build is configured (offline), the UI itself and the trace from http://127.0.0.1:9002.

ui.perfetto.dev may fetch plain-http traces only from 127.0.0.1:9001 (its CSP). The server
binds the loopback address alone, answers GET of the one file name with CORS for the UI,
404 for anything else (no listing, no traversal), and stops after one full fetch or after
`lifetime` seconds. The local UI's server (`serve_ui`) is described below.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kernelscope.engine.project import ProjectError, find_root, load_project, resolve_path

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
PORT = 9001
ORIGIN = "https://ui.perfetto.dev"


class PortInUse(Exception):
    """127.0.0.1:9001 is taken (another trace being served, say)."""


def ui_url(name: str, port: int = PORT) -> str:
    """The Perfetto UI deep link that loads `name` from the one-shot server."""
    return f"https://ui.perfetto.dev/#!/?url=http://{HOST}:{port}/{urllib.parse.quote(name)}"


@dataclass
class OneShot:
    """A running one-trace server; `done` resolves to True after a fetch, False on timeout."""

    path: Path
    name: str
    port: int
    done: asyncio.Future[bool]
    _server: asyncio.Server | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """Where the UI should fetch the trace from."""
        return ui_url(self.name, self.port)

    async def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if not self.done.done():
            self.done.set_result(False)


async def serve_once(path: Path, port: int = PORT, lifetime: float = 300.0) -> OneShot:
    """Start serving `path`; raises PortInUse when the port is taken."""
    loop = asyncio.get_running_loop()
    shot = OneShot(path, path.name, port, loop.create_future())

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            served = await _answer(reader, writer, shot)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            served = False
        finally:
            with contextlib.suppress(Exception):
                writer.close()
        if served and not shot.done.done():
            shot.done.set_result(True)
            loop.call_soon(lambda: asyncio.ensure_future(shot.close()))

    try:
        shot._server = await asyncio.start_server(handle, HOST, port)  # pyright: ignore[reportPrivateUsage]
    except OSError as e:
        raise PortInUse(f"{HOST}:{port} is in use ({e.strerror or e})") from None
    loop.call_later(lifetime, lambda: asyncio.ensure_future(shot.close()))
    log.info("serving %s at %s for one fetch", path, shot.url)
    return shot


async def _request_line(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The method and target of an HTTP request (its headers read and dropped)."""
    request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
    parts = request.split(b"\r\n", 1)[0].decode("latin-1").split()
    return (parts[0], parts[1]) if len(parts) >= 2 else ("", "")


async def _answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, shot: OneShot
) -> bool:
    method, target = await _request_line(reader)
    cors = f"Access-Control-Allow-Origin: {ORIGIN}\r\n"
    if method == "OPTIONS":
        writer.write(
            (
                f"HTTP/1.1 204 No Content\r\n{cors}Access-Control-Allow-Methods: GET\r\n"
                "Access-Control-Allow-Headers: *\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        return False
    wanted = urllib.parse.unquote(urllib.parse.urlsplit(target).path)
    if method not in ("GET", "HEAD") or wanted != "/" + shot.name:
        body = b"not found\n"
        writer.write(
            (
                f"HTTP/1.1 404 Not Found\r\n{cors}Content-Type: text/plain\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            + body
        )
        await writer.drain()
        return False
    data = shot.path.read_bytes()
    writer.write(
        (
            f"HTTP/1.1 200 OK\r\n{cors}Content-Type: application/octet-stream\r\n"
            f"Content-Length: {len(data)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        ).encode()
    )
    if method == "GET":
        writer.write(data)
    await writer.drain()
    return method == "GET"


# A local Perfetto UI ------------------------------------------------------------------------
#
# Offline, ui.perfetto.dev is out of reach: serve Perfetto's released UI build (the
# `perfetto-ui.zip` of a GitHub release, or that zip unpacked) and the trace from one server
# of our own. The build's layout (tools/release/package-ui-github-release-artifact):
# `index.html` and `service_worker.js` at the top, the bundles in `v<version>/`
# (`frontend_bundle.js`, `engine_bundle.js`, `trace_processor*.wasm`, `frontend.css`,
# `assets/`, `manifest.json`). The UI compiles its .wasm with `WebAssembly.compileStreaming`,
# which needs `application/wasm`; it fetches `/` and `/service_worker.js?v=<version>`; it
# fetches a `#!/?url=` trace on 127.0.0.1 with a plain GET, same origin here.

#: The local UI's port: not 9001, which the UI itself probes for trace_processor's RPC.
UI_PORT = 9002

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".wasm": "application/wasm",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
    ".txt": "text/plain; charset=utf-8",
}


class UiBuildError(Exception):
    """The configured Perfetto UI build cannot be used (missing, not a build, a bad zip)."""


def content_type(name: str) -> str:
    """The Content-Type of a UI file, by its extension."""
    return CONTENT_TYPES.get(PurePosixPath(name).suffix.lower(), "application/octet-stream")


class UiBuild:
    """Perfetto's UI build, read file by file from a folder or straight out of a zip."""

    def __init__(self, source: Path) -> None:
        """Open `source`; raises UiBuildError, saying why, when it is not a usable build."""
        self.source = source
        self._zip: zipfile.ZipFile | None = None
        self._names: frozenset[str] = frozenset()
        hint = (
            "point it at Perfetto's released UI (perfetto-ui.zip from a release on "
            "github.com/google/perfetto, or that zip unpacked)"
        )
        if source.is_dir():
            if not (source / "index.html").is_file():
                raise UiBuildError(f"{source} has no index.html at its top: {hint}")
        elif source.is_file():
            try:
                self._zip = zipfile.ZipFile(source)
            except (zipfile.BadZipFile, OSError) as e:
                raise UiBuildError(f"{source} is not a readable zip ({e}): {hint}") from None
            self._names = frozenset(self._zip.namelist())
            if "index.html" not in self._names:
                self._zip.close()
                raise UiBuildError(f"{source} has no index.html at its top: {hint}")
        else:
            raise UiBuildError(f"{source} does not exist: {hint}")

    def read(self, name: str) -> bytes | None:
        """The file at `name` (relative, '/'-separated), or None where there is none."""
        parts = name.split("/")
        if any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
            return None
        if self._zip is not None:
            if name not in self._names:
                return None
            try:
                return self._zip.read(name)
            except (zipfile.BadZipFile, OSError, KeyError) as e:
                log.warning("cannot read %s from %s: %s", name, self.source, e)
                return None
        root = self.source.resolve()
        path = (root / name).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return None
        try:
            return path.read_bytes()
        except OSError as e:
            log.warning("cannot read %s: %s", path, e)
            return None

    def close(self) -> None:
        """Let go of the zip, if any."""
        if self._zip is not None:
            self._zip.close()


@dataclass
class _Offered:
    path: Path
    until: float


@dataclass
class UiServer:
    """The UI build and the traces offered to it, from http://127.0.0.1:`port`. The UI's files
    are served while the UI is in use (until `idle` seconds pass without a request); each
    trace until it was fetched once or `lifetime` seconds passed; anything else is a 404."""

    build: UiBuild
    port: int
    lifetime: float = 300.0
    idle: float = 1800.0
    traces: dict[str, _Offered] = field(default_factory=dict[str, _Offered])
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    last_request: float = 0.0
    """The event loop's time of the last request (or offer)."""
    watch: asyncio.Future[None] | None = field(default=None, repr=False)
    _server: asyncio.Server | None = field(default=None, repr=False)

    def offer(self, path: Path) -> str:
        """Serve `path` (once) and return the UI's link that loads it."""
        loop = asyncio.get_running_loop()
        self.traces[path.name] = _Offered(path, loop.time() + self.lifetime)
        self.last_request = loop.time()
        return local_ui_url(path.name, self.port)

    async def close(self) -> None:
        """Stop serving and let go of the build."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        self.build.close()
        self.closed.set()

    def trace_at(self, name: str, now: float) -> Path | None:
        """The trace offered as `name`, unless it expired."""
        offered = self.traces.get(name)
        if offered is None or offered.until < now:
            self.traces.pop(name, None)
            return None
        return offered.path

    async def stop_when_idle(self) -> None:
        """Close once `idle` seconds pass without a request."""
        loop = asyncio.get_running_loop()
        while not self.closed.is_set():
            left = self.last_request + self.idle - loop.time()
            if left <= 0:
                log.info("the Perfetto UI on port %d was idle %.0f s: stop", self.port, self.idle)
                await self.close()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closed.wait(), left)


def configured_ui(source: Path, setting: str | None) -> tuple[Path | None, list[str]]:
    """The UI build configured for the project of `source` (a profiled file): the editor's
    `setting`, else [tool.kernelscope] perfetto_ui, relative to the project root; None where
    neither is set. Also what was wrong with the project's value, if anything."""
    try:
        project = load_project(source)
    except ProjectError as e:
        problems = [f"{e}; its perfetto_ui is not read"]
        root = find_root(source)
        configured = None
    else:
        problems = list(project.problems)
        root = project.root
        configured = project.perfetto_ui
    if setting is not None:
        return resolve_path(root, setting), problems
    return configured, problems


def local_ui_url(name: str, port: int = UI_PORT) -> str:
    """The local UI's deep link that loads `name` from the same server."""
    trace = f"http://{HOST}:{port}/{urllib.parse.quote(name)}"
    return f"http://{HOST}:{port}/#!/?url={trace}"


async def serve_ui(
    build: UiBuild, port: int = UI_PORT, lifetime: float = 300.0, idle: float = 1800.0
) -> UiServer:
    """Start serving the UI `build` on 127.0.0.1:`port`; raises PortInUse when it is taken."""
    loop = asyncio.get_running_loop()
    ui = UiServer(build, port, lifetime, idle, last_request=loop.time())

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ui.last_request = loop.time()
        try:
            await _answer_ui(reader, writer, ui)
        except (
            ConnectionError,
            TimeoutError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    try:
        ui._server = await asyncio.start_server(handle, HOST, port)  # pyright: ignore[reportPrivateUsage]
    except OSError as e:
        raise PortInUse(f"{HOST}:{port} is in use ({e.strerror or e})") from None
    ui.watch = asyncio.ensure_future(ui.stop_when_idle())
    log.info("serving the Perfetto UI in %s at http://%s:%d/", build.source, HOST, port)
    return ui


async def _answer_ui(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ui: UiServer
) -> None:
    method, target = await _request_line(reader)
    wanted = urllib.parse.unquote(urllib.parse.urlsplit(target).path)
    name = wanted.removeprefix("/")
    if name == "" or name.endswith("/"):
        name += "index.html"
    body: bytes | None = None
    kind = "application/octet-stream"
    trace: Path | None = None
    if method in ("GET", "HEAD"):
        trace = ui.trace_at(name, asyncio.get_running_loop().time())
        if trace is not None:
            try:
                body = await asyncio.to_thread(trace.read_bytes)
            except OSError as e:
                log.warning("cannot read the trace %s: %s", trace, e)
        else:
            body = await asyncio.to_thread(ui.build.read, name)
            kind = content_type(name)
    if body is None:
        status, body, kind = "404 Not Found", b"not found\n", "text/plain"
    else:
        status = "200 OK"
    writer.write(
        (
            f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
    )
    if method == "GET":
        writer.write(body)
    await writer.drain()
    if trace is not None and method == "GET" and status == "200 OK":
        ui.traces.pop(name, None)  # served once
