"""The worker's twins of server-side names and searches. The worker program cannot import
kernelscope (it runs alone on GPU hosts), so it keeps copies; these tests fail when a copy
drifts from the server's. The program is run as a module, without starting it, from the
text that is shipped to workers."""

from __future__ import annotations

import ast
import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelscope import protocol
from kernelscope.analysis import calls, facts, trace_model
from kernelscope.analysis.checks import cold_start
from kernelscope.analysis.trace_load import load_trace
from kernelscope.engine import clean_timing
from kernelscope.protocol import PERCENT, STAGE_LABELS

from support import FIXTURES
from support.worker import worker_namespace, worker_texts

COLD_TRACES = sorted(FIXTURES.glob("*/cold.json.gz"))
RECORDED = [*COLD_TRACES, *sorted(FIXTURES.glob("*/trace.json.gz"))]
TWINS = ("CALL_RANGE", "COLD_RANGE", "TIMING_WORKER_ENV", "DIST_TIMEOUT_ENV")


@pytest.fixture(scope="module")
def worker() -> dict[str, Any]:
    return worker_namespace()


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rb") as f:
        return json.load(f)["traceEvents"]


def _worker_counts_sync(worker: dict[str, Any], name: str) -> bool:
    """Whether the worker's line pass counts a runtime call of this name as a sync."""
    tally = worker["LineTally"](1)
    event = {"cat": "cuda_runtime", "name": name, "dur": 1.0, "args": {}}
    worker["attribute_event"](tally, [0, 0.0, 0.0, 0.0, 0.0, 0.0], event, {}, True)
    return tally.syncs[0] == 1


def test_the_call_range_is_the_one_the_server_finds_calls_by(worker) -> None:
    assert worker["CALL_RANGE"] == calls.CALL_RANGE


def test_the_timing_worker_env_is_the_one_the_engine_sets(worker) -> None:
    assert worker["TIMING_WORKER_ENV"] == clean_timing.TIMING_WORKER_ENV
    assert worker["CLEAN_WORKER"] == clean_timing.CLEAN_WORKER


def test_the_rank_variables_are_the_ones_the_engine_sets(worker) -> None:
    for name in ("DIST_RANK", "DIST_WORLD_SIZE", "DIST_LOCAL_RANK", "DIST_TIMEOUT_ENV",
                 "DIST_AGREE_PORT_ENV"):  # fmt: skip
        assert worker[name] == getattr(protocol, name), name


