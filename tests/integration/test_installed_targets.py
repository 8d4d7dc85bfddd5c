"""A function of an installed package (torch's own `GELU.forward`, in site-packages)
profiled from the user's project: its inputs come from the project's kernelscope_inputs.py
(its imports from the project, not from the package's folder), and its trace and history
stay in the project, none of it written into the installation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch.nn.modules.activation as activation

# the project's own `utils`: torch/nn/modules has a utils.py too, which must not shadow it
PROVIDER = """import torch
import utils


def GELU_forward_inputs():
    return torch.nn.GELU(approximate="tanh"), torch.randn(utils.SIZE, utils.SIZE)
"""


def test_torchs_own_function_from_the_users_project(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "scripts").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (project / "kernelscope_inputs.py").write_text(PROVIDER)
    (project / "utils.py").write_text("SIZE = 256\n")
    library = Path(activation.__file__).resolve()
    before = sorted(p.name for p in library.parent.iterdir())
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", f"{library}::GELU.forward", "--json",
         "--no-lines"],
        cwd=project / "scripts", capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["inputs_from"] == "kernelscope_inputs.py::GELU_forward_inputs"
    trace = Path(out["trace"]["path"])
    assert trace.is_file() and trace.is_relative_to(project / ".kernelscope")
    assert sorted(p.name for p in library.parent.iterdir()) == before


def test_an_installed_function_named_by_its_module(tmp_path: Path) -> None:
    """`torch.nn.modules.activation::GELU.forward`, as its users know it: the worker's
    interpreter finds the file (without importing torch in the CLI)."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (project / "kernelscope_inputs.py").write_text(PROVIDER)
    (project / "utils.py").write_text("SIZE = 64\n")

    def run(spec: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kernelscope", "profile", spec, "--json", "--no-lines",
             "--no-memory"],
            cwd=project, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    proc = run("torch.nn.modules.activation::GELU.forward")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert Path(out["function"]["path"]) == Path(activation.__file__).resolve()
    proc = run("torch.nn.modules.activationz::GELU.forward")
    assert proc.returncode == 2
    assert "no such file or module: torch.nn.modules.activationz" in proc.stderr
