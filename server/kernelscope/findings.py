"""What the analyses produce: Findings with stable codes, severities and what to try."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import msgspec

DOCS_PAGE = Path(__file__).with_name("findings.md")  # docs/findings.md links here
#: The verdict's codes: overhead, memory, compute, host, transfer, mixed.
BOUND_CODES = ("KS101", "KS102", "KS103", "KS104", "KS105", "KS106")


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
