"""What the tests share besides pytest fixtures (those are in tests/conftest.py).

tests/ is on sys.path (`pythonpath` in pyproject.toml's [tool.pytest.ini_options]), so a test
anywhere under tests/ imports these as `support` and `support.<module>`:

- here: the repository's paths;
- `support.gpu`: whether torch sees a CUDA GPU, and the skip of tests that need one;
- `support.jobs`: a launcher driven synchronously, `ok` and `failed`;
- `support.lsp`: the language-server tests' client, capabilities and project;
- `support.sshd`: a throwaway OpenSSH server on 127.0.0.1;
- `support.remote_project`: the remote tests' project and their driver of any job runner;
- `support.traces`: builders of hand-made Kineto traces, and the traces several files use;
- `support.png`: a reader of the PNG charts `kernelscope scale` draws;
- `support.mcp`: a client of `kernelscope mcp` over stdio (the MCP SDK's own).
- `support.beside`: a CPU-only host-speed probe run beside timings (`support.host_probe`).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent.parent
WORKLOADS = TESTS / "workloads"
REPO_ROOT = TESTS.resolve().parent
FIXTURES = REPO_ROOT / "fixtures"
#: A stand-in for Perfetto's released UI build, laid out as the real one (see its README.md).
PERFETTO_UI_STANDIN = TESTS / "standins" / "perfetto-ui"
