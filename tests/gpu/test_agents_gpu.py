"""The MCP server and a notebook cell on a real GPU, on a library model (torchvision's
ResNet-18 from its config, random weights): the time each reports against the same call
timed back to back in a fresh process that never profiled."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from mcp_types import TextContent

from support.gpu import NEEDS_GPU, fresh_us
from support.lsp import open_notebook, start, stop
from support.mcp import server

pytestmark = NEEDS_GPU

MODEL = """
import torch
import torchvision


def resnet(model, x):
    with torch.no_grad():
        return model(x)


def resnet_inputs(batch_size: int = 1, device: str = "cuda"):
    model = torchvision.models.resnet18().to(device).eval()
    # 128 images: clearly GPU-bound (at 32 the host launches about as fast as the GPU runs,
    # and host-bound times vary between processes by tens of percent)
    return (model, torch.randn(128 * batch_size, 3, 224, 224, device=device))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'gpu-agents'\n")
    (tmp_path / "vision.py").write_text(textwrap.dedent(MODEL))
    return tmp_path


async def test_mcp_profile_of_a_library_model_agrees_with_a_fresh_process(
    project: Path,
) -> None:
    async with server(project) as client:
        out = await client.call_tool(
            "profile", {"path": "vision.py", "qualname": "resnet", "device": "cuda"}
        )
        block = out.content[0]
        assert isinstance(block, TextContent)
        assert not out.is_error, block.text
        report = out.structured_content
        assert report is not None
        print(block.text)
    assert report["device"]["type"] == "cuda"
    timing = report["timing"]
    assert timing["unprofiled_method"] == "cuda_events"
    fresh = fresh_us(f"{project}/vision.py::resnet")
    print(f"MCP unprofiled {timing['unprofiled_us_per_call']:.1f} µs, fresh {fresh:.1f} µs")
    assert timing["unprofiled_us_per_call"] == pytest.approx(fresh, rel=0.15)
    assert block.text.startswith("verdict: ") and "vision.py:" in block.text


async def test_a_notebook_cell_on_the_gpu(project: Path) -> None:
    notebook = project / "explore.ipynb"
    head, body = MODEL.strip().split("\n\n\n", 1)
    cells = [head, body]
    client = await start(
        project, settings={"device": "cuda", "schedule": {"wait": 1, "warmup": 3, "active": 5}}
    )
    try:
        code = lsp.NotebookCellKind.Code
        uris = open_notebook(client, notebook, [(code, text) for text in cells])
        result = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.profile", [uris[1], "resnet"])
        )
        assert result["ok"], result
        diags = client.diagnostics[uris[1]]
        summary = next(d for d in diags if d.code == "KS100")
        assert summary.range.start.line == 0 and "CUDA" in summary.message
        last = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("kernelscope.lastReport", [uris[1], "resnet"])
        )
        report = last["report"]
    finally:
        await stop(client)
    assert report["device"]["type"] == "cuda"
    fresh = fresh_us(f"{project}/vision.py::resnet")
    unprofiled = report["timing"]["unprofiled_us_per_call"]
    print(f"notebook unprofiled {unprofiled:.1f} µs, fresh {fresh:.1f} µs; {summary.message}")
    assert unprofiled == pytest.approx(fresh, rel=0.15)
