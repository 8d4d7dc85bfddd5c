# pyright: basic
"""A job's ranks: the process group a launcher started this worker into (torchrun's
variables), and the agreements that keep every rank making as many calls."""

import contextlib
import datetime
import os
import socket
import time
import zlib
from typing import Any

from .errors import JobError
from .names import (
    DIST_AGREE_PORT_ENV,
    DIST_LOCAL_RANK,
    DIST_RANK,
    DIST_TIMEOUT_ENV,
    DIST_WORLD_SIZE,
)


def torchrun_env(rank, world, port):
    """The variables torchrun gives rank `rank` of `world` on one host (the server's twin:
    kernelscope.engine.ranks.rank_env)."""
    return {
        DIST_RANK: str(rank),
        DIST_WORLD_SIZE: str(world),
        DIST_LOCAL_RANK: str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }


def rank_device(torch, want):
    """The device a rank runs on: its own GPU (LOCAL_RANK) when it asks for CUDA."""
    local = os.environ.get(DIST_LOCAL_RANK)
    if local is not None and want in ("auto", "cuda") and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if int(local) >= count:  # one GPU per rank, as torchrun
            raise JobError(
                "bad_device",
                "rank %s needs cuda:%s, but %s has %d CUDA device(s): profile on %d "
                "ranks or fewer (nproc), or on the CPU (gloo)"
                % (local, local, socket.gethostname(), count, count),
            )
        want = "cuda:%s" % local
    return want


