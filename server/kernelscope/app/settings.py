"""The `kernelscope` settings section: typed, with defaults; a bad value falls back and says so."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from kernelscope.engine.kernel_choice import KernelChoiceError, checked_pattern
from kernelscope.engine.remotes import RemoteError, parse_remote
from kernelscope.protocol import DEFAULT_ACTIVE, DEFAULT_WAIT, DEFAULT_WARMUP

Check = Callable[[Any], bool]

DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
PROFILE_LENS = ("default", "all", "none")


@dataclass(frozen=True)
class Settings:
    """What the server reads from workspace/configuration (section `kernelscope`)."""

    worker_python: str | None = None
    device: str = "auto"
    wait: int = DEFAULT_WAIT
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    timeout: float = 120.0
    nproc: int = 1
    top_lines: int = 5
    profile_lens: str = "default"
    """Where the "▶ Profile" lens goes: `default` (not on input providers or dunders but
    `__call__`), `all` (every def) or `none`."""
    inputs: dict[str, str] = field(default_factory=dict[str, str])
    via: dict[str, str] = field(default_factory=dict[str, str])
    """Programs that call functions, like [tool.kernelscope.via] (which it extends)."""
    remotes: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    keep_per_function: int = 5
    max_trace_bytes: int = 1 << 30
    counters: bool = False
    """Measure each profile's call with Nsight Compute after it (like ``--counters``);
    [tool.kernelscope] counters turns it on per project."""
    counters_match: str | None = None
    """Which kernels the counters measure (like ``--counters-match``); [tool.kernelscope]
    counters_match wins. It does not turn counters on by itself."""
    perfetto_ui: str | None = None
    """Perfetto's UI build (a folder or perfetto-ui.zip) to serve instead of ui.perfetto.dev;
    relative paths are the project root's. Wins over [tool.kernelscope] perfetto_ui."""


def parse_settings(raw: object) -> tuple[Settings, list[str]]:
    """Settings from the client's JSON; each unusable value is named and left at its default."""
    s = Settings()
    problems: list[str] = []
    if raw is None:
        return s, problems
    if not isinstance(raw, dict):
        return s, [f"kernelscope settings must be an object, got {type(raw).__name__}"]
    data = cast(dict[str, Any], raw)

    def pick(path: str, check: Check, convert: Callable[[Any], Any] | None) -> Any:
        value: Any = data
        for key in path.split("."):
            if not isinstance(value, dict) or key not in value:
                return None
            value = cast(dict[str, Any], value)[key]
        if value is None:
            return None
        if not check(value):
            problems.append(f"kernelscope.{path}: {value!r} is not valid; using the default")
            return None
        return convert(value) if convert else value

    updates: dict[str, Any] = {}
    for name, path, check, convert in RULES:
        value = pick(path, check, convert)
        if value is not None:
            updates[name] = value
    if "remotes" in updates:
        updates["remotes"] = _usable_remotes(updates["remotes"], problems)
    return replace(s, **updates), problems


def _usable_remotes(raw: dict[str, Any], problems: list[str]) -> dict[str, dict[str, Any]]:
    """The remotes that parse; each one that does not is named in `problems` and left out."""
    usable: dict[str, dict[str, Any]] = {}
    for name, table in raw.items():
        try:
            parse_remote(name, table, f"kernelscope.remotes.{name}")
        except RemoteError as e:
            problems.append(f"{e}; ignoring this remote")
            continue
        usable[name] = table
    return usable


def _positive(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v > 0


def _bool(v: object) -> bool:
    return isinstance(v, bool)


def _text(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _device(v: object) -> bool:
    return isinstance(v, str) and DEVICE.match(v) is not None


def _one_of(*choices: str) -> Check:
    def check(v: object) -> bool:
        return v in choices

    return check


def _pattern(v: object) -> bool:
    try:
        checked_pattern(v, "countersMatch")
    except KernelChoiceError:
        return False
    return True


def _table(v: object) -> bool:
    return isinstance(v, dict)


def _count(minimum: int) -> Check:
    def check(v: object) -> bool:
        return (
            isinstance(v, int | float)
            and not isinstance(v, bool)
            and float(v).is_integer()
            and v >= minimum
        )

    return check


def _str_map(v: object) -> bool:
    return isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(x, str) for k, x in cast(dict[Any, Any], v).items()
    )


#: Each Settings field, the key under `kernelscope` it is read from, its check and conversion
#: (the VS Code extension declares the same keys with the same defaults; a test checks).
RULES: tuple[tuple[str, str, Check, Callable[[Any], Any] | None], ...] = (
    ("worker_python", "worker.python", _text, str.strip),
    ("device", "device", _device, None),
    ("wait", "schedule.wait", _count(0), int),
    ("warmup", "schedule.warmup", _count(0), int),
    ("active", "schedule.active", _count(1), int),
    ("timeout", "timeout", _positive, float),
    ("nproc", "nproc", _count(1), int),
    ("top_lines", "diagnostics.topLines", _count(0), int),
    ("profile_lens", "lens.profile", _one_of(*PROFILE_LENS), None),
    ("inputs", "inputs", _str_map, None),
    ("via", "via", _str_map, None),
    ("remotes", "remotes", _table, None),
    ("keep_per_function", "traces.keepPerFunction", _count(1), int),
    ("max_trace_bytes", "traces.maxBytes", _count(1 << 20), int),
    ("perfetto_ui", "perfettoUi", _text, str.strip),
    ("counters", "counters", _bool, None),
    ("counters_match", "countersMatch", _pattern, lambda v: v or None),  # "": cleared
)
