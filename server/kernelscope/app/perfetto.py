"""Serve one trace to ui.perfetto.dev from http://127.0.0.1:9001, once.

ui.perfetto.dev may fetch plain-http traces only from 127.0.0.1:9001 (its CSP). The server
binds the loopback address alone, answers GET of the one file name with CORS for the UI,
404 for anything else (no listing, no traversal), and stops after one full fetch or after
`lifetime` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

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


async def _answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, shot: OneShot
) -> bool:
    request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
    first = request.split(b"\r\n", 1)[0].decode("latin-1")
    parts = first.split()
    method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
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
