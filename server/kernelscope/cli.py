"""Command line: ``kernelscope profile PATH::QUALNAME`` and ``kernelscope analyze TRACE``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import msgspec

from kernelscope import __version__
from kernelscope.diagnose import SidecarError, load_sidecar
from kernelscope.launcher import JobFailed, JobResult, Launcher
from kernelscope.peaks import Peaks, datasheet_peaks, save_calibrated
from kernelscope.progress_line import ProgressLine, ReadingBar
from kernelscope.project import Project, ProjectError, load_project
from kernelscope.protocol import CalibrationFinished, ProfileFailed, RunCalibration, RunProfile
from kernelscope.pyfunctions import stub_for
from kernelscope.remotes import Remote, RemoteError, find_remote, unsupported
from kernelscope.render_text import render_failure, render_report, render_trace_analysis, table
from kernelscope.report import (
    Report,
    analyze_trace,
    companions,
    replay_report,
    report_for_job,
    save_sidecar,
)
from kernelscope.scale_command import add_scale_parser, run_scale
from kernelscope.targets import Schedule, Target, TargetError, build_request, load_target
from kernelscope.trace_model import TraceError, load_trace

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"kernelscope: {message}\n")


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every subcommand."""
    parser = _Parser(prog="kernelscope", description=__doc__)
    parser.add_argument("--version", action="version", version=f"kernelscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("profile", help="profile one function in a warm worker")
    p.add_argument("target", metavar="PATH::QUALNAME")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    p.add_argument("--wait", type=_count, default=1)
    p.add_argument("--warmup", type=_count, default=3)
    p.add_argument("--active", type=_count, default=5)
    p.add_argument("--batch-size", type=int, default=None, help="passed to the input provider")
    p.add_argument("--timeout", type=_positive_float, default=120.0, help="seconds (default 120)")
    p.add_argument("--python", default=None, help="interpreter that runs the worker (has torch)")
    p.add_argument("--remote", metavar="NAME", help="run on [tool.kernelscope.remotes.NAME]")
    p.add_argument("--no-stack", action="store_true", help="record without Python stacks")
    p.add_argument("--no-lines", action="store_true", help="skip the per-line attribution pass")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="also print how long each stage took"
    )

    sub.add_parser("serve", help="run the language server on stdio (for editors)")
    add_scale_parser(sub)

    c = sub.add_parser("calibrate", help="measure this GPU's matmul and copy ceilings")
    c.add_argument("--device", default="cuda", help="cuda | cuda:N (default cuda)")
    c.add_argument("--python", default=None, help="interpreter that runs the worker (has torch)")
    c.add_argument("--remote", metavar="NAME", help="measure [tool.kernelscope.remotes.NAME]")
    c.add_argument("--size", type=int, default=8192, help="matmul size n (default 8192)")
    c.add_argument("--timeout", type=_positive_float, default=300.0)
    c.add_argument("--no-save", action="store_true", help="print only; keep the cache as it is")
    c.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    a = sub.add_parser("analyze", help="diagnose any torch.profiler trace (plain or gzip)")
    a.add_argument("trace", metavar="TRACE")
    a.add_argument(
        "--sidecar", metavar="FILE", help="the worker's sidecar (default: found beside TRACE)"
    )
    a.add_argument("--trace-only", action="store_true", help="ignore any sidecar")
    a.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "profile":
            return _profile(args)
        if args.command == "calibrate":
            return _calibrate(args)
        if args.command == "scale":
            return run_scale(args)
        if args.command == "serve":
            from kernelscope.server import main as serve

            serve()
            return EXIT_OK
        return _analyze(args)
    except KeyboardInterrupt:
        print("kernelscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _profile(args: argparse.Namespace) -> int:
    try:
        target = load_target(args.target)
        schedule = Schedule(args.wait, args.warmup, args.active)
        request = build_request(
            target,
            target.project.root / ".kernelscope" / "traces",
            schedule,
            device=args.device,
            batch_size=args.batch_size,
            with_stack=not args.no_stack,
            line_pass=not args.no_lines,
        )
        remote = _remote(args.remote, args.python, target.project)
    except (TargetError, RemoteError) as e:
        return _fail_usage(str(e), args.json)
    progress = ProgressLine(sys.stderr, target.qualname)
    try:
        result = asyncio.run(_run_job(request, args.python, args.timeout, progress, remote))
    except JobFailed as e:
        progress.clear()
        return _fail_job(e.failure, args.target, args.json)
    finally:
        progress.clear()
    try:
        report = _report(result, target, args.remote)
    except TraceError as e:
        return _fail_job(
            ProfileFailed(job_id="", kind="bad_trace", message=f"cannot read the trace: {e}"),
            args.target,
            args.json,
        )
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode(report) + b"\n")
    else:
        print(render_report(report, stages=args.verbose))
    return EXIT_OK


async def _run_job(
    request: RunProfile,
    python: str | None,
    timeout: float,
    progress: ProgressLine,
    remote: Remote | None = None,
) -> JobResult:
    launcher = Launcher(python=python, respawn=False, remote=remote)
    progress.stage(f"worker start on {remote.name}" if remote else "worker start")
    try:
        return await launcher.profile(request, progress.on_progress, timeout)
    finally:
        await launcher.close()


