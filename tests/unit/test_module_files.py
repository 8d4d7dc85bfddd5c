"""A module's dotted name found as its file, by the worker's interpreter, without importing
the module."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelscope.engine.module_files import is_module_name, module_file


def test_a_package_and_its_submodules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "mylib"
    (pkg / "models").mkdir(parents=True)
    # importing the package would fail: finding it must not import it
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "resnet.py").write_text("def f():\n    pass\n")
    (tmp_path / "single.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert module_file("mylib.models.resnet", sys.executable) == pkg / "models" / "resnet.py"
    assert module_file("mylib.models") == pkg / "models" / "__init__.py"
    assert module_file("mylib") == pkg / "__init__.py"
    assert module_file("single") == tmp_path / "single.py"
    assert module_file("mylib.nope") is None
    assert module_file("no_such_top_level_module_x") is None
    assert module_file("sys") is None  # built in: no source file
    assert module_file("mylib.models.resnet", "/no/such/python") is None


def test_what_reads_as_a_module_name() -> None:
    assert is_module_name("timm.models.resnet") and is_module_name("model")
    assert not is_module_name("model.py/x") and not is_module_name("a..b")
    assert not is_module_name("") and not is_module_name("./train")
    assert not is_module_name("model.py")  # a missing file, not module `model`'s `py`
