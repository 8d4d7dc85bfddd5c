"""`kernelscope diff` end to end: the CLI keeps its runs in the project's store and diffs a
function's last two, two run ids, or two recorded traces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import FIXTURES, WORKLOADS


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelscope", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )


def test_the_cli_keeps_its_runs_and_diffs_the_last_two(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    shutil.copy(WORKLOADS / "three_lines.py", tmp_path / "three_lines.py")
    spec = "three_lines.py::three_lines"
    profile = ["profile", spec, "--device", "cpu", "--wait", "0", "--warmup", "1", "--active", "1"]
    assert run(tmp_path, *profile).returncode == 0
    one = run(tmp_path, "diff", spec)
    assert one.returncode == 2 and "has one run" in one.stderr
    source = tmp_path / "three_lines.py"
    source.write_text(source.read_text().replace("a @ a @ a @ a", "a @ a @ a @ a @ a @ a"))
    assert run(tmp_path, *profile).returncode == 0
    text = run(tmp_path, "diff", spec)
    assert text.returncode == 0, text.stderr
    assert "kernelscope diff · run " in text.stdout and "aten::mm" in text.stdout
    assert "(edited; was `b = a @ a @ a @ a`)" in text.stdout
    out = json.loads(run(tmp_path, "diff", spec, "--json").stdout)
    mm = next(d for d in out["ops"] if d["name"] == "aten::mm")
    assert (mm["calls_before"], mm["calls_after"]) == (3, 5)
    runs = sorted((tmp_path / ".kernelscope" / "runs").glob("*.json"))
    ids = [p.name.removesuffix(".json") for p in runs]
    by_id = run(tmp_path, "diff", ids[0], ids[1], "--json")
    assert by_id.returncode == 0 and json.loads(by_id.stdout)["ops"]


def test_diff_of_two_recorded_traces_and_of_nothing(tmp_path: Path) -> None:
    a = FIXTURES / "matmul_add_64" / "trace.json.gz"
    b = FIXTURES / "matmul_add_8192" / "trace.json.gz"
    done = run(tmp_path, "diff", str(a), str(b), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["regression"] is True
    bad = run(tmp_path, "diff", "nope", str(b))
    assert bad.returncode == 2 and "neither a run kept" in bad.stderr
