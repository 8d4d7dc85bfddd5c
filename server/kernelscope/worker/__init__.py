"""The worker program's source and the bootstrap that streams it over stdin.

Nothing here imports torch: the server only reads ``program.py`` as text.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

# Reads exactly one length-prefixed source text from fd 0, unbuffered, then runs it.
BOOTSTRAP = (
    "import os,sys\n"
    "def _ks_read(n):\n"
    "    b=b''\n"
    "    while len(b)<n:\n"
    "        c=os.read(0,n-len(b))\n"
    "        if not c: sys.exit(3)\n"
    "        b+=c\n"
    "    return b\n"
    "_ks_src=_ks_read(int.from_bytes(_ks_read(4),'big'))\n"
    "exec(compile(_ks_src,'kernelscope_worker.py','exec'),{'__name__':'kernelscope_worker'})\n"
)


@cache
def worker_source() -> bytes:
    """The worker program, as sent to every interpreter that runs it."""
    return resources.files(__name__).joinpath("program.py").read_bytes()


def bootstrap_payload() -> bytes:
    """The bytes to write to a fresh worker's stdin: 4-byte length, then the source."""
    src = worker_source()
    return len(src).to_bytes(4, "big") + src
