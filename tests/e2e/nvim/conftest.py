"""The Neovim tests' project: three_lines.py alone (nvim_driver.make_project)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvim_driver import make_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A throwaway project (results land in its .kernelscope/)."""
    return make_project(tmp_path / "proj")
