"""The JSON-RPC layer under every handler: each request gets a reply, a client's mistake no
traceback.

pygls 2 reads a message's params into lsprotocol types while it parses the JSON (an
`object_hook`); when they do not fit, it logs a traceback and drops the message, so the
client waits for an answer that never comes. Here a request that does not fit is answered
with InvalidParams naming what was wrong (`$.params.position.line: expected int`), a
notification that does not fit is logged in one line, and InvalidParams raised by a handler
is answered without a traceback.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

import attrs
from cattrs import transform_error
from lsprotocol.types import CANCEL_REQUEST
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

log = logging.getLogger(__name__)


@attrs.define
class Unreadable:
    """A message whose params did not fit its method's types; `id` is None for a
    notification."""

    id: int | str | None
    method: str
    problem: str


class KernelscopeProtocol(LanguageServerProtocol):
    """pygls's protocol, answering requests whose params cannot be read."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        """The message as lsprotocol types; an `Unreadable` for a request or notification
        whose params do not fit."""
        method = data.get("method")
        if "jsonrpc" not in data or not isinstance(method, str) or "error" in data:
            return super().structure_message(data)
        msg_id = data.get("id")
        fallback = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
        msg_id = msg_id if isinstance(msg_id, int | str) else None
        try:
            message = self._converter.structure(data, self.get_message_type(method) or fallback)
        except Exception as e:  # any failure to read them is the client's params
            return Unreadable(msg_id, method, _problem(e))
        if method == CANCEL_REQUEST and not isinstance(message.params.id, int | str):
            # lsprotocol lets any JSON through as the id, and pygls would hash it
            return Unreadable(None, method, "expected int | str @ $.params.id")
        return message

    def handle_message(self, message: Any) -> None:
        """Answer an unreadable request with InvalidParams; hand the rest to pygls."""
        if not isinstance(message, Unreadable):
            super().handle_message(message)
            return
        log.warning("%s with unreadable params: %s", message.method, message.problem)
        if message.id is not None:
            error = JsonRpcInvalidParams(f"{message.method}: {message.problem}")
            self._send_response(message.id, None, error.to_response_error())

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        """A handler's InvalidParams is the client's mistake: reply, log one line."""
        error = None if future.cancelled() else future.exception()
        if not isinstance(error, JsonRpcInvalidParams):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        log.warning("request %s: %s", msg_id, error.message)
        self._send_response(msg_id, None, error.to_response_error())


def _problem(error: Exception) -> str:
    """What did not fit, one `$.path: reason` per problem (cattrs's wording)."""
    try:
        problems = transform_error(error)
    except Exception:
        problems = [str(error)]
    return "; ".join(problems[:5]) or type(error).__name__
