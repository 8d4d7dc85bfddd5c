"""The local Perfetto UI (app/perfetto.py's `serve_ui`): the stand-in build, from its folder and
from a zip laid out as `perfetto-ui.zip`, served with the trace from one loopback port."""

from __future__ import annotations

import asyncio
import gzip
import re
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from kernelscope.app.perfetto import (
    PortInUse,
    UiBuild,
    UiBuildError,
    content_type,
    local_ui_url,
    serve_ui,
)

from support import PERFETTO_UI_STANDIN

PORT = 19402  # not the real UI_PORT, so a developer's open UI does not fail the test


def zipped(folder: Path, target: Path) -> Path:
    """The folder as Perfetto's release zips its UI: every file, paths relative to the top."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    return target


def fetch(url: str) -> tuple[int, bytes, str | None]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read(), r.headers.get("Content-Type")
    except urllib.error.HTTPError as e:
        return e.code, b"", e.headers.get("Content-Type")


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "three_lines-20261202-abc.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    return path


@pytest.fixture(params=["folder", "zip"])
def build(request: pytest.FixtureRequest, tmp_path: Path) -> UiBuild:
    if request.param == "folder":
        return UiBuild(PERFETTO_UI_STANDIN)
    return UiBuild(zipped(PERFETTO_UI_STANDIN, tmp_path / "perfetto-ui.zip"))


async def test_the_ui_and_the_trace_come_from_one_port(build: UiBuild, trace: Path) -> None:
    ui = await serve_ui(build, PORT)
    try:
        url = ui.offer(trace)
        base = f"http://127.0.0.1:{PORT}"
        assert url == f"{base}/#!/?url={base}/{trace.name}"

        async def get(path: str) -> tuple[int, bytes, str | None]:
            return await asyncio.to_thread(fetch, base + path)

        status, body, kind = await get("/")
        assert status == 200 and kind == "text/html; charset=utf-8"
        assert b'data-perfetto_version=\'{"stable":"v1.0.0-test"}\'' in body
        assert (await get("/index.html"))[1] == body
        status, body, kind = await get("/v1.0.0-test/frontend_bundle.js")
        assert status == 200 and kind == "text/javascript; charset=utf-8" and b"Worker" in body
        assert (await get("/v1.0.0-test/engine_bundle.js"))[0] == 200
        status, body, kind = await get("/v1.0.0-test/trace_processor.wasm")
        assert (status, body, kind) == (200, b"\0asm\1\0\0\0", "application/wasm")
        assert (await get("/v1.0.0-test/frontend.css"))[2] == "text/css; charset=utf-8"
        assert (await get("/v1.0.0-test/manifest.json"))[2] == "application/json"
        # the UI registers its service worker with the version in the query
        status, _, kind = await get("/service_worker.js?v=v1.0.0-test")
        assert status == 200 and kind == "text/javascript; charset=utf-8"
        # no fallback page: unknown paths, folders and escapes are 404s
        for path in (
            "/nope",
            "/record/cpu",
            "/v1.0.0-test",
            "/v1.0.0-test/missing.wasm",
            "/../pyproject.toml",
            "/%2e%2e/README.md",
            "/v1.0.0-test/..%2f..%2fREADME.md",
        ):
            assert (await get(path))[0] == 404, path
        # the trace: its gzip bytes as they are, once
        status, body, _ = await get(f"/{trace.name}")
        assert status == 200 and body == trace.read_bytes() and body[:2] == b"\x1f\x8b"
        assert (await get(f"/{trace.name}"))[0] == 404
        assert (await get("/"))[0] == 200  # the UI stays
    finally:
        await ui.close()


async def test_a_trace_not_fetched_in_time_is_gone(trace: Path) -> None:
    ui = await serve_ui(UiBuild(PERFETTO_UI_STANDIN), PORT, lifetime=0.1)
    try:
        ui.offer(trace)
        await asyncio.sleep(0.2)
        assert (await asyncio.to_thread(fetch, f"http://127.0.0.1:{PORT}/{trace.name}"))[0] == 404
    finally:
        await ui.close()


async def test_an_idle_ui_stops_and_its_port_is_free_again() -> None:
    ui = await serve_ui(UiBuild(PERFETTO_UI_STANDIN), PORT, idle=0.2)
    await asyncio.wait_for(ui.closed.wait(), 5)
    again = await serve_ui(UiBuild(PERFETTO_UI_STANDIN), PORT)
    await again.close()


async def test_a_taken_port_is_port_in_use() -> None:
    ui = await serve_ui(UiBuild(PERFETTO_UI_STANDIN), PORT)
    try:
        with pytest.raises(PortInUse, match=f"127.0.0.1:{PORT} is in use"):
            await serve_ui(UiBuild(PERFETTO_UI_STANDIN), PORT)
    finally:
        await ui.close()


def test_what_is_not_a_ui_build_says_why(tmp_path: Path) -> None:
    with pytest.raises(UiBuildError, match=re.escape("ui.zip does not exist: point it at")):
        UiBuild(tmp_path / "perfetto-ui.zip")
    with pytest.raises(UiBuildError, match=re.escape("has no index.html at its top")):
        UiBuild(tmp_path)
    (tmp_path / "notes.zip").write_text("not a zip")
    with pytest.raises(UiBuildError, match=re.escape("notes.zip is not a readable zip")):
        UiBuild(tmp_path / "notes.zip")
    # zipped with its folder on top: index.html is not at the zip's top
    with zipfile.ZipFile(tmp_path / "nested.zip", "w") as zf:
        for path in PERFETTO_UI_STANDIN.rglob("*"):
            if path.is_file():
                zf.write(path, "perfetto-ui/" + path.relative_to(PERFETTO_UI_STANDIN).as_posix())
    with pytest.raises(UiBuildError, match=re.escape("nested.zip has no index.html at its top")):
        UiBuild(tmp_path / "nested.zip")


def test_content_types() -> None:
    assert content_type("v1/trace_processor_memory64.wasm") == "application/wasm"
    assert content_type("v1/assets/Roboto.woff2") == "font/woff2"
    assert content_type("v1/stdlib_docs.json") == "application/json"
    assert content_type("LICENSE") == "application/octet-stream"
    assert local_ui_url("a b.json.gz", 9002) == (
        "http://127.0.0.1:9002/#!/?url=http://127.0.0.1:9002/a%20b.json.gz"
    )
