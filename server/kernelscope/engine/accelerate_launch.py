"""A `--via` command that starts its program through Hugging Face Accelerate (``accelerate
launch [options] script.py ...``): what accelerate's own launcher would give the program —
how many processes, the program's words, and the environment its options and config file
set (``ACCELERATE_MIXED_PRECISION``, ``OMP_NUM_THREADS``, FSDP's settings, ...). The
worker's interpreter asks accelerate itself (its parser, its config file and the functions
its launcher calls), so what is profiled is what ``accelerate launch`` runs; kernelscope then
starts the processes itself, on this host, as with torchrun (engine/ranks.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import cast

import msgspec

#: Run by the worker's interpreter with ``launch``'s arguments; prints what the launcher would
#: start, as JSON ({"error": why} where it cannot be followed). Warnings accelerate prints
#: about its defaults go to a buffer: they are accelerate's advice, not an error here.
_RESOLVE = r"""
import contextlib, io, json, os, sys
def say(**kw):
    print(json.dumps(kw))
    sys.exit(0)
try:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env
except Exception as e:
    say(error="accelerate cannot be imported by %s (%s: %s)"
        % (sys.executable, type(e).__name__, e))
before = dict(os.environ)
noise = io.StringIO()
try:
    with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise):
        args = launch_command_parser().parse_args(sys.argv[1:])
        args, defaults, _ = _validate_launch_command(args)
except SystemExit:
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
multi = bool((args.multi_gpu or args.use_fsdp) and not args.cpu)
try:
    with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise):
        if multi:
            args.main_process_port = args.main_process_port or 29500
            env = prepare_multi_gpu_env(args)
        else:
            env = prepare_simple_launcher_cmd_env(args)[1]
except Exception as e:
    say(error="%s: %s" % (type(e).__name__, e))
ranks = int(args.num_processes or 1) if multi else 0
words = (["-m"] if args.module else []) + [args.training_script] + list(args.training_script_args)
changed = {k: v for k, v in env.items() if before.get(k) != v}
say(ranks=ranks, program=words, env=changed, multi=multi)
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
    args``) with `env` added."""

    ranks: int
    program: list[str]
    env: dict[str, str]


def is_accelerate(words: list[str]) -> bool:
    """Whether the command (split, a leading ``python`` dropped) is ``accelerate launch``."""
    if words[:2] == ["-m", "accelerate.commands.launch"]:
        return True
    if words[:3] == ["-m", "accelerate.commands.accelerate_cli", "launch"]:
        return True
    return len(words) >= 2 and Path(words[0]).name == "accelerate" and words[1] == "launch"


def launch_args(words: list[str]) -> list[str]:
    """The words after ``accelerate launch`` (or its module's name)."""
    if words[:2] == ["-m", "accelerate.commands.launch"]:
        return words[2:]
    return words[3:] if words[0] == "-m" else words[2:]


def resolve_launch(words: list[str], cwd: Path, python: str | None = None) -> Launch:
    """What ``accelerate launch`` (`words`, the whole command) would start from `cwd`, asked
    of accelerate in the interpreter `python` (this one by default) with this environment,
    so its default config file is the one the user's launcher reads; AccelerateError where
    accelerate is missing, refuses the arguments, or starts what kernelscope does not
    follow (DeepSpeed, TPUs, several machines)."""
    exe = python or sys.executable
    try:
        proc = subprocess.run(
            [exe, "-c", _RESOLVE, *launch_args(words)],
            capture_output=True,
            text=True,
            timeout=RESOLVE_TIMEOUT_S,
            cwd=cwd,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise AccelerateError(f"cannot ask {exe} about accelerate launch: {e}") from None
    said = _said(proc.stdout)
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
            f"--gpu_ids sets {chosen[0]}, which must be set before CUDA starts: run kernelscope "
            f"with {chosen[0]}={env[chosen[0]]} in its environment instead"
        )
    program = [str(w) for w in cast(list[object], said.get("program") or [])]
    return Launch(ranks=int(cast(int, said.get("ranks") or 0)), program=program, env=env)


def _said(stdout: str) -> dict[str, object] | None:
    """The resolver's JSON answer (its last line; a program's import may print before it)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            loaded: object = json.loads(line)
        except ValueError:
            continue
        if isinstance(loaded, dict):
            return cast(dict[str, object], loaded)
    return None
