"""Where the "▶ Profile" lens goes: not on input providers or dunders (but `__call__`) by
default; the `lens.profile` setting widens or removes it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from support.lsp import FAST, open_doc, start, stop

MODEL = """\
import torch


class MLP(torch.nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)

    def __call__(self, x):
        return super().__call__(x)

    def __repr__(self):
        return "MLP"

    def _scaled(self, x):
        return 2 * x


def MLP_forward_inputs(batch_size: int = 1):
    return (MLP(), torch.randn(batch_size, 64))


def step(x):
    return x @ x


def make_step_inputs():
    return (torch.randn(8, 8),)


def orphan_inputs():
    return ()
"""
EVERY = {
    "MLP.__init__",
    "MLP.forward",
    "MLP.__call__",
    "MLP.__repr__",
    "MLP._scaled",
    "MLP_forward_inputs",
    "step",
    "make_step_inputs",
    "orphan_inputs",
}
# an input provider by name (MLP_forward_inputs) or mapped in pyproject (make_step_inputs);
# `orphan_inputs` provides for no function here, so it is an ordinary function
DEFAULT = EVERY - {"MLP.__init__", "MLP.__repr__", "MLP_forward_inputs", "make_step_inputs"}


def lens_project(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'proj'\n\n"
        '[tool.kernelscope.inputs]\n"model:step" = "model:make_step_inputs"\n'
    )
    (root / "model.py").write_text(MODEL)
    return root


async def profile_lenses(client: LanguageClient, uri: str) -> set[str]:
    """The functions with a "▶ Profile" lens."""
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
    )
    return {
        lens.command.arguments[1]
        for lens in lenses or []
        if lens.command and lens.command.title == "▶ Profile" and lens.command.arguments
    }


async def refreshed(client: LanguageClient) -> None:
    """Wait (10 s at most) until the server asked the client to refresh its lenses."""
    for _ in range(100):
        if lsp.WORKSPACE_CODE_LENS_REFRESH in client.refreshes:  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("no workspace/codeLens/refresh after the settings were read")


@pytest.mark.parametrize(
    ("setting", "expected"),
    [(None, DEFAULT), ("default", DEFAULT), ("all", EVERY), ("none", set())],
)
async def test_profile_lens_goes_where_the_setting_says(
    tmp_path: Path, setting: str | None, expected: set[str]
) -> None:
    project = lens_project(tmp_path / "proj")
    settings = FAST if setting is None else {**FAST, "lens": {"profile": setting}}
    client = await start(project, settings=settings)
    try:
        uri = open_doc(client, project / "model.py")
        if setting not in (None, "default"):  # read after `initialized`: lenses refreshed
            await refreshed(client)
        assert await profile_lenses(client, uri) == expected
    finally:
        await stop(client)


async def test_a_bad_lens_setting_falls_back_with_a_message(tmp_path: Path) -> None:
    project = lens_project(tmp_path / "proj")
    client = await start(project, settings={**FAST, "lens": {"profile": "some"}})
    try:
        uri = open_doc(client, project / "model.py")
        for _ in range(100):  # the settings are read after `initialized`
            if client.messages:
                break
            await asyncio.sleep(0.1)
        assert any("kernelscope.lens.profile" in m.message for m in client.messages)
        assert await profile_lenses(client, uri) == DEFAULT
    finally:
        await stop(client)
