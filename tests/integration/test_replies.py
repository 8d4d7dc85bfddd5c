"""The command replies (lsp/replies.py): the committed TypeScript is generated from them, the
Neovim plugin reads only their fields, and the real server's replies decode into them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from kernelscope.lsp.replies import (
    REPLIES,
    ImportTraceReply,
    LastReportReply,
    OpenTraceReply,
    ProfileError,
    ProfileReply,
    typescript,
)
from kernelscope.lsp.server import (
    COMPARE,
    IMPORT_TRACE,
    LAST_REPORT,
    MEMORY_FIT,
    OPEN_TRACE,
    PROFILE,
)

from support import FIXTURES, REPO_ROOT
from support.lsp import open_doc, profile

REPLIES_TS = REPO_ROOT / "editor-client" / "vscode" / "src" / "replies.ts"
NVIM_PLUGIN = REPO_ROOT / "editor-client" / "nvim" / "lua" / "kernelscope" / "init.lua"

# The plugin's functions that read a command's reply (as `result`), and which command's.
NVIM_READERS = {
    "profiled": PROFILE,
    "M.open_trace": OPEN_TRACE,
    "M.report": LAST_REPORT,
    "M.compare": COMPARE,
    "M.will_fit": MEMORY_FIT,
}


def test_the_committed_typescript_is_generated_from_the_structs() -> None:
    assert REPLIES_TS.read_text() == typescript(), (
        "regenerate it: PYTHONPATH=server .venv/bin/python -m kernelscope.lsp.replies "
        "--typescript editor-client/vscode/src/replies.ts"
    )


def lua_functions(text: str) -> dict[str, str]:
    """The body of each top-level function of a Lua file, by name."""
    parts = re.split(r"^(?:local )?function ([\w.]+)\(", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def has_field(cls: type[msgspec.Struct], path: list[str]) -> bool:
    """Whether the Struct has the (dotted) field, through nested Structs."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    field = next((f for f in info.fields if f.encode_name == path[0]), None)
    if field is None:
        return False
    if len(path) == 1:
        return True
    types = field.type.types if isinstance(field.type, mi.UnionType) else (field.type,)
    return any(isinstance(t, mi.StructType) and has_field(t.cls, path[1:]) for t in types)


def test_every_field_the_nvim_plugin_reads_is_in_its_reply() -> None:
    text = NVIM_PLUGIN.read_text()
    commands = dict(re.findall(r"^local (\w+) = '(kernelscope\.\w+)'", text, flags=re.MULTILINE))
    assert set(commands.values()) <= set(REPLIES), commands
    reads = {
        name: set(re.findall(r"\bresult\.(\w+(?:\.\w+)*)", body))
        for name, body in lua_functions(text).items()
    }
    reads = {name: fields for name, fields in reads.items() if fields}
    # a new function that reads a reply: add it to NVIM_READERS with its command
    assert reads.keys() == NVIM_READERS.keys(), reads
    assert reads["profiled"] >= {"ok", "cancelled", "summary", "error", "error.message"}
    for name, fields in reads.items():
        reply = REPLIES[NVIM_READERS[name]]
        missing = {f for f in fields if not has_field(reply, f.split("."))}
        assert not missing, f"{name} reads {missing}, which {reply.__name__} does not have"


def test_replies_not_round_tripped_below_keep_their_wire_shape() -> None:
    assert msgspec.to_builtins(ProfileReply(ok=False, cancelled=True)) == {
        "ok": False,
        "cancelled": True,
    }
    error = ProfileError(kind="timeout", message="took too long")
    assert msgspec.to_builtins(ProfileReply(ok=False, error=error)) == {
        "ok": False,
        "error": {"kind": "timeout", "message": "took too long", "path": None, "line": None},
    }
    ok = ProfileReply(ok=True, run_id="r", bound=None, summary="", trace="t.json.gz")
    assert msgspec.to_builtins(ok) == {
        "ok": True,
        "run_id": "r",
        "bound": None,
        "summary": "",
        "trace": "t.json.gz",
    }
    port_taken = OpenTraceReply(ok=False, url=None, path="t.json.gz")
    assert msgspec.to_builtins(port_taken) == {"ok": False, "url": None, "path": "t.json.gz"}


T = TypeVar("T", bound=msgspec.Struct)


def decoded(reply: Any, cls: type[T]) -> T:
    """The reply as its Struct, which encodes back to exactly the reply."""
    struct = msgspec.convert(reply, cls)
    assert msgspec.to_builtins(struct) == reply, (reply, struct)
    return struct


async def execute(client: LanguageClient, command: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command, [*args]))


async def test_the_real_replies_decode_into_their_structs(
    client: LanguageClient, project: Path
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    done = decoded(await profile(client, uri, "three_lines"), ProfileReply)
    assert done.ok and isinstance(done.run_id, str) and isinstance(done.trace, str)
    assert done.error is msgspec.UNSET and done.cancelled is msgspec.UNSET

    report = decoded(await execute(client, LAST_REPORT, done.run_id), LastReportReply)
    assert report.run_id == done.run_id and report.text and "ops" in report.report

    failures = open_doc(client, project / "failures.py")
    failed = decoded(await profile(client, failures, "raises"), ProfileReply)
    assert not failed.ok and isinstance(failed.error, ProfileError)
    assert failed.error.kind == "user_exception" and failed.run_id is msgspec.UNSET

    shutil.copy(FIXTURES / "matmul_add_64" / "matmul_add.py", project / "matmul_add.py")
    imported_uri = open_doc(client, project / "matmul_add.py")
    trace = str(FIXTURES / "matmul_add_64" / "trace.json.gz")
    imported = decoded(
        await execute(client, IMPORT_TRACE, imported_uri, "matmul_add", trace), ImportTraceReply
    )
    assert imported.ok and imported.run_id != done.run_id and imported.bound

    # last: the trace is served on 127.0.0.1:9001 (shared with other runs) until the shutdown
    opened = decoded(await execute(client, OPEN_TRACE, done.run_id), OpenTraceReply)
    assert opened.ok and opened.shown is True and opened.path == done.trace
