"""Constants with one home: the copies the editors and the front ends must keep are pinned to it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from kernelscope.app.settings import RULES, Settings
from kernelscope.cli.main import build_parser
from kernelscope.engine.targets import Schedule
from kernelscope.protocol import DEFAULT_ACTIVE, DEFAULT_WAIT, DEFAULT_WARMUP, RunProfile

from support import REPO_ROOT

SCHEDULE = (DEFAULT_WAIT, DEFAULT_WARMUP, DEFAULT_ACTIVE)


def vscode_settings() -> dict[str, Any]:
    manifest = json.loads((REPO_ROOT / "editor-client/vscode/package.json").read_text())
    configuration = manifest["contributes"]["configuration"]
    blocks = configuration if isinstance(configuration, list) else [configuration]
    return {k: v for block in blocks for k, v in block["properties"].items()}


def test_every_schedule_default_is_the_protocols() -> None:
    request = RunProfile(
        job_id="", path="", qualname="", module_name="", project_root="", trace_dir=""
    )
    settings = Settings()
    args = build_parser().parse_args(["profile", "x.py::f"])
    assert (request.wait, request.warmup, request.active) == SCHEDULE
    assert dataclasses.astuple(Schedule()) == SCHEDULE
    assert (settings.wait, settings.warmup, settings.active) == SCHEDULE
    assert (args.wait, args.warmup, args.active) == SCHEDULE


def test_the_vscode_settings_are_the_servers_with_its_defaults() -> None:
    declared = vscode_settings()
    defaults = Settings()
    for field, key, _, _ in RULES:
        entry = declared.get(f"kernelscope.{key}")
        assert entry is not None, f"package.json does not declare kernelscope.{key}"
        assert entry.get("default") == getattr(defaults, field), key
    client_only = {"kernelscope.server.python"}  # which Python runs the server itself
    assert set(declared) - {f"kernelscope.{key}" for _, key, _, _ in RULES} == client_only
