"""The editor's "Profile" as a program calls the function (pytest-lsp, a real server): the
profile command's `via` option and the `kernelscope.via` setting; the lens and the hover say
which call of which program the run measured; a bad program is an error reply, the server
stays up. And the MCP server's `profile` tool with `via`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from support import WORKLOADS
from support.lsp import open_doc, profile, start, stop
from support.mcp import server

TRAIN = "train.py config/tiny.py --max_iters=3 --eval_interval=2 --device=cpu"
FAST = {"device": "cpu", "schedule": {"wait": 0, "warmup": 1, "active": 2}}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The minigpt project (tests/workloads/minigpt), copied: its programs write out/."""
    root = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", root, ignore=shutil.ignore_patterns("out"))
    (root / "pyproject.toml").write_text("[project]\nname = 'minigpt'\n")
    return root


async def _lens_and_hover(client: LanguageClient, uri: str, def_line: int) -> tuple[str, str]:
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
    )
    titles = [x.command.title for x in lenses or [] if x.command and "via" in x.command.title]
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(def_line - 1, 8))
    )
    assert hover is not None
    return " | ".join(titles), hover.contents.value  # type: ignore[union-attr]


def _forward_of(path: Path, cls: str) -> int:
    """The 1-based line of `cls`'s `def forward`."""
    lines = path.read_text().splitlines()
    start = next(
        i for i, line in enumerate(lines, 1) if line.startswith((f"class {cls}(", f"class {cls}:"))
    )
    return next(i for i, t in enumerate(lines, 1) if i > start and "def forward" in t)


async def test_profile_via_a_program_from_the_editor(project: Path) -> None:
    client = await start(project, settings=FAST)
    try:
        uri = open_doc(client, project / "model.py")
        result = await profile(client, uri, "Block.forward", {"via": TRAIN})
        assert result["ok"], result
        lens, hover = await _lens_and_hover(client, uri, _forward_of(project / "model.py", "Block"))
        assert "via train.py, call 1" in lens
        assert f"via {TRAIN}, call 1 from model.py:" in hover
        assert "eval mode, no_grad, captured" in hover
        assert "the program did not run" not in hover

        # kept: the same call again replays the capture; the fresh option runs the program
        assert (await profile(client, uri, "Block.forward", {"via": TRAIN}))["ok"]
        _, hover = await _lens_and_hover(client, uri, _forward_of(project / "model.py", "Block"))
        assert "from the saved capture (the program did not run)" in hover
        assert (await profile(client, uri, "Block.forward", {"via": TRAIN, "fresh": True}))["ok"]
        _, hover = await _lens_and_hover(client, uri, _forward_of(project / "model.py", "Block"))
        assert "the program did not run" not in hover

        with pytest.raises(JsonRpcException, match=r"no such script nope\.py"):
            await profile(client, uri, "Block.forward", {"via": "nope.py"})
        with pytest.raises(JsonRpcException, match=r"options\.call must be an integer"):
            await profile(client, uri, "Block.forward", {"via": TRAIN, "call": 0})
        failed = await profile(client, uri, "GPT.generate", {"via": TRAIN})
        assert not failed["ok"] and failed["error"]["kind"] == "not_called"

        # The project's programs that may call it, offered once each (no `only`: Neovim's way)
        at = lsp.Position(_forward_of(project / "model.py", "GPT"), 8)
        actions = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(uri), lsp.Range(at, at), lsp.CodeActionContext([])
            )
        )
        offered = {
            a.title: list(a.command.arguments or [])
            for a in actions or []
            if isinstance(a, lsp.CodeAction) and a.command is not None
        }
        for via in ("train.py", "train_main.py", "tests/test_model.py::test_forward"):
            title = f"Profile `GPT.forward` as called by {via}"
            assert offered.get(title) == [uri, "GPT.forward", {"via": via}], list(offered)
    finally:
        await stop(client)


async def test_in_place_from_the_editor(project: Path) -> None:
    """The profile command's inPlace option: the program's own calls of train_step are the
    steps; the lens says in place."""
    client = await start(project, settings=FAST)
    try:
        uri = open_doc(client, project / "train_main.py")
        options = {"via": "train_main.py --max_iters 12 --device cpu --num_workers 0",
                   "inPlace": True, "skip": 2}  # fmt: skip
        result = await profile(client, uri, "train_step", options)
        assert result["ok"], result
        at = next(
            i
            for i, t in enumerate((project / "train_main.py").read_text().splitlines(), 1)
            if t.startswith("def train_step(")
        )
        lens, hover = await _lens_and_hover(client, uri, at)
        assert "via train_main.py, in place" in lens
        assert ", calls 3-" in hover and "in place*" in hover  # --skip 2: calls 3 on
        with pytest.raises(JsonRpcException, match=r"options\.skip must be an integer"):
            await profile(client, uri, "train_step", {**options, "skip": 0})
    finally:
        await stop(client)


async def test_the_via_setting_maps_a_function_to_its_program(project: Path) -> None:
    client = await start(project, settings={**FAST, "via": {"model.py::MLP.forward": TRAIN}})
    try:
        uri = open_doc(client, project / "model.py")
        result = await profile(client, uri, "MLP.forward")
        assert result["ok"], result
        lens, _ = await _lens_and_hover(client, uri, _forward_of(project / "model.py", "MLP"))
        assert "via train.py, call 1" in lens
    finally:
        await stop(client)


async def test_the_mcp_profile_tool_takes_a_program(project: Path) -> None:
    async with server(project) as client:
        result = await client.call_tool(
            "profile",
            {"path": "model.py", "qualname": "GPT.forward", "via": TRAIN, "device": "cpu"},
        )
        assert not result.is_error, result.content
        report = result.structured_content
        assert report is not None
        assert report["call_site"]["via"] == TRAIN
        assert report["call_site"]["modes"] == ["eval mode", "no_grad"]
        summary = result.content[0].text  # type: ignore[union-attr]
        assert f"via {TRAIN}, call 1" in summary
        args = {"path": "model.py", "qualname": "GPT.forward", "via": TRAIN, "device": "cpu"}
        again = (await client.call_tool("profile", args)).structured_content
        assert again is not None and again["call_site"]["reused"] is True
        fresh = (await client.call_tool("profile", {**args, "fresh": True})).structured_content
        assert fresh is not None and fresh["call_site"]["reused"] is False
        tried = await client.call_tool(
            "try", {**args, "qualname": "Block.forward", "variants": ["bf16"], "budget": 0.5}
        )
        assert not tried.is_error, tried.content
        assert tried.structured_content is not None
        assert tried.structured_content["call"].startswith(f"via {TRAIN}, call 1")
        assert f"via {TRAIN}, call 1" in tried.content[0].text  # type: ignore[union-attr]
        steps = await client.call_tool(
            "profile",
            {
                "path": "train_main.py",
                "qualname": "train_step",
                "via": "train_main.py --max_iters 20 --device cpu --num_workers 0",
                "in_place": True,
                "skip": 5,
                "device": "cpu",
            },
        )
        assert not steps.is_error, steps.content
        assert steps.structured_content is not None
        assert steps.structured_content["call_site"]["captured"] is False
        bad = await client.call_tool(
            "profile", {"path": "model.py", "qualname": "GPT.forward", "via": "nope.py"}
        )
        assert bad.is_error and "no such script nope.py" in bad.content[0].text  # type: ignore[union-attr]
