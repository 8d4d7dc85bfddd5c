"""Which kernels ``--counters`` measures: at most how many, and which by name."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Kernels measured at most per call: each is replayed once per pass of counters (~14 on H100).
DEFAULT_KERNELS = 64


class KernelChoiceError(ValueError):
    """A limit or a pattern that cannot be used, in one line."""


@dataclass(frozen=True)
class KernelChoice:
    """At most `limit` kernels of the call (ncu's --launch-count); with `match`, only the
    functions of the kernels whose names it matches (a regular expression, searched)."""

    limit: int = DEFAULT_KERNELS
    match: str = ""

    @classmethod
    def checked(
        cls,
        limit: object = DEFAULT_KERNELS,
        match: object = "",
        names: tuple[str, str] = ("counters_limit", "counters_match"),
    ) -> KernelChoice:
        """A choice from a user's values; KernelChoiceError says what is wrong with them,
        naming the setting (`names`: the limit's and the pattern's)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise KernelChoiceError(f"{names[0]} must be an integer >= 1, got {limit!r}")
        return cls(limit, checked_pattern(match, names[1]))


def checked_pattern(match: object, name: str) -> str:
    """`match` where it is a regular expression; else KernelChoiceError naming `name`."""
    if not isinstance(match, str):
        raise KernelChoiceError(f"{name} must be a regular expression, got {match!r}")
    try:
        re.compile(match)
    except re.error as e:
        raise KernelChoiceError(f"{name} {match!r} is not a regular expression: {e}") from None
    return match
