"""Turn "path.py::Qual.name" plus options into a RunProfile request for a worker."""

from __future__ import annotations

import ast
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kernelscope import pyfunctions
from kernelscope.engine.accelerate_launch import (
    AccelerateError,
    is_accelerate,
    resolve_launch,
)
from kernelscope.engine.captures import reusable
from kernelscope.engine.module_files import is_module_name, module_file
from kernelscope.engine.project import Project, ProjectError, load_project
from kernelscope.engine.torchrun import (
    TorchrunError,
    is_torchrun,
    other_launcher,
    ranks_for,
    split_torchrun,
)
from kernelscope.protocol import DEFAULT_ACTIVE, DEFAULT_WAIT, DEFAULT_WARMUP, Entry, RunProfile


class TargetError(Exception):
    """The target cannot be profiled as written; the message says why."""


@dataclass(frozen=True)
class Target:
    """One function to profile: its file, qualified name, and project."""

    path: Path
    qualname: str
    project: Project

    @property
    def module_name(self) -> str:
        """The module name the worker imports the file under."""
        return self.project.module_name(self.path)


@dataclass(frozen=True)
class Schedule:
    """torch.profiler's schedule(wait, warmup, active)."""

    wait: int = DEFAULT_WAIT
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE

    def check(self) -> None:
        """Raise TargetError for counts the profiler cannot use."""
        if self.wait < 0 or self.warmup < 0 or self.active < 1:
            raise TargetError("--wait and --warmup must be >= 0 and --active >= 1")


#: The qualname a loop target gets (its line is the loop's): ``loop@141``.
LOOP_PREFIX = "loop@"
#: In place, the steps before the profiler where --skip is not given: the cold one and 4
#: timed, and more while they settle (Entry.settle).
DEFAULT_SKIP = 5


def loop_line(qualname: str) -> int:
    """The loop's line for a loop target's qualname, else 0."""
    rest = qualname.removeprefix(LOOP_PREFIX)
    return int(rest) if rest != qualname and rest.isdigit() else 0


def parse_target(spec: str) -> tuple[Path, str]:
    """Split PATH::QUALNAME."""
    path, sep, qualname = spec.rpartition("::")
    if not sep:
        file, colon, line = spec.rpartition(":")
        if colon and file.endswith(".py") and line.isdigit() and int(line) > 0:
            return Path(file), f"{LOOP_PREFIX}{int(line)}"
    if not sep or not path or not qualname:
        raise TargetError(
            "expected PATH::QUALNAME (e.g. model.py::forward) or PATH:LINE for a loop "
            f"(train.py:141), got {spec!r}"
        )
    if not all(part.isidentifier() for part in qualname.split(".")):
        raise TargetError(f"{qualname!r} is not a qualified name like fn or Class.method")
    return Path(path), qualname


def load_target(spec: str, source: str | None = None, python: str | None = None) -> Target:
    """Resolve a target spec against the file system (unsaved `source` may stand in); a
    module's dotted name in place of the path is its file for the worker's `python`."""
    path, qualname = parse_target(spec)
    if source is None and not path.is_file():
        named = str(path)
        found = module_file(named, python) if is_module_name(named) else None
        if found is None:
            what = "no such file or module" if is_module_name(named) else "no such file"
            raise TargetError(f"{what}: {path}")
        path = found
    try:
        project = load_project(path)
    except ProjectError as e:
        raise TargetError(str(e)) from None
    return Target(path.resolve(), qualname, project)


def build_request(
    target: Target,
    trace_dir: Path,
    schedule: Schedule,
    device: str = "auto",
    source: str | None = None,
    batch_size: int | None = None,
    with_stack: bool = True,
    line_pass: bool = True,
    memory_pass: bool = True,
    entry: Entry | None = None,
) -> RunProfile:
    """The worker request for one profile of `target` (as `entry` calls it, when given)."""
    schedule.check()
    module = target.module_name
    return RunProfile(
        job_id=uuid.uuid4().hex[:12],
        path=str(target.path),
        qualname=target.qualname,
        module_name=module,
        project_root=str(target.project.root),
        trace_dir=str(trace_dir),
        source=source,
        device=device,
        wait=schedule.wait,
        warmup=schedule.warmup,
        active=schedule.active,
        line_pass=line_pass,
        memory_pass=memory_pass,
        with_stack=with_stack,
        provider=None if entry else target.project.provider_for(module, target.qualname),
        batch_size=batch_size,
        inputs_module=target.project.inputs_module,
        entry=entry,
    )


