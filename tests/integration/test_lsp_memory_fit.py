""" "Will batch N fit?" through a real server: the memory forecast of a function with an input
provider (each batch size in a fresh worker, on the CPU here), its answer for batch N against
the room, and bad requests refused with the server still answering."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from support import WORKLOADS
from support.lsp import open_doc

FIT = "kernelscope.memoryFit"


async def fit(client: LanguageClient, *args: object) -> dict[str, object]:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(FIT, list(args)))


async def test_batch_n_fits_the_room_or_not_as_its_predicted_peak_says(
    client: LanguageClient, project: Path
) -> None:
    path = project / "memory_train.py"
    shutil.copy(WORKLOADS / "memory_train.py", path)
    uri = open_doc(client, path)
    asked = {"batch": 256, "batchSizes": [16, 32], "check": False}
    roomy = await fit(client, uri, "train_step", {**asked, "roomBytes": 2**30})
    assert roomy["ok"] is True and roomy["fits"] is True, roomy
    answer = str(roomy["answer"])
    assert answer.startswith("batch 256 fits: predicted peak "), answer
    assert "of 921.6 MiB (the room less 10% headroom)" in answer
    rows = [line.split() for line in str(roomy["text"]).splitlines()]
    assert [r[0] for r in rows if r[-1:] == ["measured"]] == ["16", "32"]
    tight = await fit(client, uri, "train_step", {**asked, "roomBytes": 2**20})
    assert tight["ok"] is True and tight["fits"] is False
    assert str(tight["answer"]).startswith("batch 256 does not fit: predicted peak ")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"batch": 0}, "options.batch must be an integer >= 1"),
        ({"batchSizes": [4]}, "options.batchSizes must be two or more different integers"),
        ({"batchSizes": [2, 2]}, "options.batchSizes must be two or more different integers"),
        ({"headroom": 1.5}, "options.headroom must be from 0 to < 1"),
    ],
)
async def test_bad_requests_are_errors_and_the_server_keeps_answering(
    client: LanguageClient, project: Path, options: dict[str, object], says: str
) -> None:
    uri = open_doc(client, project / "three_lines.py")
    with pytest.raises(JsonRpcException, match=says):
        await fit(client, uri, "three_lines", options)
    reply = await fit(client, uri, "three_lines", {"batch": 4})  # a job's failure: a reply
    assert reply["ok"] is False and reply["error"]["kind"] == "missing_inputs", reply  # type: ignore[index]


async def test_a_programs_call_is_forecast_with_its_batch_resized(
    client: LanguageClient, project: Path
) -> None:
    shutil.copy(WORKLOADS / "memory_train.py", project / "memory_train.py")
    (project / "run_train.py").write_text(
        "from memory_train import train_step, train_step_inputs\n\n"
        "if __name__ == '__main__':\n"
        "    model, opt, x = train_step_inputs(12)\n"
        "    for _ in range(3):\n"
        "        train_step(model, opt, x)\n"
    )
    uri = open_doc(client, project / "memory_train.py")
    options = {"via": "run_train.py", "batch": 48, "batchSizes": [6, 24], "check": False}
    reply = await fit(client, uri, "train_step", options)
    assert reply["ok"] is True, reply
    assert "batch 12 -> 6: dim 0 of args[2], rows cut" in str(reply["text"])
    with pytest.raises(JsonRpcException, match=r"no such script nope\.py"):
        await fit(client, uri, "train_step", {**options, "via": "nope.py"})
