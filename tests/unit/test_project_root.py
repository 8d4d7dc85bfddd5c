"""find_root: a project's file, a file of no project, and a file of an installed package,
which belongs to the working folder's project (not to site-packages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.engine.project import find_root, load_project
from kernelscope.pyfunctions import INPUTS_FILE


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("def f():\n    return 1\n")
    return path


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A pip --target folder holding one package, as `pip install --target` leaves it."""
    site = tmp_path / "site"
    (site / "pkg-1.0.dist-info").mkdir(parents=True)
    epoch = _file(site / "pkg" / "loops" / "epoch.py")
    for package in (epoch.parent, epoch.parent.parent):
        (package / "__init__.py").touch()
    return epoch


def test_a_projects_file_and_a_file_of_no_project(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    assert find_root(_file(tmp_path / "proj" / "src" / "m.py")) == tmp_path / "proj"
    loose = _file(tmp_path / "loose" / "m.py")
    assert find_root(loose) == loose.parent


def test_an_installed_packages_file_belongs_to_the_working_folders_project(
    tmp_path: Path, installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user"
    (user / "scripts").mkdir(parents=True)
    (user / ".git").mkdir()
    monkeypatch.chdir(user / "scripts")
    assert find_root(installed) == user
    project = load_project(installed)
    assert project.module_name(installed) == "pkg.loops.epoch"  # through its packages still
    assert project.inputs_file(installed) == user / INPUTS_FILE  # not into the installation
    bare = tmp_path / "bare"
    bare.mkdir()
    monkeypatch.chdir(bare)  # a working folder of no project is its own root
    assert find_root(installed) == bare


def test_markers_in_and_above_the_installation_are_not_the_users_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv inside the user's project, and a package that ships a setup.py: neither
    marker is the user's project; the working folder decides."""
    venv_site = tmp_path / "proj" / ".venv" / "lib" / "python3.12" / "site-packages"
    (venv_site / "torch-2.13.0.dist-info").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    linear = _file(venv_site / "torch" / "nn" / "linear.py")
    (venv_site / "torch" / "setup.py").write_text("")  # numpy < 1.26 shipped its setup.py
    elsewhere = tmp_path / "other"
    (elsewhere / ".git").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    assert find_root(linear) == elsewhere


def test_a_system_pythons_dist_packages_holds_only_egg_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "usr" / "lib" / "python3" / "dist-packages"
    (dist / "numpy-1.24.2.egg-info").mkdir(parents=True)
    file = _file(dist / "numpy" / "linalg.py")
    monkeypatch.chdir(tmp_path)
    assert find_root(file) == tmp_path
