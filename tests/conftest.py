"""Shared fixtures: one event loop and one warm launcher per test module."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.runner import JobFailed, JobResult
from kernelscope.engine.targets import Schedule, build_request, load_target
from kernelscope.protocol import JobProgress, ProfileFailed

from lsp_helpers import SERVER, capabilities, decode_code_actions_faithfully, make_project
from remote.sshd import Sshd, missing, start_sshd

WORKLOADS = Path(__file__).parent / "workloads"
REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "fixtures"


def cuda_available() -> bool:
    """Whether this test process's torch sees a CUDA GPU."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


NEEDS_GPU = pytest.mark.skipif(
    not cuda_available(),
    reason="needs a CUDA GPU (none here); the GPU path is covered by the recorded H200 "
    "fixtures in test_gpu_fixtures.py",
)


class LauncherDriver:
    """Runs launcher jobs synchronously on a private event loop."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.launcher = Launcher(python=sys.executable)
        self.tmp = tmp
        self.progress: list[JobProgress] = []

    def run(self, spec: str, timeout: float = 60.0, **options: Any) -> JobResult | ProfileFailed:
        source = options.pop("source", None)
        options.setdefault("device", "cpu")  # the same results on a GPU host
        schedule = Schedule(
            options.pop("wait", 1), options.pop("warmup", 1), options.pop("active", 2)
        )
        target = load_target(spec, source=source)
        request = build_request(target, self.tmp / "traces", schedule, source=source, **options)
        self.progress = []
        try:
            return self.loop.run_until_complete(
                self.launcher.profile(request, self.progress.append, timeout)
            )
        except JobFailed as e:
            return e.failure

    def close(self) -> None:
        self.loop.run_until_complete(self.launcher.close())
        self.loop.close()


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LauncherDriver]:
    d = LauncherDriver(tmp_path_factory.mktemp("ks"))
    yield d
    d.close()


def ok(result: JobResult | ProfileFailed) -> JobResult:
    assert isinstance(result, JobResult), f"job failed: {result}"
    return result


def failed(result: JobResult | ProfileFailed) -> ProfileFailed:
    assert isinstance(result, ProfileFailed), "expected the job to fail"
    return result


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
    """A throwaway OpenSSH server on 127.0.0.1 (tests/remote/sshd.py); skips without one."""
    why = missing()
    if why is not None and os.environ.get("KERNELSCOPE_REQUIRE_SSHD"):
        pytest.fail(f"KERNELSCOPE_REQUIRE_SSHD is set (CI) but {why}")
    if why is not None:
        pytest.skip(f"needs OpenSSH: {why}")
    with start_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
