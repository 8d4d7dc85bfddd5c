"""Cancelling, coalescing, settings, and clients without the optional capabilities."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support.lsp import capabilities, open_doc, profile, start, stop


async def wait_for_progress_token(client: LanguageClient, timeout: float = 30.0) -> str:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for token, reports in client.progress_reports.items():
            if any(
                isinstance(r, lsp.WorkDoneProgressReport) and "cold" in (r.message or "")
                for r in reports
            ):
                return str(token)
        await asyncio.sleep(0.05)
    raise AssertionError("no progress for the job")


async def test_progress_cancel_stops_the_job_quickly(client: LanguageClient, project: Path) -> None:
    uri = open_doc(client, project / "failures.py")
    job = asyncio.ensure_future(profile(client, uri, "endless"))
    token = await wait_for_progress_token(client)
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(job, 10)
    assert result == {"ok": False, "cancelled": True}
    assert time.monotonic() - t0 < 2.0
    ok = await profile(client, open_doc(client, project / "three_lines.py"), "three_lines")
    assert ok["ok"]  # the worker was interrupted or replaced, and works


async def test_cancel_request_stops_the_job(client: LanguageClient, project: Path) -> None:
    uri = open_doc(client, project / "failures.py")
    msg_id = "profile-to-cancel"
    future = asyncio.ensure_future(
        client.protocol.send_request_async(
            lsp.WORKSPACE_EXECUTE_COMMAND,
            lsp.ExecuteCommandParams("kernelscope.profile", [uri, "blocked_in_c"]),
            msg_id=msg_id,
        )
    )
    await wait_for_progress_token(client)
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id=msg_id))
    with pytest.raises(Exception, match=r"cancel"):
        await asyncio.wait_for(future, 10)
    # the job itself stops too (the worker stuck in C code is killed and replaced)
    while any(
        r
        for r in client.progress_reports.values()
        if not any(isinstance(x, lsp.WorkDoneProgressEnd) for x in r)
    ):
        await asyncio.sleep(0.05)
        assert time.monotonic() - t0 < 3.0, "the job did not stop"
    ok = await profile(client, open_doc(client, project / "three_lines.py"), "three_lines")
    assert ok["ok"]


async def test_two_requests_for_one_function_coalesce(
    client: LanguageClient, project: Path
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    first, second = await asyncio.gather(
        profile(client, uri, "three_lines"), profile(client, uri, "three_lines")
    )
    assert first["ok"] and second["ok"]
    assert first["run_id"] == second["run_id"]


async def test_bad_settings_fall_back_with_a_message(project: Path) -> None:
    client = await start(
        project, settings={"device": "tpu", "schedule": {"active": 0}, "timeout": -3}
    )
    try:
        await asyncio.sleep(0.5)
        messages = [m.message for m in client.messages]
        assert any("kernelscope.device" in m and "'tpu'" in m for m in messages), messages
        assert any("kernelscope.schedule.active" in m for m in messages)
        assert any("kernelscope.timeout" in m for m in messages)
        result = await profile(client, open_doc(client, project / "three_lines.py"), "three_lines")
        assert result["ok"]  # with the defaults
    finally:
        await stop(client)


async def test_changed_configuration_is_read_again(project: Path) -> None:
    client = await start(project)
    try:
        client.set_configuration(
            {"device": "cpu", "schedule": {"wait": 0, "warmup": 0, "active": 3}},
            section="kernelscope",
        )
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        await asyncio.sleep(0.5)
        uri = open_doc(client, project / "three_lines.py")
        result = await profile(client, uri, "three_lines")
        report = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.lastReport", [result["run_id"]])
        )
        assert report["report"]["steps"] == {
            "wait": 0,
            "warmup": 0,
            "active": 3,
            "asked": None,
            "recording": "",
            "fitted": "",
        }
    finally:
        await stop(client)


async def test_a_client_without_progress_showdocument_or_configuration(project: Path) -> None:
    caps = capabilities(progress=False, show_document=False, configuration=False)
    client = await start(project, caps=caps)
    try:
        uri = open_doc(client, project / "three_lines.py")
        result = await profile(
            client, uri, "three_lines", {"device": "cpu", "active": 1, "warmup": 0}
        )
        assert result["ok"]
        assert not client.progress_reports
        opened = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.openTrace", [uri])
        )
        assert opened["ok"] and not opened["shown"]
        assert any("https://ui.perfetto.dev" in m.message for m in client.messages)
    finally:
        await stop(client)


async def test_requests_on_odd_documents_get_nothing_not_errors(
    client: LanguageClient, project: Path
) -> None:
    notes = project / "notes.txt"
    notes.write_text("hello\n")
    uri = open_doc(client, notes)
    assert (
        await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(0, 0))
        )
        is None
    )
    broken = project / "broken.py"
    broken.write_text("def broken(:\n    pass\n")
    uri = open_doc(client, broken)
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
    )
    assert not lenses
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri),
            lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0)),
            lsp.CodeActionContext(diagnostics=[]),
        )
    )
    assert not actions
    missing = (project / "gone.py").as_uri()
    assert (
        await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(missing), lsp.Position(0, 0))
        )
        is None
    )
