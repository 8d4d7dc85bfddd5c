"""A `--via` command that starts its program through Hugging Face Accelerate (``accelerate
launch [options] script.py ...``): what accelerate's own launcher would give the program —
how many processes, the program's words, and the environment its options and config file
set (``ACCELERATE_MIXED_PRECISION``, ``OMP_NUM_THREADS``, FSDP's settings, ...). The
worker's interpreter asks accelerate itself (its parser, its config file and the functions
its launcher calls), so what is profiled is what ``accelerate launch`` runs; kernelscope then
starts the processes itself, on this host, as with torchrun (engine/ranks.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import cast

import msgspec

#: Run by the worker's interpreter with a mark and ``launch``'s arguments; prints what the
#: launcher would start as JSON after the mark, on a line of its own ({"error": why} where it
#: cannot be followed). Warnings accelerate prints about its defaults go to a buffer: they
#: are accelerate's advice, not an error here.
_RESOLVE = r"""
import contextlib, io, json, os, sys
MARK = sys.argv.pop(1)
def say(**kw):
    sys.stdout.write("\n" + MARK + json.dumps(kw) + "\n")
    sys.stdout.flush()
    os._exit(0)
try:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env
except Exception as e:
    say(error="accelerate cannot be imported by %s (%s: %s)"
        % (sys.executable, type(e).__name__, e))
noise = io.StringIO()
try:
    with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise):
        args = launch_command_parser().parse_args(sys.argv[1:])
        args, defaults, _ = _validate_launch_command(args)
except SystemExit as e:
    if not e.code:
        say(error="accelerate launch printed its help: give it a script to run")
    lines = [l for l in noise.getvalue().splitlines() if l.strip()]
    say(error=lines[-1] if lines else "accelerate launch did not take these arguments")
except Exception as e:
    say(error="%s: %s" % (type(e).__name__, e))
for flag, name in (("use_deepspeed", "DeepSpeed"), ("tpu", "a TPU"),
                   ("use_megatron_lm", "Megatron-LM")):
    if getattr(args, flag, False) and not args.cpu:
        say(error="accelerate launch with %s is not followed" % name)
if getattr(args, "num_machines", 1) and int(args.num_machines) > 1:
    say(error="--num_machines %s: kernelscope runs the processes of one host" % args.num_machines)
if getattr(defaults, "compute_environment", None) is not None and \
        "SAGEMAKER" in str(defaults.compute_environment).upper():
    say(error="accelerate's SageMaker launcher is not followed")
if getattr(args, "no_python", False):
    say(error="--no_python: kernelscope runs Python programs only")
if getattr(args, "mpirun_hostfile", None):
    say(error="accelerate launch through mpirun (mpirun_hostfile %s) is not followed: give "
        "--multi_gpu --num_processes N, which runs the processes as torchrun's"
        % args.mpirun_hostfile)
# What the launcher writes into the program's environment: both prepare_* functions start
# from os.environ.copy(); the keys they set are kept, whatever their values were before.
written = set()
class Recorded(dict):
    def __setitem__(self, key, value):
        written.add(key)
        super().__setitem__(key, value)
os.environ.copy = lambda: Recorded(os.environ)
multi = bool((args.multi_gpu or args.use_fsdp) and not args.cpu)
try:
    with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise):
        if multi:
            args.main_process_port = args.main_process_port or 29500
            env = prepare_multi_gpu_env(args)
        else:
            cmd, env = prepare_simple_launcher_cmd_env(args)
            if cmd[0] != sys.executable:
                say(error="accelerate launch would start %s, not Python: not followed" % cmd[0])
except Exception as e:
    say(error="%s: %s" % (type(e).__name__, e))
ranks = int(args.num_processes or 1) if multi else 0
words = (["-m"] if args.module else []) + [args.training_script] + list(args.training_script_args)
gpu_ids = getattr(args, "gpu_ids", None)
say(ranks=ranks, program=words, env={k: env[k] for k in written}, gpu_ids=gpu_ids)
"""
RESOLVE_TIMEOUT_S = 60.0
#: Set by the launcher for its own rendezvous: kernelscope's ranks meet on a port of their own.
_RENDEZVOUS = frozenset({"MASTER_ADDR", "MASTER_PORT"})
#: Variables that choose devices: read as CUDA starts, before the worker runs the program.
DEVICE_CHOICE = frozenset(
    {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "NPU_VISIBLE_DEVICES"}
)


class AccelerateError(ValueError):
    """An ``accelerate launch`` command kernelscope cannot follow; the message says why."""


class Launch(msgspec.Struct, frozen=True):
    """What ``accelerate launch`` would start: `ranks` processes through torchrun (0: the
    program alone, as plain ``python``) of `program` (``script.py args`` or ``-m module
    args``) with `env` added; `shown`: the launcher's words as the user wrote them."""

    ranks: int
    program: list[str]
    env: dict[str, str]
    shown: str


