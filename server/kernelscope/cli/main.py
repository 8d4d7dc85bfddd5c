"""Command line: ``kernelscope profile | try | diff | analyze | calibrate | scale | memory |
serve | mcp``; each subcommand parses, calls its use case in ``kernelscope.app`` and prints the
result."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kernelscope import __version__
from kernelscope.analysis.diagnose import SidecarError
from kernelscope.analysis.peaks import datasheet_peaks, save_calibrated
from kernelscope.analysis.trace_model import TraceError
from kernelscope.app import calibrate
from kernelscope.app.distributed import profile_distributed, run_report
from kernelscope.app.experiments import (
    UnknownVariant,
    check_variants,
    default_variants,
    try_once,
    try_request,
)
from kernelscope.app.history import DiffError, diff, record_run
from kernelscope.app.memory_timeline import memory_files
from kernelscope.app.profile import job_report, profile_once, resolve_remote, with_hint
from kernelscope.app.traces import analyze_path
from kernelscope.cli.args import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Parser,
    count,
    fail,
    fail_usage,
    positive_float,
    positive_int,
    print_json,
)
from kernelscope.cli.memory import add_memory_parser, run_memory
from kernelscope.cli.progress import ProgressLine, ReadingBar
from kernelscope.cli.scale import add_scale_parser, run_scale
from kernelscope.engine.dispatch import NO_RANKS_THERE, ranks_here_or_on_ray
from kernelscope.engine.kernel_choice import KernelChoice, KernelChoiceError
from kernelscope.engine.project import ProjectError, load_project
from kernelscope.engine.remotes import Remote, RemoteError
from kernelscope.engine.runner import JobFailed, ProgressCallback
from kernelscope.engine.targets import (
    Schedule,
    Target,
    TargetError,
    build_request,
    job_ranks,
    launcher_here,
    load_target,
    loop_line,
    parse_entry,
)
from kernelscope.protocol import (
    DEFAULT_ACTIVE,
    DEFAULT_WAIT,
    DEFAULT_WARMUP,
    VARIANTS,
    Entry,
    ProfileFailed,
    RunCalibration,
    RunProfile,
)
from kernelscope.render.compare import render_comparison
from kernelscope.render.distributed import render_distributed
from kernelscope.render.experiments import render_experiments
from kernelscope.render.text import (
    render_failure,
    render_report,
    render_trace_analysis,
    shorten,
    table,
)
from kernelscope.report.schema import Report


def _add_program_args(p: argparse.ArgumentParser) -> Any:
    """--via and the options of a program's call, shared by profile, try and memory."""
    e = p.add_argument_group("as a program calls it (no input provider)")
    e.add_argument(
        "--via",
        metavar="CMD",
        help='the program that calls the function: "train.py --max_iters 20", '
        '"-m pkg.train ...", or a pytest id "tests/test_model.py::test_forward"; '
        'after "torchrun --nproc-per-node N" it runs on N ranks '
        "(default: [tool.kernelscope.via])",
    )
    e.add_argument("--call", type=positive_int, default=1, help="profile the K-th call (1)")
    e.add_argument(
        "--from",
        dest="caller",
        metavar="FILE:LINE",
        help="count only the calls made from this line",
    )
    e.add_argument("--cwd", metavar="DIR", help="where the program runs (default: here)")
    e.add_argument(
        "--no-compile", action="store_true", help="disable torch.compile while the program runs"
    )
    e.add_argument(
        "--fresh",
        action="store_true",
        help="run the program again even where a kept capture of the call could be replayed",
    )
    return e


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every subcommand."""
    parser = Parser(prog="kernelscope", description=__doc__)
    parser.add_argument("--version", action="version", version=f"kernelscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("profile", help="profile one function in a warm worker")
    p.add_argument("target", metavar="PATH::QUALNAME")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    p.add_argument("--wait", type=count, default=DEFAULT_WAIT)
    p.add_argument("--warmup", type=count, default=DEFAULT_WARMUP)
    p.add_argument("--active", type=count, default=DEFAULT_ACTIVE)
    p.add_argument("--batch-size", type=int, default=None, help="passed to the input provider")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds (default 120)")
    p.add_argument("--python", default=None, help="interpreter that runs the worker (has torch)")
    p.add_argument("--remote", metavar="NAME", help="run on [tool.kernelscope.remotes.NAME]")
    p.add_argument("--no-stack", action="store_true", help="record without Python stacks")
    p.add_argument("--no-lines", action="store_true", help="skip the per-line attribution pass")
    p.add_argument(
        "--counters",
        action="store_true",
        default=None,
        help="after the profile, measure one warm call's kernels with Nsight Compute (ncu on "
        "PATH, a CUDA GPU, counter access): DRAM bytes, FLOPs by pipe, %% of speed of light, "
        "occupancy (default: counters in [tool.kernelscope])",
    )
    p.add_argument(
        "--counters-limit",
        type=positive_int,
        default=None,
        metavar="N",
        help="measure at most N kernels of the call (ncu's --launch-count; each is replayed "
        "once per pass of counters; default: counters_limit in [tool.kernelscope], else 64)",
    )
    p.add_argument(
        "--counters-match",
        default=None,
        metavar="REGEX",
        help="measure only the functions of the kernels whose names this regular expression "
        "matches (searched in the trace's names, templates included: 'multi_tensor|Adam' for "
        "an optimizer's); implies --counters (default: counters_match in [tool.kernelscope])",
    )
    p.add_argument(
        "--no-memory", action="store_true", help="skip the memory pass (where the peak goes)"
    )
    p.add_argument(
        "--nproc",
        type=positive_int,
        default=None,
        help="ranks on this host, as torchrun starts them (gloo on the CPU, NCCL and one GPU "
        "each on GPUs; default: nproc in [tool.kernelscope], else 1)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="also print how long each stage took"
    )
    e = _add_program_args(p)
    e.add_argument(
        "--save",
        action="store_true",
        help="keep the captured call under .kernelscope/captures/ whatever its size (without "
        "it, captures up to keep_captures_mb are kept); the clean worker replays it",
    )
    e.add_argument(
        "--in-place",
        action="store_true",
        help="profile the program's own calls as the steps (a loop target PATH:LINE always is)",
    )
    e.add_argument(
        "--skip",
        type=positive_int,
        default=None,
        help="in place: calls before the profiler starts, the first cold, the rest timed "
        "(default: 5, then timed to 20 and more while the calls are still settling)",
    )
    e.add_argument(
        "--stop-after",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="in place: stop the program after the profiled steps (default); "
        "--no-stop-after lets it run to its end first (its checkpoints, its logs)",
    )

    t = sub.add_parser(
        "try", help="time the variants a verdict suggests (torch.compile, CUDA Graphs, ...)"
    )
    t.add_argument("target", metavar="PATH::QUALNAME")
    t.add_argument(
        "--variants",
        type=_variants,
        default=None,
        help=f"comma-separated, of {','.join(VARIANTS)} (default: what the last run suggests, "
        "else all)",
    )
    t.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    t.add_argument("--batch-size", type=int, default=None, help="passed to the input provider")
    t.add_argument(
        "--budget", type=positive_float, default=2.0, help="seconds of timed calls (default 2)"
    )
    t.add_argument("--timeout", type=positive_float, default=600.0, help="seconds (default 600)")
    t.add_argument("--python", default=None, help="interpreter that runs the worker (has torch)")
    t.add_argument("--remote", metavar="NAME", help="run on [tool.kernelscope.remotes.NAME]")
    t.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    _add_program_args(t)
    t.set_defaults(save=False, in_place=False, skip=None, stop_after=True)

    d = sub.add_parser("diff", help="compare two runs or traces, or a function's last two runs")
    d.add_argument("a", metavar="A", help="a run id, a trace file, or PATH::QUALNAME")
    d.add_argument("b", metavar="B", nargs="?", help="a run id or a trace file")
    d.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    sub.add_parser("serve", help="run the language server on stdio (for editors)")
    sub.add_parser(
        "mcp",
        help="run the MCP server on stdio (for coding agents; relative paths from the cwd)",
    )
    add_scale_parser(sub)
    m = add_memory_parser(sub)
    _add_program_args(m)
    m.set_defaults(save=False, in_place=False, skip=None, stop_after=True)

    c = sub.add_parser("calibrate", help="measure this GPU's matmul and copy ceilings")
    c.add_argument("--device", default="cuda", help="cuda | cuda:N (default cuda)")
    c.add_argument("--python", default=None, help="interpreter that runs the worker (has torch)")
    c.add_argument("--remote", metavar="NAME", help="measure [tool.kernelscope.remotes.NAME]")
    c.add_argument("--size", type=int, default=8192, help="matmul size n (default 8192)")
    c.add_argument("--timeout", type=positive_float, default=300.0)
    c.add_argument("--no-save", action="store_true", help="print only; keep the cache as it is")
    c.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    a = sub.add_parser("analyze", help="diagnose any torch.profiler trace (plain or gzip)")
    a.add_argument("trace", metavar="TRACE")
    a.add_argument(
        "--sidecar", metavar="FILE", help="the worker's sidecar (default: found beside TRACE)"
    )
    a.add_argument("--trace-only", action="store_true", help="ignore any sidecar")
    a.add_argument(
        "--root",
        metavar="DIR",
        help="the local project the trace's Python frames are looked for in (default: the "
        "current directory); paths recorded elsewhere match by their longest tail under it",
    )
    a.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser


def main(
    argv: Sequence[str] | None = None,
    serve: Callable[[], None] | None = None,
    mcp: Callable[[], None] | None = None,
) -> int:
    """Entry point; returns the exit status. ``serve`` runs the language server and ``mcp``
    the MCP server (the ``kernelscope`` command passes them: the CLI imports neither)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "profile":
            return _profile(args)
        if args.command == "calibrate":
            return _calibrate(args)
        if args.command == "try":
            return _try(args)
        if args.command == "diff":
            return _diff(args)
        if args.command == "scale":
            return run_scale(args)
        if args.command == "memory":
            return run_memory(args, lambda target: _entry(args, target))
        if args.command == "serve":
            if serve is None:
                return fail_usage("the language server starts as `kernelscope serve`", False)
            serve()
            return EXIT_OK
        if args.command == "mcp":
            if mcp is None:
                return fail_usage("the MCP server starts as `kernelscope mcp`", False)
            mcp()
            return EXIT_OK
        return _analyze(args)
    except KeyboardInterrupt:
        print("kernelscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _entry(args: argparse.Namespace, target: Target) -> Entry | None:
    """The program named by --via (or mapped in pyproject.toml), or None."""
    command = args.via
    cwd = Path(args.cwd) if args.cwd else Path.cwd()
    if command is None:
        command = target.project.via_for(target.path, target.qualname)
        cwd = Path(args.cwd) if args.cwd else target.project.root
    if command is None:
        if args.caller or args.call != 1 or args.no_compile or args.in_place or args.save:
            raise TargetError(
                "--call, --from, --no-compile, --in-place and --save need a program (--via)"
            )
        if args.fresh:
            raise TargetError("--fresh needs a program (--via)")
        if loop_line(target.qualname):
            raise TargetError("a loop (PATH:LINE) runs in its program: give it with --via")
        return None
    if not cwd.is_dir():
        raise TargetError(f"--cwd: no such folder {cwd}")
    return parse_entry(
        command,
        target,
        cwd,
        args.call,
        args.caller,
        args.no_compile,
        in_place=args.in_place,
        skip=args.skip,
        save=args.save,
        fresh=args.fresh,
        finish=not args.stop_after,
        python=args.python,
    )


def _try_entry(args: argparse.Namespace, target: Target) -> Entry | None:
    """The program of a try (a captured call only: the variants replay it)."""
    entry = _entry(args, target)
    if entry is not None and entry.in_place:
        raise TargetError(
            "try replays a captured call: a loop (PATH:LINE) runs only in place; name a "
            "function the loop calls"
        )
    return entry


def _profile(args: argparse.Namespace) -> int:
    try:
        target = load_target(args.target, python=args.python)
        entry = _entry(args, target)
        request = build_request(
            target,
            target.project.root / ".kernelscope" / "traces",
            Schedule(args.wait, args.warmup, args.active),
            device=args.device,
            batch_size=args.batch_size,
            with_stack=not args.no_stack,
            line_pass=not args.no_lines,
            memory_pass=not args.no_memory,
            entry=entry,
        )
        remote = resolve_remote(args.remote, target.project, python=args.python)
        launcher_here(entry, remote)
        args.nproc = job_ranks(entry, args.nproc, target.project.nproc)
        if args.nproc > 1 and not ranks_here_or_on_ray(remote):
            raise TargetError(NO_RANKS_THERE)
    except (TargetError, RemoteError) as e:
        return fail_usage(str(e), args.json)
    counters = target.project.counters if args.counters is None else args.counters
    counters = counters or bool(args.counters_match)
    chosen = target.project.counter_kernels
    try:
        kernels = KernelChoice.checked(
            chosen.limit if args.counters_limit is None else args.counters_limit,
            chosen.match if args.counters_match is None else args.counters_match,
            ("--counters-limit", "--counters-match"),
        )
    except KernelChoiceError as e:
        return fail_usage(str(e), args.json)
    if counters and args.nproc > 1:
        return fail_usage("--counters measures one process: leave out --nproc", args.json)
    if args.nproc > 1:
        return _profile_ranks(args, target, request, remote)
    try:
        result = _on_worker(
            target.qualname,
            remote,
            lambda on: profile_once(
                request, args.python, remote, on, args.timeout, counters, kernels
            ),
        )
    except JobFailed as e:
        return _fail_job(e.failure, args.target, args.json)
    try:
        report = job_report(result, str(target.path), target.qualname, args.remote)
    except TraceError as e:
        return fail("bad_trace", f"cannot read the trace: {e}", args.json)
    record_run(target, result.finished.job_id, report)  # `kernelscope diff` compares runs
    if args.json:
        print_json(report)
    else:
        print(render_report(report, stages=args.verbose))
        png, perfetto = memory_files(Path(report.trace.path or "trace"))
        if report.memory_pass is not None and png.is_file() and perfetto.is_file():
            print(f"memory      {shorten(str(png))} · Perfetto {shorten(str(perfetto))}")
    if report.counters is not None and report.counters.error:
        # the profile stands; what was asked for on top of it did not happen
        print(f"kernelscope: counters not measured: {report.counters.error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _profile_ranks(
    args: argparse.Namespace, target: Target, request: RunProfile, remote: Remote | None
) -> int:
    path, qualname = str(target.path), target.qualname
    try:
        report = _on_worker(
            f"{qualname} ×{args.nproc}",
            remote,
            lambda on: profile_distributed(
                request, args.nproc, path, qualname, args.python, on, args.timeout, remote
            ),
        )
    except JobFailed as e:
        return _fail_job(e.failure, args.target, args.json)
    except TraceError as e:
        return fail("bad_trace", f"cannot read the trace: {e}", args.json)
    record_run(target, request.job_id, run_report(report))  # rank 0's, with the step's verdict
    if args.json:
        print_json(report)
    else:
        print(render_distributed(report))
    return EXIT_OK


T = TypeVar("T")


def _on_worker(
    qualname: str,
    remote: Remote | None,
    job: Callable[[ProgressCallback], Coroutine[Any, Any, T]],
) -> T:
    """Run a job with the progress line on stderr, cleared however it ends; raises JobFailed."""
    progress = ProgressLine(sys.stderr, qualname)
    progress.stage(f"worker start on {remote.name}" if remote else "worker start")
    try:
        return asyncio.run(job(progress.on_progress))
    finally:
        progress.clear()


def _variants(text: str) -> list[str]:
    try:
        return check_variants([part.strip() for part in text.split(",") if part.strip()])
    except UnknownVariant as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _try(args: argparse.Namespace) -> int:
    try:
        target = load_target(args.target, python=args.python)
        variants = args.variants or default_variants(target, args.device)
        request = try_request(
            target,
            variants,
            target.project.root / ".kernelscope" / "traces",
            device=args.device,
            batch_size=args.batch_size,
            budget_s=args.budget,
            entry=_try_entry(args, target),
        )
        remote = resolve_remote(args.remote, target.project, python=args.python)
        launcher_here(request.entry, remote)
    except (TargetError, RemoteError) as e:
        return fail_usage(str(e), args.json)
    try:
        result = _on_worker(
            target.qualname,
            remote,
            lambda on: try_once(request, args.python, remote, on, args.timeout),
        )
    except JobFailed as e:
        return _fail_job(e.failure, args.target, args.json)
    if args.json:
        print_json(result)
    else:
        print(render_experiments(result))
    return EXIT_OK


def _diff(args: argparse.Namespace) -> int:
    try:
        comparison = diff(args.a, args.b, Path.cwd())
    except DiffError as e:
        return fail_usage(str(e), args.json)
    except (TraceError, SidecarError) as e:
        return fail("bad_trace", str(e), args.json)
    if args.json:
        print_json(comparison)
    else:
        print(render_comparison(comparison))
    return EXIT_OK


def _fail_job(failure: ProfileFailed, target: str, as_json: bool) -> int:
    failure = with_hint(failure, target.rpartition("::")[2])
    if as_json:
        print_json({"error": failure})
    print(render_failure(failure, target), file=sys.stderr)
    return EXIT_FAILED


def _calibrate(args: argparse.Namespace) -> int:
    request = RunCalibration(job_id=uuid.uuid4().hex[:12], device=args.device, size=args.size)
    try:
        project = load_project(Path.cwd() / "pyproject.toml")
        remote = resolve_remote(args.remote, project, python=args.python)
    except (ProjectError, RemoteError) as e:
        return fail_usage(str(e), args.json)
    print("kernelscope: measuring matmul and copy ceilings…", file=sys.stderr)
    try:
        measured = asyncio.run(calibrate.measure(request, args.python, remote, args.timeout))
    except JobFailed as e:
        return _fail_job(e.failure, "calibrate", args.json)
    peaks = calibrate.peaks_of(measured)
    saved = None if args.no_save else save_calibrated(peaks)
    if args.json:
        print_json({"measured": measured, "peaks": peaks, "saved": str(saved) if saved else None})
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
        return fail_usage(f"no such file: {path}", args.json)
    bar = ReadingBar(sys.stderr, f"reading {path.name}")
    sidecar = Path(args.sidecar) if args.sidecar else None
    root = Path(args.root) if args.root else None
    if root is not None and not root.is_dir():
        return fail_usage(f"--root: no such folder: {root}", args.json)
    try:
        out = analyze_path(path, sidecar, args.trace_only, bar, root)
    except (TraceError, SidecarError) as e:
        bar.clear()
        return fail("bad_trace", f"{path}: {e}", args.json)
    bar.clear()
    if args.json:
        print_json(out)
    else:
        print(render_report(out) if isinstance(out, Report) else render_trace_analysis(out))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
