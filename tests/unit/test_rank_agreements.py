"""Ranks agree through kernelscope's own TCP store (a program's ranks) or through their
process group's all-reduce (--nproc, Ray) (worker/program/ranks.py): two real processes,
each a rank; the numbers they agree on, and a job that went apart."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

_RANK = textwrap.dedent(
    """
    import sys, torch
    from kernelscope.worker.program.errors import JobError
    from kernelscope.worker.program.ranks import Ranks
    ranks = Ranks(torch)
    if sys.argv[4] == "group":
        ranks.join(torch.device("cpu"))
    else:
        ranks.host_store()
        if ranks.store is None:
            ranks.store = ranks._store(int(sys.argv[3]), False)
        ranks.dist = torch.distributed
    try:
        print("agreed", ranks.agree(int(sys.argv[1]), "max", what=sys.argv[2]))
        ranks.barrier()
        print("agreed", ranks.agree(int(sys.argv[1]), "min", what=sys.argv[2]))
    except JobError as e:
        print(e.kind, e.message)
    ranks.leave()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ranks(*said: tuple[int, str], through: str = "store") -> list[str]:
    port = _free_port()
    procs: list[subprocess.Popen[str]] = []
    for rank, (value, what) in enumerate(said):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": str(len(said)),
            "KERNELSCOPE_AGREE_PORT": str(port),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "KERNELSCOPE_DIST_TIMEOUT": "20",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _RANK, str(value), what, str(port), through],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return [p.communicate(timeout=60)[0] for p in procs]


def test_ranks_take_the_largest_then_the_smallest() -> None:
    outs = _ranks((3, "the timed calls"), (5, "the timed calls"))
    for out in outs:
        assert out.split("\n")[:2] == ["agreed 5", "agreed 3"], out


def test_ranks_at_different_agreements_fail_the_job_naming_both() -> None:
    outs = _ranks((3, "the timed calls"), (5, "the end of warm-up"))
    assert outs[0].startswith(
        "ranks_apart rank 0 was agreeing on the timed calls while rank 1 was agreeing on "
        "the end of warm-up"
    ), outs[0]
    assert outs[1].startswith("ranks_apart rank 1 was agreeing on the end of warm-up while rank 0")


def test_through_the_group_too_the_largest_then_the_smallest() -> None:
    outs = _ranks((3, "the timed calls"), (5, "the timed calls"), through="group")
    for out in outs:
        assert out.split("\n")[:2] == ["agreed 5", "agreed 3"], out


def test_through_the_group_ranks_at_different_agreements_fail_the_job() -> None:
    outs = _ranks((3, "the timed calls"), (5, "the end of warm-up"), through="group")
    assert outs[0].startswith(
        "ranks_apart rank 0 was agreeing on the timed calls while another rank was at "
        "another agreement"
    ), outs[0]
    assert outs[1].startswith("ranks_apart rank 1 was agreeing on the end of warm-up"), outs[1]
