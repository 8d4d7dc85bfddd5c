"""The checks: ``find_<problem>(facts, options) -> Iterable[Finding]``, one module per finding,
in their default order here.

Each reads the Facts built once (facts.py) and yields Findings with a stable code; every
code is documented in docs/findings.md. Empty input gives no findings.
"""

from __future__ import annotations

from kernelscope.analysis.checks.below_roof import find_slow_ops
from kernelscope.analysis.checks.bound import find_bound
from kernelscope.analysis.checks.cold_start import find_dead_window
from kernelscope.analysis.checks.data_pipeline import find_data_pipeline
from kernelscope.analysis.checks.fusion import find_fusion_chains
from kernelscope.analysis.checks.gpu_idle import find_idle_gaps, find_launch_queue
from kernelscope.analysis.checks.graph_replays import find_graph_replays
from kernelscope.analysis.checks.host_memory import find_host_churn
from kernelscope.analysis.checks.measurement import (
    find_cpu_contention,
    find_profiler_distortion,
    find_throttled_clocks,
    find_uneven_steps,
    find_unsteady_timing,
)
from kernelscope.analysis.facts import Check
from kernelscope.analysis.memory_findings import find_memory
from kernelscope.analysis.syncs import find_sync_points

DEFAULT_CHECKS: tuple[Check, ...] = (
    find_bound,
    find_data_pipeline,
    find_dead_window,
    find_sync_points,
    find_idle_gaps,
    find_launch_queue,
    find_fusion_chains,
    find_slow_ops,
    find_graph_replays,
    find_profiler_distortion,
    find_cpu_contention,
    find_uneven_steps,
    find_unsteady_timing,
    find_throttled_clocks,
    find_memory,
    find_host_churn,
)