def parse_entry(
    command: str,
    target: Target,
    cwd: Path,
    call: int = 1,
    caller: str | None = None,
    no_compile: bool = False,
    source: str | None = None,
    in_place: bool = False,
    skip: int | None = None,
    save: bool = False,
    fresh: bool = False,
    finish: bool = False,
    python: str | None = None,
) -> Entry:
    """The program `command` names, as a shell would split it: ``train.py --max_iters 20``
    (a leading ``python`` is dropped), ``-m pkg.train ...``, or a pytest node id
    (``tests/test_model.py::test_forward``, or ``pytest`` and one), each also after
    ``torchrun [options]`` (``Entry.ranks``) or ``accelerate launch [options]`` (asked of
    accelerate in the worker's `python`: Entry.ranks, .env). TargetError says what
    is wrong with it, or with `caller` (``FILE:LINE``, relative to `cwd`). A capture kept
    by an earlier profile of the same call is replayed unless `fresh` (or `save`) is set."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise TargetError(f"cannot read --via {command!r}: {e}") from None
    if words and Path(words[0]).name.startswith("python"):
        words = words[1:]
    ranks, env, shown = 0, dict[str, str](), ""
    if is_accelerate(words):
        try:
            launch = resolve_launch(words, cwd, python)
        except AccelerateError as e:
            raise TargetError(f"--via: {e}") from None
        ranks, env, shown, words = launch.ranks, launch.env, launch.shown, launch.program
    launcher = other_launcher(words)
    if launcher is not None:
        raise TargetError(f"--via: {launcher}")
    if is_torchrun(words):
        try:
            ranks, words = split_torchrun(words)
        except TorchrunError as e:
            raise TargetError(f"--via: {e}") from None
    if words[:2] == ["-m", "pytest"]:
        words = ["pytest", *words[2:]]
    if not words:
        raise TargetError("--via names no program: give a script, -m module or a test id")
    if words[0] == "-m":
        if len(words) < 2:
            raise TargetError("--via -m needs a module name")
        kind, program, args = "module", words[1], words[2:]
    elif words[0] in ("pytest", "py.test"):
        if len(words) < 2:
            raise TargetError("--via pytest needs a test id (tests/test_x.py::test_y)")
        kind, program, args = "pytest", words[1], words[2:]
    elif "::" in words[0]:
        kind, program, args = "pytest", words[0], words[1:]
    else:
        kind, program, args = "script", words[0], words[1:]
        if not (cwd / program).is_file():
            raise TargetError(f"--via: no such script {program} (from {cwd})")
    if kind == "pytest" and not (cwd / program.partition("::")[0]).is_file():
        raise TargetError(f"--via: no such test file {program.partition('::')[0]} (from {cwd})")
    if call < 1:
        raise TargetError(f"--call must be >= 1, got {call}")
    loop = loop_line(target.qualname)
    if loop and (caller or call != 1):
        raise TargetError("a loop's steps are its iterations: --call and --from do not apply")
    if in_place and call != 1:
        raise TargetError(
            "in place, the steps are every call (those from --from's line, when given): "
            "--call does not apply"
        )
    if loop:
        in_place = True
        first, def_line, (body, end) = 0, loop, _loop_body(target, loop, source)
    else:
        (first, def_line), (body, end) = _lines(target, source), (0, 0)
    if in_place and skip is not None and skip < 1:
        raise TargetError(f"--skip must be >= 1 (the first call is the cold one), got {skip}")
    if finish and not in_place:
        raise TargetError(
            "--no-stop-after needs --in-place (or a loop target): a captured call's program "
            "is stopped inside the call it captured"
        )
    entry = Entry(
        kind=kind,
        target=program,
        args=args,
        cwd=str(cwd.resolve()),
        call=call,
        caller=_caller(caller, cwd) if caller else None,
        first_line=first,
        def_line=def_line,
        no_compile=no_compile,
        in_place=in_place,
        skip=DEFAULT_SKIP if skip is None else skip,
        settle=in_place and skip is None,
        finish=finish,
        loop_line=loop,
        body_line=body,
        end_line=end,
        save=save and not in_place,
        keep_mb=0 if save or in_place or ranks else target.project.keep_captures_mb,
        ranks=ranks,
        launcher=shown,
        env=env,
    )
    if ranks and save:
        raise TargetError(
            "--save keeps one process's call: a torchrun or accelerate program runs on ranks"
        )
    if entry.in_place or entry.save or fresh or ranks:  # --save takes a fresh capture
        return entry
    saved, why = reusable(target.project.root, target.qualname, entry)
    if saved is None:
        return msgspec.structs.replace(entry, rerun_why=why)
    return msgspec.structs.replace(entry, capture=str(saved))


def launcher_here(entry: Entry | None, remote: object | None) -> None:
    """TargetError where an ``accelerate launch`` program would run on a remote: its
    settings were asked of this machine's accelerate and config file."""
    if entry is not None and entry.launcher and remote is not None:
        raise TargetError(
            "--via accelerate launch is followed on local runs (this machine's accelerate "
            "and its config file are asked): on a remote, give `torchrun --nproc-per-node N "
            "script.py ...`, with accelerate's settings (ACCELERATE_MIXED_PRECISION=bf16, "
            "...) in the remote's environment"
        )


