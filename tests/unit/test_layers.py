"""The house's rules that import-linter cannot see: what `kernelscope serve` loads to start."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("kernelscope.analysis", "kernelscope.report", "kernelscope.render", "kernelscope.app.jobs")


def loaded_after(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_the_server_starts_without_the_analysis_modules() -> None:
    """The lazy doors named in pyproject.toml's import-linter contract are lazy."""
    modules = loaded_after("from kernelscope.lsp.main import create_server; create_server()")
    assert "kernelscope.lsp.commands" in modules  # the handlers are there
    assert not [m for m in modules if m.startswith(HEAVY)], modules
    assert "torch" not in modules and "numpy" not in modules


def test_the_cli_does_not_load_the_server() -> None:
    modules = loaded_after("import kernelscope.cli.main")
    assert not [m for m in modules if m.startswith("kernelscope.lsp")], modules