class Ranks:
    """The process group of a job of several ranks; a no-op in a job of one process."""

    def __init__(self, torch):
        self.torch = torch
        self.dist = None  # torch.distributed, once joined
        self.device = None
        self.store: Any = None  # kernelscope's store, where a program's ranks agree (adopt)
        self.seq = 0  # agreements made through it
        self.store_error = ""  # why rank 0 could not open it

    def join(self, device):
        """Join the group when the launcher started the worker as one of N ranks: NCCL on a
        GPU, gloo on the CPU; collectives time out after KERNELSCOPE_DIST_TIMEOUT seconds,
        so a hang fails on its line."""
        if int(os.environ.get(DIST_WORLD_SIZE, "1")) <= 1:
            return
        dist = self.torch.distributed
        if device.type == "cuda":
            self.torch.cuda.set_device(device)
        if not dist.is_initialized():
            timeout = float(os.environ.get(DIST_TIMEOUT_ENV, "60"))
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                timeout=datetime.timedelta(seconds=timeout),
            )
        self.dist = dist
        self.device = device if device.type == "cuda" else self.torch.device("cpu")

    def host_store(self):
        """Rank 0 of a program's ranks opens kernelscope's store (DIST_AGREE_PORT_ENV) as
        the program starts, not at its call, so no socket of the program's takes the port
        meanwhile; the others connect at the call (adopt)."""
        port = os.environ.get(DIST_AGREE_PORT_ENV)
        if not port or int(os.environ.get(DIST_WORLD_SIZE, "1")) <= 1 or self.store is not None:
            return
        if int(os.environ.get(DIST_RANK, "0")) != 0:
            return
        try:
            self.store = self._store(int(port), True)
        except Exception as e:
            self.store_error = "kernelscope's store on port %s: %s: %s" % (
                port,
                type(e).__name__,
                str(e).splitlines()[0][:200] if str(e) else "",
            )

    def _store(self, port, host):
        world = int(os.environ[DIST_WORLD_SIZE])
        return self.torch.distributed.TCPStore(
            "127.0.0.1", port, world, host, timeout=self._timeout(), wait_for_workers=False
        )

    def _timeout(self):
        return datetime.timedelta(seconds=float(os.environ.get(DIST_TIMEOUT_ENV, "60")))

    def adopt(self, device, what):
        """Where a program (--via) runs on N ranks and has set up its process group by the
        time of its call (`what`: "call 3 of Net.forward"): meet every rank there, and agree
        from then on through kernelscope's own store (DIST_AGREE_PORT_ENV), never through
        the program's group, where an agreement could meet a collective of the program's
        (a rank still running it). A rank that does not come within the collective timeout
        fails the job, naming the ranks that did not."""
        world = int(os.environ.get(DIST_WORLD_SIZE, "1"))
        if world <= 1 or self.dist is not None:
            return
        dist = self.torch.distributed
        if not (dist.is_available() and dist.is_initialized()):
            return
        self.dist = dist
        self.device = self.torch.device("cpu")
        port = os.environ.get(DIST_AGREE_PORT_ENV)
        if not port:  # ranks started elsewhere (a Ray job): the program's group, on its device
            nccl = str(dist.get_backend()) == "nccl" and device.type == "cuda"
            self.device = device if nccl else self.device
            return
        if self.store_error:
            raise JobError("ranks_apart", self.store_error)
        rank = int(os.environ.get(DIST_RANK, "0"))
        timeout = self._timeout()
        try:
            if self.store is None:
                self.store = self._store(int(port), rank == 0)
        except Exception as e:
            raise JobError("ranks_apart", self._apart(rank, world, what, timeout, e)) from None
        try:
            self.store.set("at/%d" % rank, what)
            self.store.wait(["at/%d" % r for r in range(world)], timeout)
        except Exception as e:
            raise JobError("ranks_apart", self._apart(rank, world, what, timeout, e)) from None

    def _apart(self, rank, world, what, timeout, error):
        """What a rank says when the others did not come to the call."""
        missing = []
        if self.store is not None:
            for r in range(world):
                try:
                    if not self.store.check(["at/%d" % r]):
                        missing.append(str(r))
                except Exception:
                    missing.append(str(r))
        who = "rank %s" % ", ".join(missing) if missing else "the other ranks"
        return (
            "rank %d made %s, and %s did not within %g s (%s): a function only some ranks "
            "call cannot be replayed in lockstep; profile it on one rank (torchrun "
            "--nproc-per-node 1), or a function every rank calls"
            % (rank, what, who, timeout.total_seconds(), type(error).__name__)
        )

    def agree(self, value, op="max", what="a count"):
        """The same number on every rank (the largest or smallest of theirs), so all ranks
        make as many calls of the function, and so as many collectives; the value itself
        in a job of one process. `what` names the agreement: ranks at different ones fail
        the job rather than pair the wrong numbers."""
        dist = self.dist
        if dist is None:
            return value
        if self.store is not None:
            values = self._gathered(what, repr(float(value)))
            chosen = max(values) if op == "max" else min(values)
            return type(value)(chosen)
        # One all-reduce (MAX) carries the value (negated for a minimum) and the agreement's
        # tag twice, once negated: every rank had the same tag where the two maxima cancel.
        sign = 1.0 if op == "max" else -1.0
        tag = float(zlib.crc32(what.encode("utf-8")))
        t = self.torch.tensor(
            [sign * float(value), tag, -tag], dtype=self.torch.float64, device=self.device
        )
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        got, high, low = t.tolist()
        if high != -low:
            raise JobError(
                "ranks_apart",
                "rank %d was agreeing on %s while another rank was at another agreement: "
                "the ranks' jobs went apart (a kernelscope bug; please report it)"
                % (dist.get_rank(), what),
            )
        return type(value)(sign * got)

    def barrier(self):
        """Wait for every rank (the active window opens and closes in lockstep)."""
        if self.store is not None:
            self._gathered("the profiled window", "0")
        elif self.dist is not None:
            self.dist.barrier()

    def _gathered(self, what, text):
        """Every rank's `text` at this point of the job (agreement `what`), through the
        store; JobError where a rank is at another agreement."""
        store = self.store
        assert store is not None
        self.seq += 1
        keys = ["a%d/%d" % (self.seq, r) for r in range(int(os.environ[DIST_WORLD_SIZE]))]
        rank = int(os.environ.get(DIST_RANK, "0"))
        store.set(keys[rank], "%s=%s" % (what, text))
        store.wait(keys)
        said = [store.get(k).decode("utf-8").rpartition("=") for k in keys]
        for r, (theirs, _, _) in enumerate(said):
            if theirs != what:
                raise JobError(
                    "ranks_apart",
                    "rank %d was agreeing on %s while rank %d was agreeing on %s: the "
                    "ranks' jobs went apart (a kernelscope bug; please report it)"
                    % (rank, what, r, theirs),
                )
        return [float(value) for _, _, value in said]

    def leave(self):
        """Destroy the group the job joined, if any; rank 0, which holds kernelscope's store,
        waits (a while) for every rank to be done with it first."""
        store = self.store
        if store is not None:
            with contextlib.suppress(Exception):
                world = int(os.environ[DIST_WORLD_SIZE])
                store.add("done", 1)
                until = time.monotonic() + 10.0
                while int(os.environ.get(DIST_RANK, "0")) == 0 and time.monotonic() < until:
                    if store.add("done", 0) >= world:
                        break
                    time.sleep(0.01)
        dist = self.dist
        if dist is not None and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