def _remote(name: str | None, python: str | None, project: Project) -> Remote | None:
    """The remote called `name` in the project's pyproject.toml (--python overrides its
    interpreter); RemoteError when it is not there, not valid, or not supported yet."""
    if name is None:
        return None
    remote = find_remote(name, project.remotes, {}, str(project.root / "pyproject.toml"))
    if why := unsupported(remote):
        raise RemoteError(why)
    return dataclasses.replace(remote, python=python) if python else remote


def _report(result: JobResult, target: Target, remote: str | None = None) -> Report:
    save_sidecar(result.finished)
    return report_for_job(
        result.finished,
        str(target.path),
        target.qualname,
        result.ready,
        remote=remote,
        stages_s=result.stages_s,
    )


def _fail_usage(message: str, as_json: bool) -> int:
    if as_json:
        _print_json_error("usage", message)
    print(f"kernelscope: {message}", file=sys.stderr)
    return EXIT_USAGE


def _fail_job(failure: ProfileFailed, target: str, as_json: bool) -> int:
    if failure.kind == "missing_inputs" and failure.path and not failure.hint:
        qualname = target.rpartition("::")[2]
        failure = msgspec.structs.replace(failure, hint=stub_for(failure.path, qualname))
    if as_json:
        sys.stdout.buffer.write(msgspec.json.encode({"error": failure}) + b"\n")
    print(render_failure(failure, target), file=sys.stderr)
    return EXIT_FAILED


def _print_json_error(kind: str, message: str) -> None:
    sys.stdout.buffer.write(
        msgspec.json.encode({"error": {"kind": kind, "message": message}}) + b"\n"
    )


def _calibrate(args: argparse.Namespace) -> int:
    request = RunCalibration(job_id=uuid.uuid4().hex[:12], device=args.device, size=args.size)
    try:
        project = load_project(Path.cwd() / "pyproject.toml")
        remote = _remote(args.remote, args.python, project)
    except (ProjectError, RemoteError) as e:
        return _fail_usage(str(e), args.json)

    async def run() -> CalibrationFinished:
        launcher = Launcher(python=args.python, respawn=False, remote=remote)
        try:
            return (await launcher.calibrate(request, args.timeout))[0]
        finally:
            await launcher.close()

    print("kernelscope: measuring matmul and copy ceilings…", file=sys.stderr)
    try:
        measured = asyncio.run(run())
    except JobFailed as e:
        return _fail_job(e.failure, "calibrate", args.json)
    peaks = Peaks(
        measured.device_name,
        measured.bf16_tflops,
        measured.fp16_tflops,
        measured.tf32_tflops,
        measured.fp32_tflops,
        measured.copy_gbps,
        source="calibrated",
    )
    saved = None if args.no_save else save_calibrated(peaks)
    if args.json:
        out = {"measured": measured, "peaks": peaks, "saved": str(saved) if saved else None}
        sys.stdout.buffer.write(msgspec.json.encode(out) + b"\n")
        return EXIT_OK
    sheet = datasheet_peaks(measured.device_name, measured.total_memory)
    print(f"kernelscope calibrate · {measured.device_name}")
    rows = [
        ("bf16 matmul", peaks.bf16_tflops, sheet.bf16_tflops if sheet else None, "TFLOP/s"),
        ("fp16 matmul", peaks.fp16_tflops, sheet.fp16_tflops if sheet else None, "TFLOP/s"),
        ("tf32 matmul", peaks.tf32_tflops, sheet.tf32_tflops if sheet else None, "TFLOP/s"),
        ("fp32 matmul", peaks.fp32_tflops, sheet.fp32_tflops if sheet else None, "TFLOP/s"),
        ("copy", peaks.hbm_gbps, sheet.hbm_gbps if sheet else None, "GB/s"),
    ]
    print(
        "\n".join(
            table(
                ["ceiling", "measured", "datasheet", "share", "unit"],
                [
                    [n, f"{m:.0f}", f"{d:.0f}" if d else "-", f"{m / d:.0%}" if d else "-", u]
                    for n, m, d, u in rows
                ],
                align="lrrrl",
            )
        )
    )
    print(f"method: {measured.method}")
    print(f"saved to {saved}" if saved else "not saved (--no-save)")
    return EXIT_OK


def _analyze(args: argparse.Namespace) -> int:
    path = Path(args.trace)
    if not path.is_file():
        return _fail_usage(f"no such file: {path}", args.json)
    found_sidecar, _ = companions(path)
    sidecar_file = Path(args.sidecar) if args.sidecar else found_sidecar
    bar = ReadingBar(sys.stderr, f"reading {path.name}")
    try:
        if sidecar_file is not None and not args.trace_only:
            side = load_sidecar(sidecar_file)
            report = replay_report(path, side, side.qualname, side.path, progress=bar)
            out: object = report
            text = render_report(report)
        else:
            result = analyze_trace(path, load_trace(path, bar))
            out, text = result, render_trace_analysis(result)
    except (TraceError, SidecarError) as e:
        bar.clear()
        if args.json:
            _print_json_error("bad_trace", f"{path}: {e}")
        print(f"kernelscope: {path}: {e}", file=sys.stderr)
        return EXIT_FAILED
    bar.clear()
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode(out) + b"\n")
    else:
        print(text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
