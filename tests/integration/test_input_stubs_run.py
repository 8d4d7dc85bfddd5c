"""The generated provider stubs run: written to kernelscope_inputs.py (beside the model, or
the pyproject's inputs_module), found by the worker with no other edit, and profiled."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.pyfunctions import stub_for

from support import WORKLOADS
from support.jobs import LauncherDriver, ok

MODELS = WORKLOADS / "stub_models"


@pytest.mark.parametrize(
    ("model", "qualname"),
    [
        ("mingpt_like.py", "CausalSelfAttention.forward"),
        ("nanogpt_like.py", "MLP.forward"),
        ("nanogpt_like.py", "Scaler.forward"),
    ],
)
def test_the_stub_in_kernelscope_inputs_beside_the_model_runs(
    driver: LauncherDriver, tmp_path: Path, model: str, qualname: str
) -> None:
    (tmp_path / ".git").mkdir()  # the project's root
    path = tmp_path / model
    path.write_text((MODELS / model).read_text())
    stub = stub_for(str(path), qualname)
    assert stub is not None
    (tmp_path / "kernelscope_inputs.py").write_text(stub)
    result = ok(driver.run(f"{path}::{qualname}"))
    assert result.finished.sidecar.timing.us_per_call > 0


def test_the_stub_in_the_pyprojects_inputs_module_runs(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kernelscope]\ninputs_module = "tools.inputs"\n')
    (tmp_path / "src").mkdir()
    path = tmp_path / "src" / "model.py"  # not a package: imported as `model`
    path.write_text((MODELS / "nanogpt_like.py").read_text())
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("")
    stub = stub_for(str(path), "GPT.forward")
    assert stub is not None and "from model import GPT, GPTConfig" in stub
    (tmp_path / "tools" / "inputs.py").write_text(stub)
    ok(driver.run(f"{path}::GPT.forward"))