def test_a_lone_torchrun_rank_gets_the_variables_the_engine_gives_ranks(worker) -> None:
    from kernelscope.engine.ranks import rank_env

    engine = rank_env(0, 1, 29500, 30.0)
    lone = worker["torchrun_env"](0, 1, 29500)
    assert lone == {name: engine[name] for name in lone}
    assert {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"} <= set(lone)


def test_gpu_categories_are_the_trace_models(worker) -> None:
    assert len(set(worker["GPU_CATS"])) == len(worker["GPU_CATS"])
    assert frozenset(worker["GPU_CATS"]) == trace_model.GPU_CATS


@pytest.mark.parametrize("name", [*TWINS, "GPU_CATS", "SYNC_CALLS"])
def test_each_twin_value_is_written_once_in_the_worker(name: str, worker) -> None:
    """The constant is the only place its value is spelled: every use goes through it."""
    value = worker[name]
    values = value if isinstance(value, tuple) else (value,)
    literals = [
        node.value
        for text in worker_texts().values()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    for v in values:
        assert literals.count(v) == 1, f"{v!r} is spelled out in the worker beside {name}"


def test_the_dead_window_check_finds_the_workers_cold_range(worker, tmp_path: Path) -> None:
    """checks/cold_start.py looks the cold call up by name: a recorded cold trace, its entry
    annotation named as the worker names it now, must give KS201 its breakdown."""
    folder = FIXTURES / "matmul_add_8192"
    dead = json.loads((folder / "sidecar.json").read_text())["cold"]["entry_to_first_kernel_us"]
    events = _events(folder / "cold.json.gz")

    def parts(entry_name: str) -> list[str]:
        renamed = [{**e, "name": entry_name} if e.get("name") == "ks:cold" else e for e in events]
        path = tmp_path / f"{entry_name.replace(':', '_')}.json"
        path.write_text(json.dumps({"traceEvents": renamed}))
        return cold_start._dead_window_parts(load_trace(path), dead)

    assert parts("ks:not-cold") == []  # the control: another name is not found
    assert parts(worker["COLD_RANGE"]), "the server does not find the worker's cold range"


@pytest.mark.parametrize("path", COLD_TRACES, ids=lambda p: p.parent.name)
def test_first_kernel_searches_agree_on_recorded_cold_calls(path: Path, worker) -> None:
    ours = worker["first_kernel_after"](_events(path), worker["COLD_RANGE"])
    server = facts.first_kernel_delay(load_trace(path))
    recorded = json.loads((path.parent / "sidecar.json").read_text())["cold"]
    assert ours is not None
    assert ours > 0
    assert server == pytest.approx(ours, abs=1e-3)
    assert recorded["entry_to_first_kernel_us"] == pytest.approx(ours, abs=1e-3)


def test_there_are_cold_traces_to_compare() -> None:
    assert len(COLD_TRACES) >= 10


def test_the_workers_sync_calls_are_the_servers(worker) -> None:
    assert worker["SYNC_CALLS"] == facts.SYNC_CALLS


def test_the_cold_range_is_the_one_the_server_reads(worker) -> None:
    assert worker["COLD_RANGE"] == calls.COLD_RANGE


def test_every_stage_the_worker_sends_has_a_label(worker) -> None:
    texts = "\n".join(worker_texts().values())
    sent = set(re.findall(r'(?:self|job)\.progress\("(\w+)"', texts)) - {"done"}
    sent |= set(worker["STAGES_PROFILED"])
    assert sent and sent <= set(STAGE_LABELS)
    assert set(PERCENT) == set(STAGE_LABELS)


def test_sync_rules_agree_on_every_recorded_runtime_call(worker) -> None:
    names = {
        e["name"]
        for path in RECORDED
        for e in _events(path)
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
    }
    disagree = sorted(n for n in names if _worker_counts_sync(worker, n) != facts.is_sync(n))
    assert disagree == []
    syncs = {n for n in names if facts.is_sync(n)}
    assert {"cudaDeviceSynchronize", "cudaStreamSynchronize"} <= syncs
    assert "cudaLaunchKernel" in names


SYNC_CANDIDATES = (
    *("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize"),
    *("cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpy2D", "cudaMemcpy2DAsync"),
    *("cudaMemcpyToSymbol", "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cuMemcpyDtoHAsync_v2"),
    *("hipMemcpy", "hipMemcpyAsync", "hipDeviceSynchronize", "cudaLaunchKernel"),
)


def test_sync_rules_agree_beyond_the_recordings(worker) -> None:
    """Names no recording holds (2D copies, symbols, HIP): the two rules still agree."""
    disagree = [n for n in SYNC_CANDIDATES if _worker_counts_sync(worker, n) != facts.is_sync(n)]
    assert disagree == []
    assert not facts.is_sync("cudaMemcpyAsync") and facts.is_sync("cudaMemcpy2D")


def test_the_program_digest_is_the_servers(worker, tmp_path: Path) -> None:
    """A saved capture is reused only while the digest the worker took when it saved it
    equals the server's of the program now: the two must hash alike."""
    from kernelscope.engine.captures import program_digest

    folder = tmp_path / "prog"
    shutil.copytree(FIXTURES.parent / "tests" / "workloads" / "minigpt", folder)
    (folder / ".kernelscope").mkdir()
    (folder / ".kernelscope" / "ignored.txt").write_text("not the program's")
    argv = ["train.py", "config/tiny.py", "--max_iters=3"]
    ours = worker["program_digest"](str(folder), argv)
    assert ours == program_digest(folder, argv)
    (folder / "config" / "tiny.py").write_text("n_layer = 3\n")
    assert worker["program_digest"](str(folder), argv) == program_digest(folder, argv) != ours
    assert program_digest(folder, [*argv[:2], "--max_iters=4"]) != program_digest(folder, argv)
    # a run's logs (the Lightning-Hydra template's logs/train/runs/<time>/) are not inputs
    before = program_digest(folder, argv)
    run = folder / "logs" / "train" / "runs" / "2026-12-05_21-05-40" / ".hydra"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 1\n")
    (folder / "outputs").mkdir()
    (folder / "outputs" / "main.log").write_text("epoch 1\n")
    assert worker["program_digest"](str(folder), argv) == program_digest(folder, argv) == before


def test_the_programs_files_are_the_servers(worker, tmp_path: Path) -> None:
    """What the worker records of a program when it keeps a capture, and what the server
    compares it with: files under the folder, a config the argv names outside it (also after
    `=`), a large file by its size and time; the capture's file name."""
    from kernelscope.engine import captures

    folder, shared = tmp_path / "prog", tmp_path / "shared"
    folder.mkdir()
    shared.mkdir()
    (folder / "train.py").write_text("print(1)\n")
    (folder / "data.bin").write_bytes(b"x" * (captures.MAX_FILE_BYTES + 1))
    (shared / "a.yaml").write_text("lr: 1\n")
    (shared / "b.yaml").write_text("lr: 2\n")
    argv = ["train.py", "-c", "../shared/a.yaml", f"--extra={shared / 'b.yaml'}", "x=1"]
    ours = worker["program_files"](str(folder), argv)
    assert ours == captures.program_files(folder, argv)
    assert set(ours) == {"train.py", "data.bin", str(shared / "a.yaml"), str(shared / "b.yaml")}
    assert (
        ours["data.bin"]
        == f"{captures.MAX_FILE_BYTES + 1}@{(folder / 'data.bin').stat().st_mtime_ns}"
    )
    assert worker["digest_of"](ours, argv) == captures.digest_of(ours, argv)
    name = worker["capture_name"]("Block.forward", 2, "train.py x", None)
    assert name == captures.capture_name("Block.forward", 2, "train.py x", None)
    assert name.startswith("Block_forward-call2-") and name.endswith(".pt")
    assert name != captures.capture_name("Block.forward", 2, "train.py y", None)
    env = {"ACCELERATE_MIXED_PRECISION": "bf16", "OMP_NUM_THREADS": "1"}
    launched = worker["capture_name"]("Block.forward", 2, "train.py x", None, env)
    assert launched == captures.capture_name("Block.forward", 2, "train.py x", None, env)
    assert launched != name


def test_the_too_few_calls_hint_is_the_one_the_engine_extends() -> None:
    from kernelscope.engine.stuck import RUN_LONGER

    assert f'hint = "{RUN_LONGER}' in worker_texts()["inplace.py"]
