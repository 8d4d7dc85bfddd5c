"""A remote worker over loopback ssh against a local one: warm round trip and a 100 MB trace.

Starts the tests' throwaway sshd on 127.0.0.1 (tests/support/sshd.py) and two warm launchers,
one local and one remote (`ssh ks-test`, files shipped, traces sent back), then, side by side:

  (a) the warm round trip: the wall time of the same small job (matmul_add, n=64), local
      and remote, alternating, ``--rounds`` each; the medians, their difference (target:
      remote <= local + 0.5 s) and ratio;
  (b) a job whose trace is ~``--trace-mb`` MB (a loop of tiny ops, no line pass), local and
      remote: its trace's size plain and gzip'd, the bytes of the frames that carried it
      back, the bytes that crossed the loopback interface, and the extra wall time;
  (c) that loop's trace repeats itself and compresses unusually well, so: a ``--real-mb``
      MB trace made of the real H200 recordings (bench/trace_speed.py's synthesizer), gzip'd
      as the worker gzips its traces; its size, and the frame bytes it would take (base64).

    python bench/remote_overhead.py [--rounds 10] [--trace-mb 100] [--real-mb 100]

A round count or size of 0 skips that part.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobResult
from kernelscope.engine.targets import Schedule, build_request, load_target

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "bench")]
from support.sshd import missing, start_sshd  # noqa: E402

SMALL = f"{REPO}/fixtures/workloads/matmul_add.py::matmul_add"
BIG_SOURCE = """import torch


def many_ops(n: int = 1000):
    x = torch.ones(4)
    for _ in range(n):
        x = x + 1
    return x


def many_ops_inputs(batch_size: int = 1, device: str = "cpu"):
    return (batch_size,)
