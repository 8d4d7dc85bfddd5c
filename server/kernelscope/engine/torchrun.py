"""A `--via` command that starts its program through torchrun (``torchrun ...``, ``python -m
torch.distributed.run ...``): how many ranks, and the program each rank runs. kernelscope
starts the ranks itself (engine/ranks.py), on this host, as torchrun would."""

from __future__ import annotations

from pathlib import Path

#: torchrun's options that take a value and decide nothing here: kernelscope's ranks meet on
#: 127.0.0.1 at a free port, without restarts, with their output in the job's log.
_IGNORED_VALUED = frozenset(
    {
        "rdzv-backend",
        "rdzv-endpoint",
        "rdzv-id",
        "rdzv-conf",
        "master-addr",
        "master-port",
        "max-restarts",
        "monitor-interval",
        "start-method",
        "role",
        "log-dir",
        "redirects",
        "tee",
        "local-addr",
        "logs-specs",
        "local-ranks-filter",
        "rdzv-timeout",
    }
)
_IGNORED_FLAGS = frozenset({"standalone", "run-path"})


#: Launchers kernelscope does not follow, and what to give instead.
OTHER_LAUNCHERS = {
    "accelerate": "of accelerate's commands only `accelerate launch [options] script.py ...` "
    "is followed",
    "deepspeed": "deepspeed's launcher is not followed: give `torchrun --nproc-per-node N "
    "script.py ...` (deepspeed.init_distributed() reads torchrun's variables)",
    "torch.distributed.launch": "torch.distributed.launch is deprecated and not followed: "
    "give `torchrun --nproc-per-node N script.py ...` (the script reads LOCAL_RANK from the "
    "environment, not --local-rank)",
    "mpirun": "mpirun is not followed: give `torchrun --nproc-per-node N script.py ...`",
}


#: Tools whose `run` starts a command in an environment of their choosing.
ENV_RUNNERS = frozenset({"uv", "poetry", "pdm", "hatch", "pipenv", "pixi", "conda", "rye"})


def other_launcher(words: list[str]) -> str | None:
    """What to give instead where the command starts with a launcher kernelscope does not
    follow (deepspeed, torch.distributed.launch, mpirun, accelerate's other commands) or
    with an environment tool's `run` (``uv run``, ``poetry run``); None otherwise."""
    if not words:
        return None
    tool = Path(words[0]).name
    if tool in ENV_RUNNERS and words[1:2] == ["run"]:
        return (
            f"`{tool} run` chooses the interpreter: give the program itself (`train.py "
            f"...`), and that interpreter as --python (the kernelscope.worker.python "
            f"setting in the editor): `{tool} run python -c 'import sys; "
            "print(sys.executable)'` prints it"
        )
    if words[0] == "-m" and len(words) > 1:
        return OTHER_LAUNCHERS.get(words[1].split(".commands")[0])
    return OTHER_LAUNCHERS.get(Path(words[0]).name)


class TorchrunError(ValueError):
    """A torchrun command kernelscope cannot run as written; the message says why."""


def is_torchrun(words: list[str]) -> bool:
    """Whether the command (split, a leading ``python`` dropped) starts with torchrun."""
    if not words:
        return False
    return Path(words[0]).name == "torchrun" or words[:2] == ["-m", "torch.distributed.run"]


def split_torchrun(words: list[str]) -> tuple[int, list[str]]:
    """(ranks, the program's words: ``script.py args`` or ``-m module args``) of a torchrun
    command; TorchrunError where it asks for more than one host or names no program."""
    rest = words[2:] if words[:2] == ["-m", "torch.distributed.run"] else words[1:]
    nproc, module = 1, False
    i = 0
    while i < len(rest) and rest[i].startswith("-") and rest[i] != "--":
        word = rest[i]
        i += 1
        if word in ("-m", "--module"):
            module = True
            continue
        name, eq, value = word.lstrip("-").partition("=")
        name = name.replace("_", "-")
        if not eq and (name in _IGNORED_VALUED or name in _CHECKED):
            if i >= len(rest):
                raise TorchrunError(f"torchrun's {word} needs a value")
            value, i = rest[i], i + 1
        nproc = _checked(word, name, value) or nproc
    if i < len(rest) and rest[i] == "--":
        i += 1
    program = rest[i:]
    if not program:
        raise TorchrunError("torchrun names no program: give its script (or -m module)")
    return nproc, (["-m", *program] if module else program)


#: The options read: the ranks, and those that must say "one host".
_CHECKED = frozenset({"nproc-per-node", "nnodes", "node-rank"})


def _checked(word: str, name: str, value: str) -> int:
    """The ranks `--nproc-per-node` asks for (0 for any other option); TorchrunError for an
    option kernelscope cannot follow."""
    if name == "nproc-per-node":
        if not value.isdigit() or int(value) < 1:
            raise TorchrunError(
                f"torchrun --nproc-per-node {value}: give the number of ranks (e.g. 2); "
                "kernelscope starts them on one host, one GPU each"
            )
        return int(value)
    if name == "nnodes" and value not in ("1", "1:1"):
        raise TorchrunError(
            f"torchrun --nnodes {value}: kernelscope runs the ranks of one host; "
            "profile with --nnodes 1"
        )
    if name == "node-rank" and value != "0":
        raise TorchrunError(f"torchrun --node-rank {value}: one host, node rank 0")
    if name == "no-python":
        raise TorchrunError("torchrun --no-python: kernelscope runs Python programs only")
    if name not in _CHECKED and name not in _IGNORED_VALUED and name not in _IGNORED_FLAGS:
        raise TorchrunError(f"torchrun option {word} is not one kernelscope knows")
    return 0


def ranks_for(asked: int | None, torchrun_ranks: int, default: int | None) -> int:
    """The ranks a job runs on: --nproc (`asked`), else the torchrun command's, else the
    project's or the settings' `default`; TorchrunError where --nproc and torchrun differ."""
    if asked and torchrun_ranks and asked != torchrun_ranks:
        raise TorchrunError(
            f"--nproc {asked} and the torchrun command's {torchrun_ranks} rank"
            f"{'' if torchrun_ranks == 1 else 's'} (its --nproc-per-node, 1 when not given) "
            "disagree: give one of them"
        )
    return asked or torchrun_ranks or default or 1
