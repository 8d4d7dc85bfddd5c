"""The per-project store: records survive reloads; old runs and traces are pruned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec

from kernelscope.analysis.diagnose import load_sidecar
from kernelscope.app.store import RunRecord, Store
from kernelscope.report.build import replay_report

from support import FIXTURES


def make_run(store: Store, run_id: str, qualname: str, created: str, size: int = 1000) -> RunRecord:
    """A run whose trace, cold trace and sidecar are real files of `size` bytes."""
    store.traces_dir.mkdir(parents=True, exist_ok=True)
    trace = store.traces_dir / f"{qualname}-{run_id}.pt.trace.json.gz"
    shutil.copy(FIXTURES / "matmul_add_64" / "trace.json.gz", trace)
    report = replay_report(
        trace, load_sidecar(FIXTURES / "matmul_add_64" / "sidecar.json"), qualname, "/p/model.py"
    )
    cold = store.traces_dir / f"{qualname}-{run_id}.cold.json.gz"
    side = store.traces_dir / f"{qualname}-{run_id}.sidecar.json"
    for f in (trace, cold, side):
        f.write_bytes(b"x" * size)
    report.trace.path, report.trace.cold_path = str(trace), str(cold)
    return RunRecord(run_id, "/p/model.py", qualname, created, "h", report)


def test_records_survive_a_reload(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.add(make_run(store, "a1", "f", "2026-11-29T10:00:00+00:00"))
    again = Store(tmp_path)
    assert again.latest("/p/model.py", "f").run_id == "a1"  # type: ignore[union-attr]
    assert again.get("a1") is not None


def test_runs_saved_within_one_second_keep_their_order(tmp_path: Path) -> None:
    store = Store(tmp_path)
    same = "2026-11-29T10:00:00+00:00"  # `created` is to the second
    for run_id in ("z9", "a1", "m5"):  # ids sort in no useful order
        store.add(make_run(store, run_id, "f", same))
        assert store.latest("/p/model.py", "f").run_id == run_id  # type: ignore[union-attr]
    again = Store(tmp_path)  # and after a reload, from the records' files
    assert [r.run_id for r in again.history("/p/model.py", "f")] == ["z9", "a1", "m5"]


def test_keeps_the_last_runs_of_each_function(tmp_path: Path) -> None:
    store = Store(tmp_path, keep_per_function=2)
    runs = [make_run(store, f"r{i}", "f", f"2026-11-29T10:0{i}:00+00:00") for i in range(4)]
    for r in runs:
        store.add(r)
    store.add(make_run(store, "g0", "g", "2026-11-29T09:00:00+00:00"))
    assert [r.run_id for r in store.runs()] == ["g0", "r2", "r3"]
    assert not Path(runs[0].report.trace.path).exists()
    assert not Path(runs[0].report.trace.cold_path or "").exists()
    assert not (store.runs_dir / "r0.json").exists()
    assert Path(runs[3].report.trace.path).exists()


def test_total_trace_size_is_bounded(tmp_path: Path) -> None:
    store = Store(tmp_path, keep_per_function=5, max_bytes=10_000)
    for i in range(5):
        store.add(make_run(store, f"r{i}", f"f{i}", f"2026-11-29T10:0{i}:00+00:00", size=1500))
    kept = [r.run_id for r in store.runs()]
    assert kept == ["r3", "r4"]  # 3 files × 1500 B a run: two runs fit under 10 000 B


def test_unreadable_records_are_skipped(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.add(make_run(store, "ok", "f", "2026-11-29T10:00:00+00:00"))
    (store.runs_dir / "bad.json").write_text("{not json")
    (store.runs_dir / "old.json").write_text(json.dumps({"run_id": "x"}))
    again = Store(tmp_path)
    assert [r.run_id for r in again.runs()] == ["ok"]
    assert msgspec.json.decode((store.runs_dir / "ok.json").read_bytes())["qualname"] == "f"
