"""Every request answered: malformed params on every method the server registers get a reply
(InvalidParams where the params do not fit), the server stays up, its log has no traceback."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from support.lsp import open_doc, start, stop

INVALID_PARAMS = -32602
COMMANDS = (
    "kernelscope.profile",
    "kernelscope.try",
    "kernelscope.compare",
    "kernelscope.openTrace",
    "kernelscope.importTrace",
    "kernelscope.lastReport",
)
AT = {"line": 5, "character": 4}
RANGE = {"start": AT, "end": AT}
BAD_NOTIFICATIONS: list[tuple[str, Any]] = [
    (lsp.TEXT_DOCUMENT_DID_OPEN, {}),
    (lsp.TEXT_DOCUMENT_DID_CHANGE, {"textDocument": 3, "contentChanges": None}),
    (lsp.TEXT_DOCUMENT_DID_CLOSE, None),
    (lsp.CANCEL_REQUEST, {"id": []}),
    (lsp.WORKSPACE_DID_CHANGE_CONFIGURATION, "settings"),
]


def send_raw(client: LanguageClient, method: str, params: Any) -> asyncio.Future[Any]:
    """A request written as the JSON given (the client's own types would refuse it)."""
    msg_id = str(uuid.uuid4())
    future: Future[Any] = Future()
    protocol = client.protocol
    protocol._request_futures[msg_id] = future  # pyright: ignore[reportPrivateUsage]
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    protocol._send_data(message)  # pyright: ignore[reportPrivateUsage]
    return asyncio.wrap_future(future)


def malformed(uri: str) -> list[tuple[str, Any]]:
    """(method, params) pairs a careless client might send."""
    doc = {"uri": uri}
    cases: list[tuple[str, Any]] = []
    for method in (lsp.TEXT_DOCUMENT_HOVER, lsp.TEXT_DOCUMENT_CODE_LENS):
        cases += [
            (method, None),
            (method, {}),
            (method, []),
            (method, "hover"),
            (method, {"textDocument": {}}),
            (method, {"textDocument": {"uri": 3}, "position": AT}),
            (method, {"textDocument": doc, "position": {"line": "five", "character": 0}}),
            (method, {"textDocument": doc, "position": {"line": -1, "character": 0}}),
        ]
    cases += [
        (lsp.TEXT_DOCUMENT_HOVER, {"textDocument": doc}),
        (
            lsp.TEXT_DOCUMENT_HOVER,
            {"textDocument": doc, "position": {"line": 10**6, "character": 0}},
        ),
        (lsp.TEXT_DOCUMENT_CODE_ACTION, None),
        (lsp.TEXT_DOCUMENT_CODE_ACTION, {"textDocument": doc}),
        (lsp.TEXT_DOCUMENT_CODE_ACTION, {"textDocument": doc, "range": RANGE}),
        (lsp.TEXT_DOCUMENT_CODE_ACTION, {"textDocument": doc, "range": AT, "context": {}}),
        (
            lsp.TEXT_DOCUMENT_CODE_ACTION,
            {"textDocument": doc, "range": RANGE, "context": {"diagnostics": [{"message": 1}]}},
        ),
        (
            lsp.TEXT_DOCUMENT_CODE_ACTION,
            {"textDocument": doc, "range": RANGE, "context": {"diagnostics": {}, "only": 7}},
        ),
        (
            lsp.TEXT_DOCUMENT_CODE_ACTION,
            {
                "textDocument": doc,
                "range": RANGE,
                "context": {
                    "diagnostics": [
                        {"range": RANGE, "message": "m", "code": "KS001", "data": {"qualname": 5}}
                    ]
                },
            },
        ),
        (lsp.TEXT_DOCUMENT_INLAY_HINT, None),
        (lsp.TEXT_DOCUMENT_INLAY_HINT, {"textDocument": doc}),
        (lsp.TEXT_DOCUMENT_INLAY_HINT, {"textDocument": doc, "range": {"start": AT}}),
        (lsp.TEXT_DOCUMENT_INLAY_HINT, {"textDocument": doc, "range": [0, 1]}),
        (lsp.WORKSPACE_EXECUTE_COMMAND, None),
        (lsp.WORKSPACE_EXECUTE_COMMAND, {}),
        (lsp.WORKSPACE_EXECUTE_COMMAND, {"command": 5}),
        (lsp.WORKSPACE_EXECUTE_COMMAND, {"command": "kernelscope.nothing", "arguments": []}),
        (lsp.WORKSPACE_EXECUTE_COMMAND, {"command": "kernelscope.profile", "arguments": {}}),
    ]
    for command in COMMANDS:
        for arguments in ([], [None], [3, 4], [uri, 5], [uri, "three_lines", 7], [{}] * 6):
            cases.append(
                (lsp.WORKSPACE_EXECUTE_COMMAND, {"command": command, "arguments": arguments})
            )
    return cases


async def test_every_malformed_request_gets_a_reply(
    project: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    client = await start(project)
    try:
        uri = open_doc(client, project / "three_lines.py")
        cases = malformed(uri)
        assert len(cases) >= 60
        for start_at in range(0, len(cases), 10):  # in bounded batches
            batch = cases[start_at : start_at + 10]
            replies = await asyncio.wait_for(
                asyncio.gather(
                    *(send_raw(client, m, p) for m, p in batch),
                    return_exceptions=True,
                ),
                timeout=30,
            )
            for (method, params), reply in zip(batch, replies, strict=True):
                if isinstance(reply, BaseException):
                    assert isinstance(reply, JsonRpcException), (method, params, reply)
                    assert reply.code == INVALID_PARAMS, (method, params, reply)
                    assert reply.message, (method, params)
        for method, params in BAD_NOTIFICATIONS:  # no reply due; no traceback either
            message = {"jsonrpc": "2.0", "method": method, "params": params}
            client.protocol._send_data(message)  # pyright: ignore[reportPrivateUsage]
        hover = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(3, 6))
        )
        assert hover is None  # answering still (no run yet, so nothing to show)
        lenses = await client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
        )
        assert lenses
    finally:
        await stop(client)
    log = capfd.readouterr().err
    assert "Traceback" not in log, log[-3000:]
    assert "unreadable params" in log


async def test_unreadable_params_name_what_was_wrong(project: Path) -> None:
    client = await start(project)
    try:
        uri = open_doc(client, project / "three_lines.py")
        with pytest.raises(JsonRpcException) as caught:
            await asyncio.wait_for(
                send_raw(
                    client,
                    lsp.TEXT_DOCUMENT_HOVER,
                    {"textDocument": {"uri": uri}, "position": {"line": "five", "character": 0}},
                ),
                timeout=10,
            )
        assert caught.value.code == INVALID_PARAMS
        assert "textDocument/hover" in caught.value.message
        assert "$.params.position.line" in caught.value.message
    finally:
        await stop(client)
