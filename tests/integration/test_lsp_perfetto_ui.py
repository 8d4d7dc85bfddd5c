"""`kernelscope.openTrace` with a local Perfetto UI (kernelscope.perfettoUi, [tool.kernelscope]
perfetto_ui): the server serves the stand-in build (tests/standins/perfetto-ui) and the trace
from 127.0.0.1:9002 and asks the client to open it there; a missing build is a message."""

from __future__ import annotations

import asyncio
import shutil
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support import FIXTURES, PERFETTO_UI_STANDIN
from support.lsp import FAST, open_doc, start, stop

UI = "http://127.0.0.1:9002"


def fetch(url: str) -> tuple[int, bytes, str | None]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read(), r.headers.get("Content-Type")
    except urllib.error.HTTPError as e:
        return e.code, b"", e.headers.get("Content-Type")


async def open_imported_trace(client: LanguageClient, project: Path) -> Any:
    """Import the recorded matmul_add run (no profiling needed), then openTrace on it."""
    shutil.copy(FIXTURES / "matmul_add_64" / "matmul_add.py", project / "matmul_add.py")
    uri = open_doc(client, project / "matmul_add.py")
    trace = str(FIXTURES / "matmul_add_64" / "trace.json.gz")
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.importTrace", [uri, "matmul_add", trace])
    )
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("kernelscope.openTrace", [uri, "matmul_add"])
    )


async def test_the_setting_serves_the_ui_build_and_the_trace_from_one_port(project: Path) -> None:
    client = await start(project, settings={**FAST, "perfettoUi": str(PERFETTO_UI_STANDIN)})
    try:
        opened = await open_imported_trace(client, project)
        assert opened["ok"] and opened["shown"], opened
        shown = client.shown_documents[-1]
        assert shown.external and shown.uri.startswith(f"{UI}/#!/?url={UI}/")
        assert shown.uri == opened["url"]
        name = shown.uri.rsplit("/", 1)[1]
        index = await asyncio.to_thread(fetch, f"{UI}/")
        assert index[0] == 200 and b"v1.0.0-test" in index[1]
        wasm = await asyncio.to_thread(fetch, f"{UI}/v1.0.0-test/trace_processor.wasm")
        assert wasm == (200, b"\0asm\1\0\0\0", "application/wasm")
        assert (await asyncio.to_thread(fetch, f"{UI}/no/such/page"))[0] == 404
        status, body, _ = await asyncio.to_thread(fetch, f"{UI}/{name}")
        assert status == 200 and body == Path(opened["path"]).read_bytes()
        assert body[:2] == b"\x1f\x8b"  # the gzip as it is
    finally:
        await stop(client)
    # the shutdown stopped the UI's server
    try:
        gone = (await asyncio.to_thread(fetch, f"{UI}/"))[0]
    except OSError:
        gone = None
    assert gone is None


async def test_the_projects_perfetto_ui_is_a_zip_relative_to_its_root(project: Path) -> None:
    with zipfile.ZipFile(project / "perfetto-ui.zip", "w") as zf:
        for path in PERFETTO_UI_STANDIN.rglob("*"):
            if path.is_file():
                zf.write(path, path.relative_to(PERFETTO_UI_STANDIN).as_posix())
    config = project / "pyproject.toml"
    config.write_text(
        config.read_text() + '\n[tool.kernelscope]\nperfetto_ui = "perfetto-ui.zip"\n'
    )
    client = await start(project)
    try:
        opened = await open_imported_trace(client, project)
        assert opened["ok"] and opened["url"].startswith(f"{UI}/#!/?url={UI}/"), opened
        bundle = await asyncio.to_thread(fetch, f"{UI}/v1.0.0-test/frontend_bundle.js")
        assert bundle[0] == 200 and bundle[2] == "text/javascript; charset=utf-8"
    finally:
        await stop(client)


async def test_a_missing_build_is_a_message_not_a_traceback(project: Path) -> None:
    missing = project / "tools" / "perfetto-ui.zip"
    client = await start(project, settings={**FAST, "perfettoUi": "tools/perfetto-ui.zip"})
    try:
        opened = await open_imported_trace(client, project)
        assert opened == {"ok": False, "url": None, "path": opened["path"]}
        errors = [m.message for m in client.messages if m.type == lsp.MessageType.Error]
        assert errors == [
            "kernelscope: cannot use the Perfetto UI build of kernelscope.perfettoUi / "
            f"[tool.kernelscope] perfetto_ui ({missing} does not exist: point it at Perfetto's "
            "released UI (perfetto-ui.zip from a release on github.com/google/perfetto, or that "
            f"zip unpacked)); the trace is {opened['path']}"
        ]
        assert not client.shown_documents
        assert not any("Traceback" in m.message for m in client.log_messages)
    finally:
        await stop(client)


async def test_a_bad_value_says_so_and_falls_back_to_ui_perfetto_dev(project: Path) -> None:
    config = project / "pyproject.toml"
    config.write_text(config.read_text() + "\n[tool.kernelscope]\nperfetto_ui = 3\n")
    client = await start(project)
    try:
        opened = await open_imported_trace(client, project)
        assert opened["ok"] and opened["url"].startswith("https://ui.perfetto.dev/#!/?url="), opened
        assert any(
            "[tool.kernelscope] perfetto_ui must be the path of Perfetto's UI build" in m.message
            and "got 3; using ui.perfetto.dev" in m.message
            for m in client.messages
        )
    finally:
        await stop(client)
