"""The memory pass through the real worker (CPU: the profiler's memory events)."""

from __future__ import annotations

import pytest

from kernelscope.protocol import MemoryPass

from support import WORKLOADS
from support.jobs import LauncherDriver, ok

TRAIN = WORKLOADS / "memory_train.py"
# Mlp(256 -> 1024 -> 256) in fp32: weights and biases.
PARAM_BYTES = 4 * (256 * 1024 + 1024 + 1024 * 256 + 256)


@pytest.fixture(scope="module")
def train_memory(driver: LauncherDriver) -> MemoryPass:
    side = ok(driver.run(f"{TRAIN}::train_step", line_pass=False)).finished.sidecar
    assert side.memory_pass is not None
    return side.memory_pass


def test_the_kinds_held_before_the_call_are_the_model_and_adamw_sizes(
    train_memory: MemoryPass,
) -> None:
    held = train_memory.baseline_kinds
    assert held["parameters"] == PARAM_BYTES
    assert held["gradients"] == PARAM_BYTES
    # AdamW's exp_avg and exp_avg_sq per parameter, and a 4-byte step per parameter
    assert held["optimizer_state"] == 2 * PARAM_BYTES + 4 * 4
    assert set(train_memory.objects) == {"Mlp", "AdamW"}
    assert train_memory.source == "profiler memory events (CPU)"
    assert train_memory.approximate  # the CPU path says what it approximates


def test_gradients_made_in_backward_land_on_the_forward_lines(
    train_memory: MemoryPass,
) -> None:
    grads = {
        (m.line, m.via): m.kinds.get("gradients", 0)
        for m in train_memory.lines
        if m.path == str(TRAIN)
    }
    # self.up (line 15) and self.down (line 17): weight + bias gradients, by sequence number
    assert grads[(15, "backward")] == 4 * (256 * 1024 + 1024)
    assert grads[(17, "backward")] == 4 * (1024 * 256 + 256)
    assert train_memory.kinds_at_peak["gradients"] == PARAM_BYTES


def test_what_the_call_leaves_held_is_the_model_and_adamw_sizes(
    train_memory: MemoryPass,
) -> None:
    assert train_memory.kinds_after_call == {
        "parameters": PARAM_BYTES,
        "gradients": PARAM_BYTES,
        "optimizer_state": 2 * PARAM_BYTES + 4 * 4,
    }


def test_the_peak_and_activations_saved_for_backward(train_memory: MemoryPass) -> None:
    m = train_memory
    assert m.peak_allocated_bytes == m.trace_peak_bytes
    assert m.peak_allocated_bytes >= m.baseline_bytes + PARAM_BYTES  # the new gradients
    rows = {(r.line, r.via): r for r in m.lines if r.path == str(TRAIN)}
    # out = model(x): the down projection's output (64 x 256 fp32), saved by square()
    assert rows[(17, "")].kinds.get("activations") == 64 * 256 * 4
    assert all(r.freed_bytes <= r.allocated_bytes for r in m.lines if r.path)
    assert 2 <= len(m.timeline) <= 200
    assert max(v for _t, v in m.timeline) == m.trace_peak_bytes
    assert m.call_us > 0 and 0 <= m.peak_at_us <= m.call_us


def test_churn_is_bytes_allocated_and_freed_per_line(driver: LauncherDriver) -> None:
    m = ok(driver.run(f"{TRAIN}::churn", line_pass=False)).finished.sidecar.memory_pass
    assert m is not None
    loop = {r.line: r for r in m.lines if r.path == str(TRAIN)}[39]
    assert loop.allocations == 16  # randn and the sum, 8 times
    assert loop.allocated_bytes == 16 * 256 * 4
    assert loop.freed_bytes >= 14 * 256 * 4


def test_no_memory_skips_the_pass(driver: LauncherDriver) -> None:
    side = ok(driver.run(f"{TRAIN}::churn", line_pass=False, memory_pass=False)).finished.sidecar
    assert side.memory_pass is None


def test_a_generation_loops_kv_cache_is_held_at_the_peak_at_its_size(
    driver: LauncherDriver,
) -> None:
    """Issue 26's built case: the cache of a generation loop, allocated once per call, is what
    the line that made it holds at the peak, byte for byte."""
    kv = WORKLOADS / "memory_kv.py"
    side = ok(driver.run(f"{kv}::generate", line_pass=False)).finished.sidecar
    m = side.memory_pass
    assert m is not None and not m.error
    line = next(
        i for i, t in enumerate(kv.read_text().splitlines(), 1) if "cache = torch.zeros" in t
    )
    rows = {(r.line, r.via): r for r in m.lines if r.path == str(kv)}
    cache = rows[(line, "")]
    assert cache.live_at_peak_bytes == 2 * 2 * 4 * (8 + 24) * 64 * 4  # LAYERS·2·B·T·W fp32
    assert cache.kinds == {"temporaries": cache.live_at_peak_bytes}  # inference mode: no saves
    assert m.kinds_at_peak.get("activations", 0) == 0
    assert max(rows.values(), key=lambda r: r.live_at_peak_bytes) is cache