"""
MB = 1e6
OPS_PER_MB = 90  # tiny ops per call per MB of trace (5 active steps, stacks and shapes on)


def loopback_bytes() -> int:
    """Bytes received on `lo` so far (each byte sent over loopback is received once)."""
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            return int(rest.split()[0])
    return 0


async def job(launcher: Launcher, spec: str, trace_dir: Path, **options: object) -> JobResult:
    request = build_request(load_target(spec), trace_dir, Schedule(1, 3, 5), **options)  # type: ignore[arg-type]
    return await launcher.profile(request, timeout=900.0)


async def round_trips(local: Launcher, remote: Launcher, rounds: int, out: Path) -> None:
    walls: dict[str, list[float]] = {"local": [], "remote": []}
    for launcher in (local, remote):  # one job each first: imports, shipping, caches
        await job(launcher, SMALL, out)
    for _ in range(rounds):
        for name, launcher in (("local", local), ("remote", remote)):
            t0 = time.perf_counter()
            await job(launcher, SMALL, out)
            walls[name].append(time.perf_counter() - t0)
    print(f"(a) warm round trip, {SMALL.rsplit('/', 1)[1]} (n=64), {rounds} rounds each")
    print(f"    {'':>8} {'local':>10} {'remote':>10} {'extra':>10} {'ratio':>7}")
    for label, pick in (("median", statistics.median), ("best", min)):
        here, there = pick(walls["local"]), pick(walls["remote"])
        print(
            f"    {label:>8} {here:>9.3f}s {there:>9.3f}s {there - here:>+9.3f}s "
            f"{there / here:>6.2f}x"
        )
    extra = statistics.median(walls["remote"]) - statistics.median(walls["local"])
    print(f"    target: median extra <= 0.5 s -> {'met' if extra <= 0.5 else 'NOT met'}")


async def big_trace(local: Launcher, remote: Launcher, trace_mb: float, out: Path) -> None:
    project = out / "big"
    project.mkdir(exist_ok=True)
    (project / "big.py").write_text(BIG_SOURCE)
    spec = f"{project}/big.py::many_ops"
    options = {"line_pass": False, "batch_size": int(trace_mb * OPS_PER_MB)}
    t0 = time.perf_counter()
    here = await job(local, spec, out, **options)
    local_wall = time.perf_counter() - t0
    assert remote.worker is not None
    frames0, lo0 = remote.worker.bytes_received, loopback_bytes()
    t0 = time.perf_counter()
    there = await job(remote, spec, out, **options)
    remote_wall = time.perf_counter() - t0
    frames, lo = remote.worker.bytes_received - frames0, loopback_bytes() - lo0
    gz = sum(
        Path(p).stat().st_size
        for p in (there.finished.trace_path, there.finished.sidecar.cold.trace_path)
        if p
    )
    with gzip.open(there.finished.trace_path, "rb") as f:
        plain = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 24), b""))
    with gzip.open(here.finished.trace_path, "rb") as f:
        plain_local = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 24), b""))
    print(f"(b) a job with a {plain / MB:.0f} MB trace (local run: {plain_local / MB:.0f} MB)")
    print(f"    trace, plain          {plain / MB:>8.1f} MB")
    print(f"    traces, gzip'd        {gz / MB:>8.1f} MB   ({plain / gz:.1f}x smaller)")
    print(f"    frames received       {frames / MB:>8.1f} MB   ({frames / gz:.2f}x gzip: base64)")
    print(f"    loopback bytes        {lo / MB:>8.1f} MB   ({lo / plain:.1%} of the plain trace)")
    print(
        f"    wall, local / remote  {local_wall:>8.1f} s / {remote_wall:.1f} s"
        f"   (extra {remote_wall - local_wall:+.1f} s, {remote_wall / local_wall:.2f}x)"
    )


def realistic_trace(real_mb: float, out: Path) -> None:
    try:
        from trace_speed import synthesize  # pyright: ignore[reportMissingImports]
    except ImportError as e:
        print(f"(c) skipped: bench/trace_speed.py's synthesizer is not importable ({e})")
        return
    plain_path = out / "real.pt.trace.json"
    plain = synthesize(plain_path, real_mb)
    t0 = time.perf_counter()
    with plain_path.open("rb") as src, gzip.open(out / "real.json.gz", "wb", 5) as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    seconds = time.perf_counter() - t0
    gz = (out / "real.json.gz").stat().st_size
    frame = 4 * ((gz + 2) // 3)
    print(
        f"(c) a {plain / MB:.0f} MB trace of real H200 events, gzip'd as the worker does (level 5)"
    )
    print(f"    trace, plain          {plain / MB:>8.1f} MB")
    ratio = plain / gz
    print(f"    gzip'd                {gz / MB:>8.1f} MB   ({ratio:.1f}x smaller, {seconds:.1f} s)")
    print(f"    in a frame (base64)   {frame / MB:>8.1f} MB   ({frame / plain:.1%} of the trace)")


async def main_async(args: argparse.Namespace, sshd_options: list[str], out: Path) -> None:
    local = Launcher(python=sys.executable)
    remote = Launcher(
        remote=Remote(
            "loop",
            "ssh",
            host="ks-test",
            python=sys.executable,
            ssh_options=tuple(sshd_options),
            env={"KS_MATMUL_N": "64"},
        )
    )
    try:
        await asyncio.gather(local.start(), remote.start())
        if args.rounds > 0:
            await round_trips(local, remote, args.rounds, out)
        if args.trace_mb > 0:
            await big_trace(local, remote, args.trace_mb, out)
    finally:
        await asyncio.gather(local.close(), remote.close())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--trace-mb", type=float, default=100.0, help="0 skips part (b)")
    parser.add_argument("--real-mb", type=float, default=100.0, help="0 skips part (c)")
    args = parser.parse_args()
    why = missing()
    if why is not None:
        sys.exit(f"remote_overhead: needs OpenSSH: {why}")
    os.environ["KS_MATMUL_N"] = "64"  # the local worker's; the remote gets it through `env`
    with (
        tempfile.TemporaryDirectory(prefix="ks-remote-bench-") as tmp,
        start_sshd(Path(tmp) / "sshd") as sshd,
    ):
        if args.rounds > 0 or args.trace_mb > 0:
            asyncio.run(main_async(args, sshd.ssh_options, Path(tmp)))
        if args.real_mb > 0:
            realistic_trace(args.real_mb, Path(tmp))


if __name__ == "__main__":
    main()
