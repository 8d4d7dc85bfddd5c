"""A function the program calls only in its forked DataLoader workers (a Dataset's
`__getitem__`, a `worker_init_fn`): the call is taken in the worker, handed to the main
process and profiled there as the worker ran it (its WorkerInfo, its one thread); what
cannot be handed over, and in place, say why and what to do."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import WORKLOADS

TARGET = "worker_calls.py::Rows.__getitem__"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("worker_calls")
    shutil.copy(WORKLOADS / "worker_calls.py", root)
    (root / "pyproject.toml").write_text("[project]\nname = 'worker-calls'\n")
    return root


def profile(project: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", *args, "--json", "--no-memory"],
        cwd=project, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_a_call_made_in_a_dataloader_worker_is_profiled(project: Path, start_method: str) -> None:
    """Forked workers have the main process's watch; spawned and forkserver ones get theirs
    as they unpickle their process object (and the script's class, `__mp_main__.Rows`
    there, unpickles in the main process)."""
    via = f"worker_calls.py --start-method {start_method}"
    code, out, err = profile(project, TARGET, "--via", via)
    assert code == 0, err[-3000:]
    site = out["call_site"]
    (made,) = [m for m in site["modes"] if m.startswith("made in DataLoader worker")]
    assert made.endswith("replayed in the main process with its 1 thread")
    # the worker's one intra-op thread, and its WorkerInfo: the function asserts it has one
    assert out["device"]["threads"] == 1
    assert out["timing"]["unprofiled_us_per_call"] > 0
    if start_method == "fork":  # the fork's stack holds the loop's line; a spawn's has none
        assert site["caller_path"].endswith("worker_calls.py")
    else:
        assert site["caller_path"] is None


def test_an_argument_that_cannot_be_pickled_is_named(project: Path) -> None:
    """The workers' calls cannot be saved (the dataset holds an open file) and the main
    process makes none: the program runs to its end, and the error names the attribute."""
    code, out, err = profile(project, TARGET, "--via", "worker_calls.py --handle")
    assert code == 1 and "Traceback" not in err
    failure = out["error"]
    assert failure["kind"] == "child_call"
    assert "could not be handed to the main process" in failure["message"]
    assert "its .log (TextIOWrapper) cannot be saved" in failure["message"]
    assert "num_workers at 0" in failure["hint"]


def test_the_main_process_call_is_taken_where_the_workers_cannot_be(project: Path) -> None:
    """A worker's call that cannot be saved gives way: the main process's own call (after
    the first batch) is profiled, as before workers' calls were handed over."""
    code, out, err = profile(project, TARGET, "--via", "worker_calls.py --handle --main-too")
    assert code == 0, err[-3000:]
    modes = out["call_site"]["modes"]
    assert not any(m.startswith("made in") for m in modes), modes


def test_in_place_says_where_the_calls_were(project: Path) -> None:
    """From Python 3.12 the forked workers note their calls (sys.monitoring costs them
    nothing); before, their tracer goes at the fork and the hint comes from the forks
    counted: the same advice either way."""
    code, out, err = profile(project, TARGET, "--via", "worker_calls.py", "--in-place")
    assert code == 1 and "Traceback" not in err
    failure = out["error"]
    assert failure["kind"] == "too_few_calls"
    assert "made 0 calls" in failure["message"]
    assert "profile it without --in-place" in failure["hint"]


def test_a_call_no_worker_reached(project: Path) -> None:
    code, out, err = profile(project, TARGET, "--via", "worker_calls.py", "--call", "5000")
    assert code == 1 and "Traceback" not in err
    failure = out["error"]
    assert failure["kind"] == "not_called"
    assert "none of which made call 5000 of its own" in failure["hint"]