def job_ranks(entry: Entry | None, asked: int | None, default: int | None) -> int:
    """The ranks a profile runs on: --nproc (`asked`), else its torchrun command's, else the
    project's or the settings' `default`; TargetError where --nproc and torchrun differ."""
    if entry is not None and entry.launcher and not entry.ranks:
        if asked not in (None, 1):
            raise TargetError(
                f"--nproc {asked}: `{entry.launcher}` starts one process (give accelerate "
                "--multi_gpu --num_processes N for N)"
            )
        return 1
    try:
        return ranks_for(asked, entry.ranks if entry is not None else 0, default)
    except TorchrunError as e:
        raise TargetError(str(e)) from None


def _loop_body(target: Target, line: int, source: str | None) -> tuple[int, int]:
    """The first and last lines of the body of the `for`/`while` statement at `line`."""
    try:
        text = source if source is not None else target.path.read_text(encoding="utf-8")
        tree = ast.parse(text, str(target.path))
    except (OSError, UnicodeDecodeError) as e:
        raise TargetError(f"cannot read {target.path}: {e}") from None
    except SyntaxError as e:
        raise TargetError(f"{target.path}:{e.lineno}: SyntaxError: {e.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.For | ast.AsyncFor | ast.While) and node.lineno == line:
            return node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
    count = len(text.splitlines())
    if line > count:
        raise TargetError(f"{target.path.name}:{line} is past the file's end (line {count})")
    raise TargetError(
        f"{target.path.name}:{line} is not a for or while statement: name the line of the "
        "loop whose iterations are the steps"
    )


def _caller(spec: str, cwd: Path) -> str:
    """FILE:LINE with FILE found from here (as PATH::QUALNAME is), else from the program's
    folder; the line must be in the file."""
    path, sep, line = spec.rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        raise TargetError(f"--from takes FILE:LINE (e.g. train.py:154), got {spec!r}")
    file = next((f for f in (Path(path), cwd / path) if f.is_file()), None)
    if file is None:
        raise TargetError(f"--from: no such file {path} (here or in {cwd})")
    try:
        count = len(file.read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError) as e:
        raise TargetError(f"--from: cannot read {path}: {e}") from None
    if int(line) > count:
        raise TargetError(f"--from: {path} has {count} lines, not {line}")
    return f"{file.resolve()}:{int(line)}"


def _lines(target: Target, source: str | None) -> tuple[int, int]:
    """Where the function's code object starts (its first decorator, else its def), and
    its def line."""
    try:
        text = source if source is not None else target.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TargetError(f"cannot read {target.path}: {e}") from None
    try:
        fn = pyfunctions.find(text, target.qualname)
    except SyntaxError as e:
        raise TargetError(f"{target.path}:{e.lineno}: SyntaxError: {e.msg}") from None
    if fn is None:
        names = sorted({f.qualname for f in pyfunctions.functions(text)})
        has = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        raise TargetError(
            f"{target.path.name} defines no function {target.qualname}"
            + (f"; it defines {has}" if names else "; it defines no functions")
        )
    return fn.first_line or fn.def_line, fn.def_line
