"""What the analyses produce: Findings with stable codes, severities and what to try."""

from __future__ import annotations

from enum import StrEnum

import msgspec

DOCS_PAGE = "docs/findings.md"


class Severity(StrEnum):
    """How loudly the editor shows a finding."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


class Finding(msgspec.Struct, omit_defaults=True):
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
        """This code's section of docs/findings.md, relative to the project's root."""
        return f"{DOCS_PAGE}#{self.code.lower()}"
