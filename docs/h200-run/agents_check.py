"""On the GPU host: `kernelscope mcp`'s profile tool on library models built from their
configs (none tuned for), each against the same call timed back to back in three fresh
processes, after the server has stopped (its idle workers hold their GPU contexts).

    PYTHONPATH=/tmp/site:$PWD/server:$PWD/tests python3 docs/h200-run/agents_check.py OUTDIR
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import textwrap
from pathlib import Path

from mcp_types import TextContent

from support.gpu import fresh_us
from support.mcp import server

MODELS = """
import torch


def convnext(model, x):
    with torch.no_grad():
        return model(x)


def convnext_inputs(batch_size: int = 1, device: str = "cuda"):
    import timm

    model = timm.create_model("convnext_tiny", pretrained=False).to(device).eval()
    return (model, torch.randn(16, 3, 224, 224, device=device))


def gpt2(model, ids):
    with torch.no_grad():
        return model(ids).logits


def gpt2_inputs(batch_size: int = 1, device: str = "cuda"):
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).to(device).eval()
    return (model, torch.randint(0, 50257, (4, 256), device=device))


def mobilenet(model, x):
    with torch.no_grad():
        return model(x)


def mobilenet_inputs(batch_size: int = 1, device: str = "cuda"):
    import torchvision

    model = torchvision.models.mobilenet_v3_small().to(device).eval()
    return (model, torch.randn(8, 3, 224, 224, device=device))
"""


async def main(out: Path) -> None:
    root = Path(tempfile.mkdtemp())
    (root / "pyproject.toml").write_text("[project]\nname = 'agents-check'\n")
    (root / "models.py").write_text(textwrap.dedent(MODELS))
    rows = []
    async with server(root) as client:
        for name in ("convnext", "gpt2", "mobilenet"):
            result = await client.call_tool(
                "profile", {"path": "models.py", "qualname": name, "device": "cuda"}
            )
            block = result.content[0]
            text = block.text if isinstance(block, TextContent) else ""
            if result.is_error or result.structured_content is None:
                rows.append({"model": name, "error": text})
                continue
            report = result.structured_content
            t = report["timing"]
            rows.append(
                {
                    "model": name,
                    "summary": text,
                    "unprofiled_us": t["unprofiled_us_per_call"],
                    "method": t["unprofiled_method"],
                    "cuda_us_per_step": t["cuda_us_per_step"],
                    "bound": (report.get("verdict") or {}).get("bound"),
                }
            )
    for r in rows:
        if "error" not in r:
            fresh = sorted(fresh_us(f"{root}/models.py::{r['model']}") for _ in range(3))
            r["fresh_runs_us"] = fresh
            r["fresh_back_to_back_us"] = fresh[1]
            r["unprofiled_vs_fresh"] = r["unprofiled_us"] / fresh[1] - 1
    (out / "agents_check.json").write_text(json.dumps(rows, indent=1))
    for r in rows:
        if "error" in r:
            print(f"{r['model']}: ERROR {r['error'][:300]}")
            continue
        runs = ", ".join(f"{x:.0f}" for x in r["fresh_runs_us"])
        print(
            f"{r['model']:10} unprofiled {r['unprofiled_us']:9.1f} µs ({r['method']}) · fresh "
            f"{r['fresh_back_to_back_us']:9.1f} µs (of {runs})"
            f" · {r['unprofiled_vs_fresh']:+.1%} · GPU/step "
            f"{r['cuda_us_per_step']:9.1f} µs · {r['bound']}"
        )
        print(textwrap.indent(r["summary"], "    "))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
