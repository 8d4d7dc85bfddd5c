"""Shared fixtures: one event loop and one warm launcher per test module, a language server
on a throwaway project, a throwaway sshd. What the tests share besides fixtures is in
tests/support/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from support.jobs import LauncherDriver
from support.lsp import SERVER, capabilities, decode_code_actions_faithfully, make_project
from support.sshd import Sshd, missing, start_sshd

TESTS = Path(__file__).parent
# tests/workloads/ holds programs to profile, not tests; minigpt/ there is a project of its
# own, with its own tests/test_model.py, run from its folder.
collect_ignore_glob = ["workloads/*"]
FOLDER_MARKS = ("e2e", "gpu")  # every test under tests/e2e/ is `e2e`, under tests/gpu/ `gpu`


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The markers of a test's folder (FOLDER_MARKS), and `ssh` where it uses the sshd fixture."""
    for item in items:
        if item.path.is_relative_to(TESTS):
            folder = item.path.relative_to(TESTS).parts[0]
            if folder in FOLDER_MARKS:
                item.add_marker(folder)
        if "sshd" in item.fixturenames:
            item.add_marker("ssh")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LauncherDriver]:
    d = LauncherDriver(tmp_path_factory.mktemp("ks"))
    yield d
    d.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A throwaway project with the test workloads (results land in its .kernelscope/)."""
    return make_project(tmp_path / "proj")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, project: Path):  # type: ignore[no-untyped-def]
    """A kernelscope server with pytest-lsp's client, initialized on `project`."""
    decode_code_actions_faithfully(lsp_client)
    lsp_client.set_configuration(
        {"device": "cpu", "schedule": {"wait": 0, "warmup": 1, "active": 2}}, section="kernelscope"
    )
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=capabilities(),
            root_uri=project.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(project.as_uri(), "proj")],
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A throwaway OpenSSH server on 127.0.0.1 (tests/support/sshd.py); skips without one."""
    why = missing()
    if why is not None and os.environ.get("KERNELSCOPE_REQUIRE_SSHD"):
        pytest.fail(f"KERNELSCOPE_REQUIRE_SSHD is set (CI) but {why}")
    if why is not None:
        pytest.skip(f"needs OpenSSH: {why}")
    with start_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
