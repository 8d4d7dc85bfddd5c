"""Where a report's files live: a trace's sidecar and cold-call trace beside it."""

from __future__ import annotations

from pathlib import Path

import msgspec

from kernelscope.protocol import ProfileFinished


def _stem(trace_path: str | Path) -> str:
    name = Path(trace_path).name
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def sidecar_path(trace_path: str | Path) -> Path:
    """Where the sidecar of a trace lives: beside it, `X.pt.trace.json.gz` -> `X.sidecar.json`."""
    return Path(trace_path).with_name(_stem(trace_path) + ".sidecar.json")


def companions(trace_path: str | Path) -> tuple[Path | None, Path | None]:
    """The sidecar and cold-call trace beside a trace, if present (`X.sidecar.json`,
    `X.cold.json.gz`; or `sidecar.json`, `cold.json.gz` in a fixture folder)."""
    folder, stem = Path(trace_path).parent, _stem(trace_path)
    side = next(
        (p for p in (folder / f"{stem}.sidecar.json", folder / "sidecar.json") if p.is_file()),
        None,
    )
    cold = next(
        (p for p in (folder / f"{stem}.cold.json.gz", folder / "cold.json.gz") if p.is_file()),
        None,
    )
    return side, cold


def save_sidecar(finished: ProfileFinished) -> Path:
    """Write the sidecar beside its trace, so `analyze` finds it later."""
    path = sidecar_path(finished.trace_path)
    path.write_bytes(msgspec.json.encode(finished.sidecar))
    return path
