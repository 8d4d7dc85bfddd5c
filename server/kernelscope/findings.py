"""What the analyses produce: Findings with stable codes, severities and what to try."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import msgspec

DOCS_PAGE = Path(__file__).with_name("findings.md")  # docs/findings.md links here


class Code(StrEnum):
    """Every code kernelscope shows; findings.md has a section for each (a test checks)."""

    MISSING_INPUTS = "KS001"
    JOB_FAILED = "KS002"
    FUNCTION_TIMES = "KS100"
    OVERHEAD_BOUND = "KS101"
    MEMORY_BOUND = "KS102"
    COMPUTE_BOUND = "KS103"
    HOST_ONLY = "KS104"
    TRANSFER_BOUND = "KS105"
    MIXED = "KS106"
    DATA_PIPELINE = "KS107"
    COSTLY_LINE = "KS110"
    COLD_START = "KS201"
    SYNC = "KS301"
    IDLE_GAPS = "KS401"
    LAUNCH_QUEUE = "KS402"
    ELEMENTWISE_CHAIN = "KS501"
    PROFILER_DISTORTION = "KS601"
    UNEVEN_STEPS = "KS602"
    UNSTEADY_TIMING = "KS603"
    LOW_CLOCKS = "KS604"
    CPU_CONTENTION = "KS605"
    BELOW_ROOF = "KS701"
    GRAPH_REPLAY = "KS702"
    WHAT_IF = "KS801"
    REGRESSION = "KS802"
    COMMUNICATION_BOUND = "KS901"
    STRAGGLER = "KS902"
    MEMORY_HEAVY_LINE = "KS131"
    MEMORY_FRAGMENTED = "KS132"
    ALLOCATOR_CHURN = "KS133"


#: The verdict's codes: overhead, memory, compute, host, transfer, mixed.
BOUND_CODES = (
    Code.OVERHEAD_BOUND,
    Code.MEMORY_BOUND,
    Code.COMPUTE_BOUND,
    Code.HOST_ONLY,
    Code.TRANSFER_BOUND,
    Code.MIXED,
)


class Severity(StrEnum):
    """How loudly the editor shows a finding."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


class Finding(msgspec.Struct):
    """One diagnosis, at a source line when one is known."""

    code: str
    severity: Severity
    message: str
    path: str | None = None
    line: int | None = None
    try_: list[str] = msgspec.field(default_factory=list[str], name="try")
    evidence: dict[str, float | int | str] = msgspec.field(
        default_factory=dict[str, float | int | str]
    )

    @property
    def docs(self) -> str:
        """A file URI of this code's section of the findings page shipped with the package."""
        return f"{DOCS_PAGE.as_uri()}#{self.code.lower()}"