#: The commands that are accelerate's launcher, and the words that name it.
_MODULES = (
    ["-m", "accelerate.commands.launch"],
    ["-m", "accelerate.commands.accelerate_cli", "launch"],
)


def _named(words: list[str]) -> int:
    """How many of the command's first words name the launcher (0: not accelerate's)."""
    for head in _MODULES:
        if words[: len(head)] == head:
            return len(head)
    name = Path(words[0]).name if words else ""
    if name == "accelerate-launch":
        return 1
    return 2 if name == "accelerate" and words[1:2] == ["launch"] else 0


def is_accelerate(words: list[str]) -> bool:
    """Whether the command (split, a leading ``python`` dropped) is ``accelerate launch``."""
    return _named(words) > 0


def launch_args(words: list[str]) -> list[str]:
    """The words after ``accelerate launch`` (or its module's or console script's name)."""
    return words[_named(words) :]


#: Answers already given, by what they depend on (the server asks again for each job).
_ASKED: dict[tuple[object, ...], Launch] = {}


def resolve_launch(words: list[str], cwd: Path, python: str | None = None) -> Launch:
    """What ``accelerate launch`` (`words`, the whole command) would start from `cwd`, asked
    of accelerate in the interpreter `python` (this one by default) with this environment,
    so its default config file is the one the user's launcher reads; AccelerateError where
    accelerate is missing, refuses the arguments, or starts what kernelscope does not
    follow (DeepSpeed, TPUs, mpirun, several machines)."""
    exe = python or sys.executable
    key = (exe, str(cwd.resolve()), tuple(words), *_depends_on(words, cwd))
    if key in _ASKED:
        return _ASKED[key]
    mark = f"kernelscope-accelerate-{uuid.uuid4().hex}:"
    try:
        proc = subprocess.run(
            [exe, "-c", _RESOLVE, mark, *launch_args(words)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RESOLVE_TIMEOUT_S,
            cwd=cwd,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise AccelerateError(f"cannot ask {exe} about accelerate launch: {e}") from None
    said = _said(proc.stdout, mark)
    if said is None:
        last = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        raise AccelerateError(f"cannot ask {exe} about accelerate launch: {last}")
    if "error" in said:
        raise AccelerateError(str(said["error"]))
    env = {
        str(k): str(v)
        for k, v in cast(dict[str, object], said.get("env") or {}).items()
        if k not in _RENDEZVOUS
    }
    chosen = sorted(DEVICE_CHOICE & env.keys())
    if chosen:
        raise AccelerateError(
            f"gpu_ids {said.get('gpu_ids')} (--gpu_ids, or the accelerate config file's) sets "
            f"{chosen[0]}, which must be set before CUDA starts: run kernelscope with "
            f"{chosen[0]}={env[chosen[0]]} in its environment, without gpu_ids"
        )
    program = [str(w) for w in cast(list[object], said.get("program") or [])]
    ranks = int(cast(int, said.get("ranks") or 0))
    launch = Launch(ranks=ranks, program=program, env=env, shown=_shown(words, program))
    _ASKED[key] = launch
    return launch


def _depends_on(words: list[str], cwd: Path) -> tuple[object, ...]:
    """What accelerate's answer depends on besides the command: its config files' states
    (the default one and a --config_file) and the environment's ACCELERATE_/HF_ settings."""
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    files = [Path(home) / "accelerate" / "default_config.yaml"]
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in ("--config_file", "--config-file"):
            given = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            files.append(cwd / given)
    marks: list[object] = []
    for file in files:
        try:
            marks.append(file.stat().st_mtime_ns)
        except OSError:
            marks.append(None)
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(("ACCELERATE_", "HF_")))
    return (*marks, tuple(env))


def _shown(words: list[str], program: list[str]) -> str:
    """The launcher's part of the command as written: its words before the program's."""
    module = program[:1] == ["-m"]
    script, rest = (program[1], program[2:]) if module else (program[0], program[1:])
    for i in range(len(words) - 1, _named(words) - 1, -1):
        after = words[i + 1 :]
        if words[i] == script and after in (rest, ["--", *rest]):
            head = words[:i]
            if module and head[-1:] in (["-m"], ["--module"]):
                head = head[:-1]
            return shlex.join(head)
    return shlex.join(words[: _named(words)])


def _said(stdout: str, mark: str) -> dict[str, object] | None:
    """The resolver's answer: the JSON on its marked line (whatever else was printed)."""
    for line in stdout.splitlines():
        if line.startswith(mark):
            try:
                loaded: object = json.loads(line[len(mark) :])
            except ValueError:
                return None
            return cast(dict[str, object], loaded) if isinstance(loaded, dict) else None
    return None
